//! Tests of version-3 logs: compact records, sync marks, chain records, a
//! whole-file reference reading the chunked replay must agree with, and
//! replay of arbitrary bytes.

use std::sync::Arc;

use flexspace::{MemFile, StorageFile};
use proptest::prelude::*;

use super::format::*;
use super::record3::*;
use super::replay::REPLAY_CHUNK;
use super::test_support::{bytes_of, damaged_copies, mem, replay_with, Verdict};
use super::{Record, Wal};
use crate::error::{Error, Result};

/// The record at `pos` of a whole version-3 file, if one verifies.
fn record_at(b: &[u8], pos: usize, salt: u32) -> Option<(Head, &[u8])> {
    let head = parse_head(b.get(pos..)?)?;
    let rec = b.get(pos..pos.checked_add(head.record_len())?)?;
    verifies(rec, salt).then_some((head, &rec[head.len..]))
}

/// Version-3 replay as simply as it can be said: the whole file read at
/// once, the damage scan tries every position with a full parse and CRC.
/// `None` for a file whose header names version 1 or 2, whose records
/// are encoded otherwise: damage to a version-5 log can do that (below).
fn reference(b: &[u8]) -> Option<Verdict> {
    if b.len() < V1_HEADER_LEN as usize {
        return Some(Err(true));
    }
    let Ok(n) = header_len(b) else {
        return Some(Err(true));
    };
    if b.len() < n as usize {
        return Some(Err(true));
    }
    let Ok(h) = parse_header(b) else {
        return Some(Err(true));
    };
    // No checksum covers the version field: damage may turn it into
    // another version of the same record format (3 to 5 differ only in
    // what the header holds and what payloads mean), or into 1 or 2 (5
    // with bit 2 flipped is 1), another record format.
    if h.version < 3 {
        return None;
    }
    assert!(h.version <= FORMAT_VERSION, "{}", h.version);
    Some(reference_v3(b, n as usize, &h))
}

/// [`reference`] of a file whose header `h`, `n` bytes long, names a
/// version from 3 on.
fn reference_v3(b: &[u8], n: usize, h: &Header) -> Verdict {
    if (b.len() as u64) < h.durable {
        return Err(true);
    }
    let salt = salt(h.first);
    let (mut records, mut chain) = (Vec::new(), None);
    let mut expected = h.first;
    let mut pos = n;
    while let Some((head, body)) = record_at(b, pos, salt) {
        match head.kind {
            BATCH => {
                let Some((d, payload)) = batch_body(body) else {
                    break;
                };
                let Some(seq) = expected.checked_add(d).filter(|&s| s < u64::MAX) else {
                    break;
                };
                records.push(Record {
                    seq,
                    payload: payload.to_vec(),
                });
                expected = seq + 1;
            }
            MARK => match two_varints(body) {
                Some((synced, rel)) if synced <= pos as u64 && rel == expected - h.first => {}
                _ => break,
            },
            _ => match two_varints(body) {
                Some(link) if pos == n => chain = Some(link),
                _ => break,
            },
        }
        pos += head.record_len();
    }
    if (pos as u64) < h.durable {
        return Err(true);
    }
    let rel = expected - h.first;
    let vouched = (pos + 1..b.len()).any(|p| {
        record_at(b, p, salt).is_some_and(|(head, body)| {
            head.kind == MARK
                && two_varints(body).is_some_and(|(synced, r)| {
                    synced > pos as u64
                        && synced <= p as u64
                        && r >= rel
                        && r - rel <= (p - pos) as u64
                })
        })
    });
    if vouched {
        return Err(true);
    }
    Ok((records, chain))
}

const CHUNKS: [usize; 6] = [1, 7, 25, 100, 4096, REPLAY_CHUNK];

/// Replays `b` at every chunk size and as the reference; all must agree.
fn judged_alike(b: Vec<u8>, what: &str) -> Verdict {
    let file = MemFile::from_bytes(b.clone());
    let whole = replay_with(&file, usize::MAX >> 1);
    assert_eq!(
        Some(&whole),
        reference(&b).as_ref(),
        "{what}: differs from the reference"
    );
    for chunk in CHUNKS {
        assert_eq!(replay_with(&file, chunk), whole, "{what}, chunk {chunk}");
    }
    whole
}

#[test]
fn records_are_compact_and_replay_in_order() {
    let f = mem();
    let wal = Wal::create(f.clone(), "wal", None, 10, 0).unwrap();
    let mut want = Vec::new();
    let mut seq = 10;
    for i in 0..200u64 {
        let payload = vec![i as u8; 150];
        let end = wal.append(seq, &payload).unwrap();
        want.push(Record { seq, payload });
        seq += 1 + i % 3;
        if i % 50 == 0 {
            wal.sync_to(end).unwrap();
        }
    }
    wal.sync().unwrap();
    let got = Wal::read(f.as_ref(), "wal").unwrap();
    assert_eq!(got, want);
    // A 150-byte payload takes 157 bytes (24 more in version 2); the
    // marks after the 4 syncs take a few bytes each.
    let records = f.len().unwrap() - HEADER_LEN;
    assert!(
        records <= 200 * 157 + 4 * MAX_SMALL as u64,
        "{records} bytes"
    );
}

#[test]
fn a_record_numbered_below_the_last_is_refused() {
    let wal = Wal::create(mem(), "wal", None, 5, 0).unwrap();
    assert!(matches!(
        wal.append(4, b"x"),
        Err(Error::InvalidArgument(_))
    ));
    wal.append(5, b"x").unwrap();
    assert!(matches!(
        wal.append(5, b"y"),
        Err(Error::InvalidArgument(_))
    ));
    wal.append(9, b"z").unwrap();
}

/// A log of records, synced in two stretches, then an unsynced one; its
/// first record a chain record.
fn three_stretches() -> (Vec<u8>, u64) {
    let f = mem();
    let prev = Arc::new(Wal::create(mem(), "prev", None, 1, 0).unwrap());
    prev.append(1, b"before").unwrap();
    let wal = Wal::create(f.clone(), "wal", None, 7, 0).unwrap();
    wal.link(prev, 4).unwrap();
    for i in 0..12u8 {
        wal.append(7 + u64::from(i) * 2, &vec![i; 3 + usize::from(i) * 5])
            .unwrap();
        if i == 4 || i == 8 {
            wal.sync().unwrap();
        }
    }
    wal.flush().unwrap();
    (bytes_of(f.as_ref()), wal.end())
}

#[test]
fn chunked_replay_judges_damage_as_the_reference_does() {
    let (bytes, _) = three_stretches();
    let whole = judged_alike(bytes.clone(), "intact").unwrap();
    assert_eq!(whole.0.len(), 12);
    assert_eq!(whole.1.map(|c| c.0), Some(4));
    let mut outcomes = [0usize; 3];
    let mut check = |b: Vec<u8>, what: &str| match judged_alike(b, what) {
        Ok((r, _)) if r.len() == 12 => outcomes[0] += 1,
        Ok((r, _)) => {
            assert_eq!(r[..], whole.0[..r.len()], "{what}: not a prefix");
            outcomes[1] += 1
        }
        Err(_) => outcomes[2] += 1,
    };
    damaged_copies(&bytes, 5, 30, 300, &mut check);
    assert!(outcomes.iter().all(|&n| n > 0), "{outcomes:?}");
}

#[test]
fn damage_vouched_for_by_a_later_mark_is_corruption() {
    // 20-byte payloads: records of 26 bytes (CRC, length, sequence).
    const R: usize = 26;
    let f = mem();
    let wal = Wal::create(f.clone(), "wal", None, 1, 0).unwrap();
    for i in 1..=5u64 {
        wal.append(i, &[i as u8; 20]).unwrap();
    }
    wal.sync().unwrap();
    // Appended after the sync: a mark (8 bytes) first, then the record.
    wal.append(6, &[6; 20]).unwrap();
    wal.flush().unwrap();
    let bytes = bytes_of(f.as_ref());
    let mark_at = HEADER_LEN as usize + 5 * R;
    assert_eq!(bytes.len(), mark_at + 8 + R);
    // Record 3 is damaged: the mark says it was synced.
    let mut b = bytes.clone();
    b[HEADER_LEN as usize + 2 * R + 10] ^= 1;
    assert_eq!(judged_alike(b, "synced record damaged"), Err(true));
    // Record 5 damaged, and the mark far out in a zero tail: found too.
    let mark = bytes[mark_at..mark_at + 8].to_vec();
    let mut b = bytes[..mark_at].to_vec();
    b[HEADER_LEN as usize + 4 * R + 10] ^= 1;
    let far = mark_at + (1 << 20) + 13;
    b.resize(far, 0);
    b.extend_from_slice(&mark);
    b.resize(far + 4000, 0);
    for chunk in [100, 4096, REPLAY_CHUNK] {
        assert_eq!(
            replay_with(&MemFile::from_bytes(b.clone()), chunk),
            Err(true),
            "chunk {chunk}"
        );
    }
    // The unsynced record damaged: a torn tail.
    let mut b = bytes;
    let last = b.len() - 3;
    b[last] ^= 1;
    assert_eq!(judged_alike(b, "torn").map(|r| r.0.len()), Ok(5));
}

#[test]
fn a_log_that_takes_over_a_file_replays_only_its_own_records() {
    // Over a version-3 log and over a version-2 one.
    for old_version in [2, 3, 4] {
        let f = mem();
        let old = Wal::reuse_as(f.clone(), "old", None, 1, old_version, 0).unwrap();
        for seq in 1..=300u64 {
            old.append(seq, &vec![seq as u8; 1 + (seq as usize * 7) % 90])
                .unwrap();
        }
        old.sync().unwrap();
        for new_records in [0u64, 1, 5, 40] {
            let g: Arc<dyn StorageFile> = Arc::new(MemFile::from_bytes(bytes_of(f.as_ref())));
            let wal = Wal::reuse(g.clone(), "wal", None, 301, 0).unwrap();
            let mut want = Vec::new();
            for i in 0..new_records {
                let payload = vec![0xA0 ^ i as u8; 3 + i as usize];
                wal.append(301 + i, &payload).unwrap();
                want.push(Record {
                    seq: 301 + i,
                    payload,
                });
            }
            wal.sync().unwrap();
            let got = judged_alike(bytes_of(g.as_ref()), "taken over");
            assert_eq!(got, Ok((want, None)), "over version {old_version}");
        }
    }
}

#[test]
fn a_log_records_the_log_it_follows_and_a_flip_there_is_damage() {
    let f = mem();
    let wal = Wal::create(f.clone(), "wal", None, 7, 3).unwrap();
    wal.append(7, b"one").unwrap();
    wal.sync().unwrap();
    let found = Wal::replay(f.as_ref(), "wal", |_, _| Ok(())).unwrap();
    assert_eq!((found.back, found.records), (3, 1));
    // Version 3 had no such field: it reads as not recorded.
    let old = mem();
    Wal::reuse_as(old.clone(), "old", None, 7, 3, 3).unwrap();
    assert_eq!(
        Wal::replay(old.as_ref(), "old", |_, _| Ok(()))
            .unwrap()
            .back,
        0
    );
    for bit in 0..32 {
        let mut b = bytes_of(f.as_ref());
        b[BACK_AT + bit / 8] ^= 1 << (bit % 8);
        let e = Wal::replay(&MemFile::from_bytes(b), "wal", |_, _| Ok(())).unwrap_err();
        assert!(e.is_corruption(), "bit {bit}: {e}");
    }
}

#[test]
fn a_log_of_a_newer_version_is_refused_by_name() {
    let f = mem();
    Wal::create(f.clone(), "wal", None, 1, 0).unwrap();
    let mut b = bytes_of(f.as_ref());
    b[8..12].copy_from_slice(&6u32.to_le_bytes());
    let e = Wal::read(&MemFile::from_bytes(b), "wal").unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains("version 6"), "{e}");
}

#[test]
fn a_sync_of_a_linked_log_makes_the_log_before_it_durable_first() {
    let storage = flexspace::FaultStorage::new();
    let open = |n: &str| flexspace::Storage::open_file(&storage, n, true).unwrap();
    let (fa, fb, fc) = (open("a"), open("b"), open("c"));
    let a = Arc::new(Wal::create(fa, "a", None, 1, 0).unwrap());
    for seq in 1..=50 {
        a.append(seq, &[1; 30]).unwrap();
    }
    let b = Arc::new(Wal::create(fb, "b", None, 51, 0).unwrap());
    b.link(a.clone(), 1).unwrap();
    for seq in 51..=60 {
        b.append(seq, &[2; 30]).unwrap();
    }
    // Two rotations without a sync: c after b after a.
    let c = Wal::create(fc, "c", None, 61, 0).unwrap();
    c.link(b.clone(), 2).unwrap();
    let end = c.append(61, &[3; 30]).unwrap();
    // Nothing synced yet: a crash keeps the headers only.
    let image = storage.crash_image();
    let read = |s: &flexspace::FaultStorage, n: &str| {
        let f = flexspace::Storage::open_file(s, n, false).unwrap();
        Wal::read(f.as_ref(), n).unwrap().len()
    };
    assert_eq!((read(&image, "a"), read(&image, "b")), (0, 0));
    c.sync_to(end).unwrap();
    let image = storage.crash_image();
    assert_eq!(
        (read(&image, "a"), read(&image, "b"), read(&image, "c")),
        (50, 10, 1)
    );
    // The chain records name each log's predecessor and its end.
    let chain = |s: &flexspace::FaultStorage, n: &str| {
        let f = flexspace::Storage::open_file(s, n, false).unwrap();
        Wal::replay(f.as_ref(), n, |_, _| Ok(())).unwrap().chain
    };
    assert_eq!(chain(&image, "b"), Some((1, a.end())));
    assert_eq!(chain(&image, "c"), Some((2, b.end())));
    assert_eq!(chain(&image, "a"), None);
    // A log with records refuses a chain record.
    assert!(a.link(b.clone(), 9).is_err());
}

/// A valid version-3 log of `n` records (some synced), as bytes, and its
/// records.
fn valid_log(n: u64, sync_every: u64) -> (Vec<u8>, Vec<Record>) {
    let f = mem();
    let wal = Wal::create(f.clone(), "wal", None, 3, 0).unwrap();
    let mut want = Vec::new();
    for i in 0..n {
        let payload = vec![(i * 7) as u8; 1 + (i as usize * 13) % 60];
        wal.append(3 + 2 * i, &payload).unwrap();
        want.push(Record {
            seq: 3 + 2 * i,
            payload,
        });
        if sync_every > 0 && i % sync_every == sync_every - 1 {
            wal.sync().unwrap();
        }
    }
    wal.flush().unwrap();
    (bytes_of(f.as_ref()), want)
}

/// Replay of `b` never panics: it gives a prefix of `want` or a typed
/// corruption error, and agrees with the reference.
fn prefix_or_corruption(b: Vec<u8>, want: &[Record]) -> std::result::Result<(), TestCaseError> {
    let got = replay_with(&MemFile::from_bytes(b.clone()), 64);
    // A header damaged into version 1 or 2 has no reference: the prefix
    // or corruption below is what is checked of it.
    if let Some(want) = reference(&b) {
        prop_assert_eq!(&got, &want);
    }
    if let Ok((records, _)) = got {
        prop_assert!(records.len() <= want.len());
        prop_assert_eq!(&records[..], &want[..records.len()]);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn replay_of_arbitrary_bytes_never_panics(
        body in proptest::collection::vec(any::<u8>(), 0..600),
        with_header in any::<bool>(),
    ) {
        let mut b = Vec::new();
        if with_header {
            b.extend_from_slice(&header(17));
        }
        b.extend_from_slice(&body);
        let got: Result<Vec<Record>> = Wal::read(&MemFile::from_bytes(b.clone()), "wal");
        if let Err(e) = &got {
            prop_assert!(e.is_corruption(), "{}", e);
        }
        if with_header {
            prop_assert_eq!(Some(replay_with(&MemFile::from_bytes(b.clone()), 64)), reference(&b));
        }
    }

    #[test]
    fn a_damaged_log_replays_a_prefix_or_reports_corruption(
        n in 1u64..40,
        sync_every in 0u64..6,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let (mut b, want) = valid_log(n, sync_every);
        for (at, x) in flips {
            let i = at.index(b.len());
            b[i] ^= x;
        }
        if let Some(c) = cut {
            b.truncate(c.index(b.len() + 1));
        }
        prefix_or_corruption(b, &want)?;
    }
}

/// A store whose logs the previous build wrote (version 2) opens and
/// recovers every write: the logs a crash left are rewritten here as that
/// build wrote them (same header, records in the version-2 encoding).
#[test]
fn a_store_with_version_2_logs_recovers() {
    use flexspace::{FaultStorage, Storage};
    let opts = || {
        crate::Options::new()
            .create_if_missing(true)
            .memtable_bytes(2048)
            .cache_bytes(32 << 10)
    };
    let storage = Arc::new(FaultStorage::new());
    storage.slow_syncs("data", std::time::Duration::from_millis(300));
    let db = crate::Db::open_with_storage(storage.clone(), "v2", opts()).unwrap();
    let mut model = std::collections::BTreeMap::new();
    for i in 0..300u32 {
        let k = format!("k{:03}", (i * 37) % 200).into_bytes();
        let v = vec![i as u8; 5 + (i as usize % 60)];
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.sync().unwrap();
    let image = Arc::new(storage.crash_image());
    drop(db);
    let mut rewritten = 0;
    for name in image.list_files().unwrap() {
        if !(name.starts_with("wal-") && name.ends_with(".log")) {
            continue;
        }
        let file = image.open_file(&name, false).unwrap();
        let bytes = bytes_of(file.as_ref());
        let first = parse_header(&bytes).unwrap().first;
        let records = Wal::read(file.as_ref(), &name).unwrap();
        let v2: Arc<dyn StorageFile> = Arc::new(MemFile::new());
        let wal = Wal::reuse_as(v2.clone(), &name, None, first, 2, 0).unwrap();
        for r in &records {
            wal.append(r.seq, &r.payload).unwrap();
        }
        wal.sync().unwrap();
        let old = bytes_of(v2.as_ref());
        assert_eq!(u32_at(&old, 8), 2);
        image.set_file_bytes(&name, old);
        rewritten += usize::from(!records.is_empty());
    }
    assert!(rewritten >= 2, "{rewritten} logs with records");
    let db = crate::Db::open_with_storage(image, "v2", opts()).unwrap();
    let got: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
        db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(got, model);
}
