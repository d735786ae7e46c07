//! Read faults (EIO and short reads injected by `FaultStorage`) with
//! `pread` reads: a failed read returns `Error::Io` to the caller whose
//! read it was, with the file named; no other reader sees it; nothing is
//! poisoned; once the device reads again every byte is there.
//!
//! Seeds are random per run (`FAULT_SEED` replays one) and printed, so a
//! failure names the run that found it.

mod common;

use std::sync::Arc;

use common::content;
use flexspace::{Error, FaultStorage, FlexSpace, Options, ReadFaults};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seed() -> u64 {
    let seed = std::env::var("FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("FAULT_SEED={seed}");
    seed
}

fn opts() -> Options {
    Options::new().create(true).mmap_reads(false)
}

/// A space of a few segments' worth of pseudo-random bytes, closed and
/// reopened so that every read goes to the data file; and its content.
fn filled(rng: &mut StdRng) -> (Arc<FaultStorage>, FlexSpace, Vec<u8>) {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
    let mut model = Vec::new();
    for _ in 0..300 {
        let d: Vec<u8> = (0..rng.gen_range(1..30_000)).map(|_| rng.gen()).collect();
        let at = rng.gen_range(0..=model.len());
        space.insert(at as u64, &d).unwrap();
        model.splice(at..at, d);
    }
    space.close().unwrap();
    let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
    assert_eq!(content(&space), model);
    (storage, space, model)
}

/// Whether `e` is an injected read fault on the data file.
fn is_read_fault(e: &Error) -> bool {
    match e {
        Error::Io { file, source } => {
            file == "data"
                && (source.raw_os_error() == Some(libc::EIO)
                    || source.kind() == std::io::ErrorKind::UnexpectedEof)
        }
        _ => false,
    }
}

#[test]
fn a_failed_read_fails_only_its_caller_and_later_reads_succeed() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let (storage, space, model) = filled(&mut rng);
    storage.fail_reads(Some(ReadFaults {
        seed,
        eio_one_in: 4,
        short_one_in: 6,
        file: None,
    }));
    let failed = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (space, model) = (&space, &model);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ t);
                    let mut failed = 0;
                    for _ in 0..300 {
                        let at = rng.gen_range(0..model.len());
                        let n = rng.gen_range(1..20_000).min(model.len() - at);
                        let mut buf = vec![0u8; n];
                        match space.read(at as u64, &mut buf) {
                            Ok(got) => {
                                assert_eq!(got, n);
                                assert!(buf == model[at..at + n], "seed {seed}: wrong bytes");
                            }
                            Err(e) => {
                                assert!(is_read_fault(&e), "seed {seed}: {e}");
                                failed += 1;
                            }
                        }
                    }
                    failed
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum::<u64>()
    });
    let (_, eio, short) = storage.read_counts();
    assert!(
        failed > 0 && eio > 0 && short > 0,
        "seed {seed}: no fault fired"
    );
    // Each failed read reported its own fault: never more errors than
    // faults (a fault in another thread's read never reaches this one).
    assert!(
        failed <= eio + short,
        "seed {seed}: {failed} > {eio} + {short}"
    );
    // Nothing poisoned: writes go on while reads still fail, and once the
    // device reads again everything reads back, also after a reopen.
    space.insert(0, b"still writable").unwrap();
    space.sync().unwrap();
    storage.fail_reads(None);
    let mut want = b"still writable".to_vec();
    want.extend_from_slice(&model);
    assert_eq!(content(&space), want, "seed {seed}");
    space.close().unwrap();
    let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
    assert_eq!(content(&space), want, "seed {seed}");
}

/// Read faults during mutations, syncs, defragmentation and compaction
/// (which read the data they move): every error is a typed `Io` on the
/// data file, changes nothing, and poisons nothing; the space keeps every
/// byte, also after a reopen.
#[test]
fn read_faults_during_writes_and_collection_lose_nothing_synced() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let (storage, space, mut model) = filled(&mut rng);
    storage.fail_reads(Some(ReadFaults {
        seed,
        eio_one_in: 3,
        short_one_in: 5,
        file: Some("data".into()),
    }));
    let mut errors = 0;
    for i in 0..400 {
        let res = if i % 25 == 24 {
            space.sync()
        } else if i % 7 == 0 && model.len() > 50_000 {
            // Defragmentation reads what it rewrites.
            let at = rng.gen_range(0..model.len() - 50_000);
            space.defrag(at as u64, 50_000)
        } else if i % 50 == 10 {
            space.compact_step().map(|_| ())
        } else if i % 3 == 0 && model.len() > 10_000 {
            let at = rng.gen_range(0..model.len() - 10_000);
            let n = rng.gen_range(1..10_000);
            space.collapse(at as u64, n as u64).map(|()| {
                model.drain(at..at + n);
            })
        } else {
            let d: Vec<u8> = (0..rng.gen_range(1..5000)).map(|_| rng.gen()).collect();
            let at = rng.gen_range(0..=model.len());
            space.insert(at as u64, &d).map(|()| {
                model.splice(at..at, d);
            })
        };
        match res {
            Ok(()) => {}
            Err(e) => {
                assert!(is_read_fault(&e), "seed {seed}, step {i}: {e}");
                errors += 1;
            }
        }
    }
    let (reads, eio, short) = storage.read_counts();
    eprintln!("{errors} calls failed on a read; reads {reads}, EIO {eio}, short {short}");
    assert!(errors > 0, "seed {seed}: no call read the data file");
    storage.fail_reads(None);
    space.sync().unwrap();
    assert_eq!(content(&space), model, "seed {seed}");
    space.close().unwrap();
    let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
    assert_eq!(content(&space), model, "seed {seed}");
}
