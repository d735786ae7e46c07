//! Recovery from a damaged or crafted logical log (`log` file), through
//! `FlexSpace::open` on the fault-injecting storage.
//!
//! What each property proves:
//! - `arbitrary_log_bytes`: any bytes after a valid header, or none, open
//!   as a typed error or as a space holding a committed state.
//! - `damaged_logs`: bit flips, truncations and splices of the log of a
//!   space left by a crash (several committed batches) or closed cleanly
//!   open as a typed error or a committed state; never a panic, never
//!   bytes that were not committed.
//! - `flips_in_a_synced_log_are_refused`: flipped bits anywhere in a log
//!   whose every byte was synced are `Corrupt` naming the log, never a
//!   rollback to an earlier commit (a crash cannot leave such bytes).
//! - `crafted_batches`: committed batches whose entries verify but carry
//!   arbitrary operations, offsets, lengths and addresses are replayed
//!   into a space that takes reads and writes, or refused as `Corrupt`
//!   naming the log and the entry's byte offset; an address past the data
//!   file is refused before it sizes anything. (Extents that share bytes
//!   are not refused at open: see `crafted_batches`.)
//!
//! Cases: `PROPTEST_CASES` (proptest's default otherwise).

mod common;

use std::sync::{Arc, OnceLock};

use common::content;
use flexspace::{Error, FaultStorage, FlexSpace, Options};
use proptest::prelude::*;
use proptest::sample::Index;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ENTRY: usize = 32;
const HEADER: usize = 32;

fn opts() -> Options {
    Options::new()
        .create(true)
        .auto_maintenance(false)
        .commit_log_bytes(1 << 20)
        .checkpoint_log_bytes(1 << 20)
}

/// A log entry as docs/FORMAT.md lays it out.
fn entry(op: u8, tag: u16, a: u64, b: u64, c: u64) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[0] = op;
    e[2..4].copy_from_slice(&tag.to_le_bytes());
    e[8..16].copy_from_slice(&a.to_le_bytes());
    e[16..24].copy_from_slice(&b.to_le_bytes());
    e[24..32].copy_from_slice(&c.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&e[0..4]), &e[8..]);
    e[4..8].copy_from_slice(&crc.to_le_bytes());
    e
}

/// Appends `body` (whole entries) and the commit entry closing it.
fn commit(log: &mut Vec<u8>, seq: u64, body: &[u8]) {
    log.extend_from_slice(body);
    let count = (body.len() / ENTRY) as u64;
    let crc = u64::from(crc32c::crc32c(body));
    log.extend_from_slice(&entry(6, 0, seq, count, crc));
}

/// A space image and every state a commit left in it.
struct Base {
    image: FaultStorage,
    states: Vec<Vec<u8>>,
}

/// `crashed`: several batches in the log (no close); otherwise closed, so
/// the log holds only its header.
fn build(crashed: bool) -> Base {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut states = vec![Vec::new()];
    let mut model = Vec::new();
    for _ in 0..5 {
        for _ in 0..8 {
            let d: Vec<u8> = (0..rng.gen_range(1..300)).map(|_| rng.gen()).collect();
            let at = rng.gen_range(0..=model.len());
            space.insert(at as u64, &d).unwrap();
            model.splice(at..at, d);
        }
        if !model.is_empty() {
            let at = rng.gen_range(0..model.len());
            space.set_tag(at as u64, 7).unwrap();
            let n = rng.gen_range(1..=(model.len() - at).min(50));
            space.collapse(at as u64, n as u64).unwrap();
            model.drain(at..at + n);
        }
        space.sync().unwrap();
        states.push(model.clone());
    }
    let image = if crashed {
        let image = storage.crash_image();
        std::mem::forget(space);
        image
    } else {
        space.close().unwrap();
        storage.crash_image()
    };
    Base { image, states }
}

fn bases() -> &'static [Base; 2] {
    static B: OnceLock<[Base; 2]> = OnceLock::new();
    B.get_or_init(|| [build(true), build(false)])
}

/// Opens `storage`; a typed refusal is `None`.
fn open(storage: FaultStorage, what: &str) -> Option<FlexSpace> {
    match FlexSpace::open_with_storage(Arc::new(storage), Options::new()) {
        Ok(s) => Some(s),
        Err(Error::Corrupt { file, detail }) => {
            assert!(file == "log" || file == "tree", "{what}: {file}: {detail}");
            None
        }
        Err(Error::NotAFlexSpace(_)) => None,
        Err(e) => panic!("{what}: unexpected error {e}"),
    }
}

/// A space recovered from a damaged log: a committed state.
fn check_committed(base: &Base, log: Vec<u8>, what: &str) {
    let copy = base.image.crash_image();
    copy.set_file_bytes("log", log);
    if let Some(space) = open(copy, what) {
        space.check_invariants();
        let got = content(&space);
        assert!(
            base.states.contains(&got),
            "{what}: recovered content that was never committed"
        );
        space.close().unwrap();
    }
}

#[derive(Clone, Debug)]
enum Damage {
    Flip(Index, u8),
    Truncate(Index),
    Splice(Index, Index, u16),
    /// Bytes inserted at a place (a misplaced write).
    Insert(Index, Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<Index>(), 0..8u8).prop_map(|(i, b)| Damage::Flip(i, b)),
        1 => any::<Index>().prop_map(Damage::Truncate),
        2 => (any::<Index>(), any::<Index>(), 1..200u16).prop_map(|(a, b, n)| Damage::Splice(a, b, n)),
        1 => (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..40)).prop_map(|(i, b)| Damage::Insert(i, b)),
    ]
}

fn apply_damage(log: &mut Vec<u8>, d: &Damage) {
    if log.is_empty() {
        return;
    }
    match d {
        Damage::Flip(i, b) => {
            let at = i.index(log.len());
            log[at] ^= 1 << b;
        }
        Damage::Truncate(i) => log.truncate(i.index(log.len())),
        Damage::Splice(from, to, n) => {
            let (from, to) = (from.index(log.len()), to.index(log.len()));
            let n = usize::from(*n).min(log.len() - from).min(log.len() - to);
            let src = log[from..from + n].to_vec();
            log[to..to + n].copy_from_slice(&src);
        }
        Damage::Insert(i, b) => {
            let at = i.index(log.len());
            log.splice(at..at, b.iter().copied());
        }
    }
}

/// A value for an entry's field: small, near a boundary, or anything.
fn field() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..3000u64,
        1 => Just(u64::MAX),
        1 => (0..4u64).prop_map(|d| (1 << 48) - d),
        1 => (0..4u64).prop_map(|d| (1 << 63) - d),
        1 => (0..64u64).prop_map(|s| 4 << 20 << (s % 20)),
        2 => any::<u64>(),
    ]
}

fn crafted_entry() -> impl Strategy<Value = [u8; ENTRY]> {
    (0u8..10, any::<u16>(), field(), field(), field())
        .prop_map(|(op, tag, a, b, c)| entry(op, tag, a, b, c))
}

proptest! {
    #[test]
    fn arbitrary_log_bytes(clean in any::<bool>(), keep_header in any::<bool>(),
                           bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let base = &bases()[usize::from(clean)];
        let mut log = base.image.file_bytes("log").unwrap();
        log.truncate(if keep_header { HEADER } else { 0 });
        log.extend_from_slice(&bytes);
        check_committed(base, log, "arbitrary bytes");
    }

    #[test]
    fn damaged_logs(clean in any::<bool>(), damages in proptest::collection::vec(damage(), 1..4)) {
        let base = &bases()[usize::from(clean)];
        let mut log = base.image.file_bytes("log").unwrap();
        for d in &damages {
            apply_damage(&mut log, d);
        }
        check_committed(base, log, &format!("{damages:?}"));
    }

    #[test]
    fn flips_in_a_synced_log_are_refused(flips in proptest::collection::vec((any::<Index>(), 0..8u8), 1..4)) {
        let base = &bases()[0];
        let log = base.image.file_bytes("log").unwrap();
        let mut damaged = log.clone();
        for (i, b) in &flips {
            apply_damage(&mut damaged, &Damage::Flip(*i, *b));
        }
        let copy = base.image.crash_image();
        copy.set_file_bytes("log", damaged.clone());
        match FlexSpace::open_with_storage(Arc::new(copy), Options::new()) {
            Err(Error::Corrupt { file, .. }) => prop_assert_eq!(file, "log"),
            Ok(space) => {
                // Flips that cancel out leave the log as it was.
                prop_assert_eq!(&damaged, &log, "opened a damaged log");
                prop_assert_eq!(&content(&space), base.states.last().unwrap());
                space.close().unwrap();
            }
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }

    #[test]
    fn crafted_batches(clean in any::<bool>(),
                       batches in proptest::collection::vec(proptest::collection::vec(crafted_entry(), 0..5), 1..3)) {
        let base = &bases()[usize::from(clean)];
        let mut log = base.image.file_bytes("log").unwrap();
        for (i, body) in batches.iter().enumerate() {
            commit(&mut log, (1 << 40) + i as u64, &body.concat());
        }
        let copy = base.image.crash_image();
        copy.set_file_bytes("log", log);
        if let Some(space) = open(copy, "crafted") {
            // Not `check_invariants`: recovery does not check that extents
            // are disjoint (that needs every extent sorted by address at
            // open); a crafted batch can map one byte twice. Damage cannot
            // (it would have to forge two CRC32Cs).
            // The space may now be huge (holes): read a window at each end.
            let len = space.len();
            let mut buf = vec![0u8; len.min(4096) as usize];
            for at in [0, len - buf.len() as u64] {
                match space.read(at, &mut buf) {
                    Ok(_) | Err(Error::Corrupt { .. } | Error::Io { .. }) => {}
                    Err(e) => panic!("read: {e}"),
                }
            }
            match space.insert(len / 2, b"after") {
                Ok(()) => match space.sync() {
                    Ok(()) | Err(Error::Corrupt { .. } | Error::Io { .. } | Error::NoSpace(_)) => {}
                    Err(e) => panic!("sync: {e}"),
                },
                Err(Error::OutOfRange { .. } | Error::Tree(_)) => {}
                Err(e) => panic!("insert: {e}"),
            }
            let _ = space.close();
        }
    }
}

/// The regression that sized the segment table from a crafted address: a
/// committed Insert at the top of the 48-bit range used to allocate a
/// 2^26-entry table (512 MiB); it is now refused as past the data file.
#[test]
fn an_address_past_the_data_file_is_refused_without_allocating() {
    let base = &bases()[1];
    let mut log = base.image.file_bytes("log").unwrap();
    commit(&mut log, 1, &entry(1, 0, 0, 100, (1 << 47) + 5));
    let copy = base.image.crash_image();
    copy.set_file_bytes("log", log);
    match FlexSpace::open_with_storage(Arc::new(copy), Options::new()) {
        Err(Error::Corrupt { file, detail }) => {
            assert_eq!(file, "tree");
            assert!(detail.contains("past the data file"), "{detail}");
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
    }
}

/// A committed operation the tree refuses names the log and the entry.
#[test]
fn a_refused_operation_names_the_entry() {
    let base = &bases()[1];
    let mut log = base.image.file_bytes("log").unwrap();
    let good = entry(2, 0, 0, 10, 0);
    commit(&mut log, 1, &good);
    // A collapse far past the end, second entry of the second batch.
    let body = [good, entry(3, 0, 1 << 40, 5, 0)].concat();
    commit(&mut log, 2, &body);
    let copy = base.image.crash_image();
    copy.set_file_bytes("log", log);
    match FlexSpace::open_with_storage(Arc::new(copy), Options::new()) {
        Err(Error::Corrupt { file, detail }) => {
            assert_eq!(file, "log");
            let at = HEADER + 2 * ENTRY + ENTRY;
            assert!(detail.contains(&format!("entry at byte {at}")), "{detail}");
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
    }
}
