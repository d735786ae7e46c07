//! Expiry (`put_with_ttl`): an expired pair is invisible to every read
//! from its deadline on, in the MemTable and in the space, across a
//! reopen, in snapshots, transactions and keyspaces; an expired version
//! hides the older ones; the expiry queue removes expired pairs; a random
//! workload against a model with a hand-moved clock (`ManualClock`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flexdb::{Db, Error, Isolation, ManualClock, Options, WriteBatch};
use flexspace::FaultStorage;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn opts(clock: &ManualClock) -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
        .clock(clock.clone())
        // The test sweeps by hand (`remove_expired`).
        .expiry_interval(Duration::from_secs(3600))
}

const SEC: Duration = Duration::from_secs(1);

fn every_read_sees(db: &Db, key: &[u8], want: Option<&[u8]>) {
    let want = want.map(<[u8]>::to_vec);
    assert_eq!(db.get(key).unwrap(), want, "get");
    assert_eq!(db.contains(key).unwrap(), want.is_some(), "contains");
    let value = db.value_and_ttl(key).unwrap().map(|(v, _)| v);
    assert_eq!(value, want, "value_and_ttl");
    let scanned: Option<Vec<u8>> = db
        .iter()
        .map(|kv| kv.unwrap())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v);
    assert_eq!(scanned, want, "iter");
    let back: Option<Vec<u8>> = db
        .iter()
        .rev()
        .map(|kv| kv.unwrap())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v);
    assert_eq!(back, want, "iter backwards");
    assert_eq!(db.snapshot().get(key).unwrap(), want, "snapshot");
    let t = db.transaction(Isolation::Snapshot);
    assert_eq!(t.get(key).unwrap(), want, "transaction");
}

#[test]
fn an_expired_pair_is_gone_from_every_read_in_the_memtable_the_space_and_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    db.put_with_ttl("short", "s", 10 * SEC).unwrap();
    db.put_with_ttl("long", "l", 100 * SEC).unwrap();
    db.put("plain", "p").unwrap();
    every_read_sees(&db, b"short", Some(b"s"));
    clock.advance(9 * SEC);
    every_read_sees(&db, b"short", Some(b"s"));
    let snap = db.snapshot();
    clock.advance(SEC);
    every_read_sees(&db, b"short", None);
    // A snapshot judges by the time of its reads too.
    assert_eq!(snap.get("short").unwrap(), None);
    assert_eq!(snap.get("long").unwrap().as_deref(), Some(&b"l"[..]));
    every_read_sees(&db, b"plain", Some(b"p"));
    // In the space.
    db.flush().unwrap();
    every_read_sees(&db, b"short", None);
    every_read_sees(&db, b"long", Some(b"l"));
    drop(snap);
    db.close().unwrap();
    // Deadlines survive a reopen.
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    every_read_sees(&db, b"long", Some(b"l"));
    assert_eq!(db.ttl("long").unwrap(), Some(Some(90 * SEC)));
    clock.advance(90 * SEC);
    every_read_sees(&db, b"long", None);
    every_read_sees(&db, b"plain", Some(b"p"));
    assert_eq!(db.iter().count(), 1);
}

#[test]
fn an_expired_version_hides_the_older_ones_and_a_later_put_replaces_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    db.put("k", "old").unwrap();
    db.put("p", "old").unwrap();
    db.flush().unwrap();
    db.put_with_ttl("k", "new", 5 * SEC).unwrap();
    db.put_with_ttl("p", "new", 5 * SEC).unwrap();
    db.put("p", "kept").unwrap();
    clock.advance(5 * SEC);
    every_read_sees(&db, b"k", None);
    every_read_sees(&db, b"p", Some(b"kept"));
    db.flush().unwrap();
    every_read_sees(&db, b"k", None);
    every_read_sees(&db, b"p", Some(b"kept"));
    assert_eq!(db.ttl("p").unwrap(), Some(None));
    assert_eq!(db.ttl("k").unwrap(), None);
}

#[test]
fn expire_and_persist_change_only_a_live_pair_s_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    db.put("k", "v").unwrap();
    assert!(!db.expire("missing", SEC).unwrap());
    assert!(!db.persist("k").unwrap(), "no deadline to remove");
    assert!(db.expire("k", 3 * SEC).unwrap());
    assert_eq!(db.ttl("k").unwrap(), Some(Some(3 * SEC)));
    assert!(db.persist("k").unwrap());
    assert_eq!(db.ttl("k").unwrap(), Some(None));
    assert!(db.expire("k", 2 * SEC).unwrap());
    clock.advance(2 * SEC);
    assert!(!db.expire("k", SEC).unwrap(), "expired: nothing to expire");
    assert!(!db.persist("k").unwrap());
    assert_eq!(db.get("k").unwrap(), None);
}

#[test]
fn bad_times_to_live_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    for ttl in [
        Duration::ZERO,
        Duration::MAX,
        Duration::from_secs(u64::MAX / 1000),
    ] {
        assert!(
            matches!(
                db.put_with_ttl("k", "v", ttl),
                Err(Error::InvalidArgument(_))
            ),
            "{ttl:?}"
        );
        let mut b = WriteBatch::new();
        let added = b.put_with_ttl(b"k", b"v", ttl).map(|_| ());
        if added.is_ok() {
            b.put(b"other", b"v").unwrap();
            assert!(matches!(db.write(b), Err(Error::InvalidArgument(_))));
        }
    }
    assert!(db.put("k", "v").is_ok());
    assert!(matches!(
        db.expire("k", Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.iter().count(), 1, "nothing but the last put");
    assert_eq!(db.ttl("k").unwrap(), Some(None));
}

#[test]
fn batches_and_keyspaces_carry_deadlines() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    let ks = db.keyspace("sessions").unwrap();
    let mut b = WriteBatch::new();
    b.put_with_ttl(b"a", b"1", 2 * SEC).unwrap();
    b.put_with_ttl_in(&ks, b"a", b"2", 4 * SEC).unwrap();
    b.put(b"b", b"3").unwrap();
    db.write(b).unwrap();
    ks.put_with_ttl("b", "4", 6 * SEC).unwrap();
    assert_eq!(ks.ttl("a").unwrap(), Some(Some(4 * SEC)));
    assert_eq!(
        ks.value_and_ttl("a").unwrap(),
        Some((b"2".to_vec(), Some(4 * SEC)))
    );
    assert_eq!(db.value_and_ttl("b").unwrap(), Some((b"3".to_vec(), None)));
    clock.advance(2 * SEC);
    assert_eq!(db.get("a").unwrap(), None);
    assert_eq!(ks.get("a").unwrap().as_deref(), Some(&b"2"[..]));
    clock.advance(2 * SEC);
    assert_eq!(ks.get("a").unwrap(), None);
    assert_eq!(ks.iter().count(), 1);
    assert!(ks.persist("b").unwrap());
    clock.advance(10 * SEC);
    assert_eq!(ks.get("b").unwrap().as_deref(), Some(&b"4"[..]));
    assert_eq!(db.iter().count(), 1);
    // Bad input: a key over the limit, a dropped keyspace's handle.
    let long = vec![b'k'; flexdb::MAX_KEY_LEN + 1];
    let r = db.value_and_ttl(&long);
    assert!(matches!(r, Err(Error::KeyTooLarge { .. })), "{r:?}");
    assert!(db.drop_keyspace("sessions").unwrap());
    let r = ks.value_and_ttl("b");
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}

#[test]
fn the_queue_removes_expired_pairs_and_gives_their_space_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    let value = vec![7u8; 100];
    for i in 0..5000u32 {
        db.put_with_ttl(
            format!("t{i:05}"),
            &value,
            Duration::from_secs(1 + i as u64 % 10),
        )
        .unwrap();
    }
    for i in 0..1000u32 {
        db.put(format!("p{i:05}"), &value).unwrap();
    }
    // A pair overwritten without a deadline keeps its value.
    db.put("t00000", "kept").unwrap();
    db.flush().unwrap();
    // 5000 pairs with deadlines and their 5000 queue entries, 1000 without.
    assert_eq!(db.stats().pairs, 11_000);
    clock.advance(5 * SEC);
    // Deadlines of 1 to 5 s: half of them (t00000 lost its deadline). The
    // committer may remove some first, as it rewrites their intervals:
    // they are not counted here.
    let removed = db.remove_expired().unwrap();
    assert!(removed > 0 && removed <= 2499, "{removed}");
    assert_eq!(db.remove_expired().unwrap(), 0, "nothing left to remove");
    db.flush().unwrap();
    assert_eq!(db.stats().pairs, 11_000 - 2499 - 2500);
    clock.advance(5 * SEC);
    db.remove_expired().unwrap();
    db.flush().unwrap();
    // The pairs and their queue entries are gone.
    assert_eq!(db.stats().pairs, 1001);
    assert_eq!(db.get("t00000").unwrap().as_deref(), Some(&b"kept"[..]));
    assert_eq!(db.iter().count(), 1001);
}

#[test]
fn the_expiry_thread_removes_expired_pairs_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(
        dir.path(),
        opts(&clock).expiry_interval(Duration::from_millis(5)),
    )
    .unwrap();
    for i in 0..100u32 {
        db.put_with_ttl(format!("k{i}"), "v", SEC).unwrap();
    }
    db.flush().unwrap();
    clock.advance(SEC);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        db.flush().unwrap();
        if db.stats().pairs == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            db.stats().pairs
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_backup_keeps_deadlines() {
    let dir = tempfile::tempdir().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let dest = dest.path().join("copy");
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    db.put_with_ttl("t", "v", 10 * SEC).unwrap();
    db.put("p", "v").unwrap();
    db.flush().unwrap();
    db.put_with_ttl("m", "v", 20 * SEC).unwrap();
    db.backup(&dest).unwrap();
    let copy = Db::open(&dest, opts(&clock)).unwrap();
    assert_eq!(copy.ttl("t").unwrap(), Some(Some(10 * SEC)));
    assert_eq!(copy.ttl("m").unwrap(), Some(Some(20 * SEC)));
    clock.advance(10 * SEC);
    assert_eq!(copy.get("t").unwrap(), None);
    assert_eq!(copy.remove_expired().unwrap(), 1);
    assert_eq!(copy.iter().count(), 2);
}

/// What the model holds of a key: its value and deadline (0: none).
type Model = BTreeMap<Vec<u8>, (Vec<u8>, u64)>;

fn live(model: &Model, now: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(_, (_, x))| *x == 0 || *x > now)
        .map(|(k, (v, _))| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn random_writes_with_deadlines_match_a_model() {
    let test_seed = flexsys::test_seed::TestSeed::new("expiry model");
    let seed = test_seed.get();
    let mut rng = StdRng::seed_from_u64(seed);
    let st = Arc::new(FaultStorage::new());
    let clock = ManualClock::new();
    let open = || Db::open_with_storage(st.clone(), "expiry", opts(&clock)).unwrap();
    let mut db = open();
    let mut model = Model::new();
    for step in 0..3000 {
        let key = format!("k{:03}", rng.gen_range(0..200)).into_bytes();
        let value = format!("v{step}").into_bytes();
        match rng.gen_range(0..100) {
            0..=34 => {
                let ttl = Duration::from_millis(rng.gen_range(1..5000));
                db.put_with_ttl(&key, &value, ttl).unwrap();
                model.insert(
                    key.clone(),
                    (value, clock.now_ms() + ttl.as_millis() as u64),
                );
            }
            35..=59 => {
                db.put(&key, &value).unwrap();
                model.insert(key.clone(), (value, 0));
            }
            60..=69 => {
                db.delete(&key).unwrap();
                model.remove(&key);
            }
            70..=79 => clock.advance(Duration::from_millis(rng.gen_range(0..1500))),
            80..=84 => db.flush().unwrap(),
            85..=87 => {
                db.remove_expired().unwrap();
            }
            88 => {
                db.close().unwrap();
                db = open();
            }
            89..=93 => {
                let now = clock.now_ms();
                let want = model
                    .get(&key)
                    .filter(|(_, x)| *x == 0 || *x > now)
                    .map(|(v, x)| (v, (*x != 0).then(|| Duration::from_millis(x - now))));
                let ttl = want.map(|(_, t)| t);
                assert_eq!(db.ttl(&key).unwrap(), ttl, "seed {seed} step {step}");
                let both = want.map(|(v, t)| (v.clone(), t));
                assert_eq!(
                    db.value_and_ttl(&key).unwrap(),
                    both,
                    "seed {seed} step {step}"
                );
            }
            _ => {
                let now = clock.now_ms();
                let got: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
                assert_eq!(got, live(&model, now), "seed {seed} step {step}");
            }
        }
        let now = clock.now_ms();
        let want = model
            .get(&key)
            .filter(|(_, x)| *x == 0 || *x > now)
            .map(|(v, _)| v.clone());
        assert_eq!(db.get(&key).unwrap(), want, "seed {seed} step {step}");
    }
    let now = clock.now_ms();
    let got: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(got, live(&model, now), "seed {seed}");
    db.close().unwrap();
}

#[test]
fn a_batch_carried_through_its_encoding_keeps_its_queue_entries() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    let mut b = WriteBatch::new();
    b.put_with_ttl(b"k", b"v", SEC).unwrap();
    let carried = WriteBatch::decode(&b.encode()).unwrap();
    db.write(carried).unwrap();
    db.flush().unwrap();
    assert_eq!(db.stats().pairs, 2, "the pair and its queue entry");
    clock.advance(10 * SEC);
    assert_eq!(db.get("k").unwrap(), None);
    db.remove_expired().unwrap();
    db.flush().unwrap();
    assert_eq!(db.stats().pairs, 0);
}

#[test]
fn a_deadline_past_the_end_of_time_is_refused_and_a_deadline_of_zero_too() {
    let st = Arc::new(FaultStorage::new());
    let clock = ManualClock::new();
    let db = Db::open_with_storage(st.clone(), "end", opts(&clock)).unwrap();
    clock.set_ms(u64::MAX);
    let r = db.put_with_ttl("k", "v", Duration::from_micros(10));
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // A payload with a deadline of 0 does not decode.
    let mut zero = vec![1u8, 5, 1, b'k', 1, b'v'];
    zero.extend_from_slice(&0u64.to_le_bytes());
    assert!(WriteBatch::decode(&zero).is_none());
    clock.set_ms(1_000);
    db.put_with_ttl_opt("k", "v", SEC, &flexdb::WriteOptions { sync: true })
        .unwrap();
    let image = Arc::new(st.crash_image());
    drop(db);
    let db = Db::open_with_storage(image, "end", opts(&clock)).unwrap();
    assert_eq!(db.ttl("k").unwrap(), Some(Some(SEC)));
}

#[test]
fn a_queue_entry_that_names_no_key_is_dropped_without_stopping_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    // An entry due at 1 ms whose value is longer than any stored key.
    let mut key = vec![0xFF, 0xFF, 0xFF, 0xFF, 0xFE];
    key.extend_from_slice(&1u64.to_be_bytes());
    key.extend_from_slice(&[0; 8]);
    let value = vec![7u8; 70_000];
    let mut payload = vec![1u8, 1, key.len() as u8];
    payload.extend_from_slice(&key);
    payload.extend_from_slice(&[0xF0, 0xA2, 0x04]); // 70,000
    payload.extend_from_slice(&value);
    db.write(WriteBatch::decode(&payload).unwrap()).unwrap();
    db.put_with_ttl("k", "v", SEC).unwrap();
    clock.advance(SEC);
    assert_eq!(db.remove_expired().unwrap(), 1);
    db.flush().unwrap();
    assert_eq!(db.stats().pairs, 0, "both entries and the pair are gone");
}

#[test]
fn a_read_only_handle_judges_deadlines_and_refuses_to_set_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let db = Db::open(dir.path(), opts(&clock)).unwrap();
    db.put_with_ttl("flushed", "f", 10 * SEC).unwrap();
    db.flush().unwrap();
    db.put_with_ttl("logged", "l", 20 * SEC).unwrap();
    db.put("plain", "p").unwrap();
    // Beside the writer: the pair in the space and the one in its log.
    let ro = Db::open(dir.path(), opts(&clock).read_only(true)).unwrap();
    assert_eq!(ro.ttl("flushed").unwrap(), Some(Some(10 * SEC)));
    assert_eq!(ro.ttl("logged").unwrap(), Some(Some(20 * SEC)));
    clock.advance(10 * SEC);
    assert_eq!(ro.get("flushed").unwrap(), None);
    assert_eq!(ro.iter().count(), 2);
    for r in [
        ro.put_with_ttl("k", "v", SEC),
        ro.expire("plain", SEC).map(|_| ()),
        ro.persist("logged").map(|_| ()),
        ro.remove_expired().map(|_| ()),
    ] {
        assert!(matches!(r, Err(Error::ReadOnly)), "{r:?}");
    }
    clock.advance(10 * SEC);
    assert_eq!(ro.iter().count(), 1);
    assert_eq!(db.iter().count(), 1);
}

#[test]
fn transactions_put_with_a_time_to_live_counted_from_their_commit() {
    let clock = ManualClock::new();
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), opts(&clock)).unwrap();
    let users = db.keyspace("users").unwrap();
    let mut t = db.transaction(Isolation::Serializable);
    t.put_with_ttl("a", "1", 10 * SEC).unwrap();
    t.put_with_ttl("b", "2", 10 * SEC).unwrap();
    t.put("b", "plain").unwrap(); // replaces the TTL put
    t.put_with_ttl("c", "3", 10 * SEC).unwrap();
    t.delete("c").unwrap();
    t.put_with_ttl("d", "4", 10 * SEC).unwrap();
    t.delete_range("d".."e").unwrap();
    t.keyspace(&users)
        .unwrap()
        .put_with_ttl("u", "5", 20 * SEC)
        .unwrap();
    // Its own reads see the pair.
    assert_eq!(t.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert!(matches!(
        t.put_with_ttl("z", "x", Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(t.get("z").unwrap(), None);
    // The TTL counts from the commit.
    clock.advance(5 * SEC);
    t.commit().unwrap();
    assert_eq!(db.ttl("a").unwrap(), Some(Some(10 * SEC)));
    assert_eq!(db.ttl("b").unwrap(), Some(None));
    assert_eq!(db.ttl("c").unwrap(), None);
    assert_eq!(db.ttl("d").unwrap(), None);
    assert_eq!(users.ttl("u").unwrap(), Some(Some(20 * SEC)));
    clock.advance(10 * SEC);
    every_read_sees(&db, b"a", None);
    every_read_sees(&db, b"b", Some(b"plain"));
    assert_eq!(users.get("u").unwrap().as_deref(), Some(&b"5"[..]));
    // The expiry queue has its entries: the sweep removes what expired.
    clock.advance(10 * SEC);
    assert_eq!(db.remove_expired().unwrap(), 2);
    assert_eq!(users.get("u").unwrap(), None);
    // A conflicting commit writes nothing, deadline or queue entry.
    let mut t = db.transaction(Isolation::Snapshot);
    t.put_with_ttl("k", "mine", 10 * SEC).unwrap();
    db.put("k", "theirs").unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    assert_eq!(db.ttl("k").unwrap(), Some(None));
    clock.advance(20 * SEC);
    assert_eq!(db.remove_expired().unwrap(), 0);
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"theirs"[..]));
}

/// `Transaction::put_with_ttl` documents: "A TTL of zero or past the last
/// deadline is refused (`InvalidArgument`), nothing buffered." A TTL past
/// the last deadline is buffered, and the whole commit fails instead.
#[test]
fn a_transaction_refuses_a_ttl_past_the_last_deadline_when_it_is_put() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::new().create_if_missing(true)).unwrap();
    // What `Db::put_with_ttl` says of it.
    assert!(matches!(
        db.put_with_ttl("k", "v", Duration::MAX),
        Err(Error::InvalidArgument(_))
    ));
    let mut t = db.transaction(Isolation::Snapshot);
    t.put("other", "x").unwrap();
    let r = t.put_with_ttl("k", "v", Duration::MAX);
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "put_with_ttl(Duration::MAX) in a transaction: {r:?}"
    );
    // Nothing buffered: the rest of the transaction commits.
    assert_eq!(t.get("k").unwrap(), None);
    t.commit().unwrap();
    assert_eq!(db.get("other").unwrap().as_deref(), Some(&b"x"[..]));
}
