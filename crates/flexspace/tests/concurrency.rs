//! Readers during writes, inserts, collapses and garbage collection always
//! see a state the writer produced: here, a space of records (one id
//! repeated; 2 KiB) kept sorted by id, which every moment of the writer's history
//! satisfies and a torn or mixed read would not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flexspace::{FlexSpace, Options, SEGMENT_SIZE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REC: usize = 2048;

fn record(id: u64) -> Vec<u8> {
    id.to_be_bytes().repeat(REC / 8)
}

fn check_record(r: &[u8]) -> u64 {
    let id = &r[..8];
    assert!(r.chunks(8).all(|c| c == id), "torn record");
    u64::from_be_bytes(id.try_into().unwrap())
}

#[test]
fn readers_see_only_states_the_writer_made() {
    let dir = tempfile::tempdir().unwrap();
    // A small data file so garbage collection runs during the test.
    let opts = Options::new().create(true).max_data_size(8 * SEGMENT_SIZE);
    let space = Arc::new(FlexSpace::open(dir.path(), opts).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let space = space.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let len = space.len();
                    let mut buf = vec![0u8; len as usize];
                    let n = space.read(0, &mut buf).unwrap();
                    // The space may have changed between len() and read():
                    // only what read() returned is one moment.
                    let buf = &buf[..n];
                    if n as u64 == len {
                        assert_eq!(n % REC, 0);
                        let mut last = None;
                        for r in buf.chunks(REC) {
                            let id = check_record(r);
                            assert!(last.is_none_or(|l| l < id), "records out of order");
                            last = Some(id);
                        }
                    }
                    if len >= REC as u64 {
                        let at = rng.gen_range(0..len / REC as u64) * REC as u64;
                        let mut r = vec![0u8; REC];
                        if space.read(at, &mut r).unwrap() == REC {
                            check_record(&r);
                        }
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(99);
    let mut ids: Vec<u64> = Vec::new();
    for i in 0..60_000u64 {
        if ids.len() < 6_000 && (ids.len() < 100 || rng.gen_bool(0.6)) {
            let id = rng.gen::<u64>() >> 1;
            let pos = ids.partition_point(|&x| x < id);
            if ids.get(pos) == Some(&id) {
                continue;
            }
            space.insert((pos * REC) as u64, &record(id)).unwrap();
            ids.insert(pos, id);
        } else {
            let pos = rng.gen_range(0..ids.len());
            space.collapse((pos * REC) as u64, REC as u64).unwrap();
            ids.remove(pos);
        }
        if i % 5000 == 0 {
            space.sync().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    let mut buf = vec![0u8; space.len() as usize];
    space.read(0, &mut buf).unwrap();
    let got: Vec<u64> = buf.chunks(REC).map(check_record).collect();
    assert_eq!(got, ids);
    assert!(
        space.stats().gc_runs > 0,
        "the test must run garbage collection"
    );
}
