//! Copy-on-write checkpoints: round trips, crashes between the node writes
//! and the header write, corrupt and truncated files.

use std::io;
use std::sync::Mutex;

use flextree::{Error, Extent, FlexTree, MemFile, StorageFile};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn snapshot(t: &FlexTree) -> Vec<Extent> {
    t.extents_from(0).unwrap().collect()
}

fn mutate(t: &mut FlexTree, rng: &mut StdRng, n: usize) {
    for _ in 0..n {
        match rng.gen_range(0..10) {
            0..=5 => {
                let at = rng.gen_range(0..=t.len());
                t.insert(at, rng.gen_range(1..100), rng.gen_range(0..1 << 40))
                    .unwrap();
            }
            6 | 7 if t.len() > 200 => {
                let at = rng.gen_range(0..t.len() - 100);
                t.collapse(at, rng.gen_range(1..100)).unwrap();
            }
            8 if !t.is_empty() => {
                let at = rng.gen_range(0..t.len());
                t.set_tag(at, rng.gen()).unwrap();
            }
            _ => t.insert_hole(t.len(), rng.gen_range(1..1000)).unwrap(),
        }
    }
}

#[test]
fn round_trips_keep_every_extent_tag_and_meta() {
    let file = MemFile::new();
    let mut rng = StdRng::seed_from_u64(1);
    let mut t = FlexTree::new();
    // The empty tree too.
    assert_eq!(t.checkpoint(&file, b"empty").unwrap(), 1);
    let (l, cp) = FlexTree::load(&file).unwrap();
    assert!(l.is_empty());
    assert_eq!(cp.meta, b"empty");
    for round in 2..40u64 {
        mutate(&mut t, &mut rng, 500);
        let meta = round.to_be_bytes();
        assert_eq!(t.checkpoint(&file, &meta).unwrap(), round);
        assert_eq!(t.checkpoint_version(), round);
        let (loaded, cp) = FlexTree::load(&file).unwrap();
        assert_eq!(cp.version, round);
        assert_eq!(cp.meta, meta);
        assert_eq!(snapshot(&loaded), snapshot(&t));
        assert_eq!(loaded.extent_count(), t.extent_count());
        assert_eq!(loaded.len(), t.len());
        if round % 4 == 0 {
            // Continue from the loaded copy: it checkpoints into the same file.
            t = loaded;
        }
    }
}

#[test]
fn file_does_not_grow_without_bound() {
    let file = MemFile::new();
    let mut rng = StdRng::seed_from_u64(2);
    let mut t = FlexTree::new();
    mutate(&mut t, &mut rng, 20_000);
    t.checkpoint(&file, &[]).unwrap();
    let first = file.len().unwrap();
    for _ in 0..50 {
        mutate(&mut t, &mut rng, 50);
        t.checkpoint(&file, &[]).unwrap();
    }
    let last = file.len().unwrap();
    assert!(last < first * 3, "tree file grew from {first} to {last}");
}

/// A file that keeps a durable image (as of the last sync) beside the live
/// one, and can be told to fail every operation after `limit` writes.
struct CrashFile {
    live: Mutex<Vec<u8>>,
    durable: Mutex<Vec<u8>>,
    writes: Mutex<(usize, usize)>, // (done, limit); limit 0 once crashed
}

impl CrashFile {
    fn from(image: Vec<u8>, limit: usize) -> Self {
        CrashFile {
            live: Mutex::new(image.clone()),
            durable: Mutex::new(image),
            writes: Mutex::new((0, limit)),
        }
    }
    fn crashed_image(&self) -> Vec<u8> {
        self.durable.lock().unwrap().clone()
    }
    fn live_image(&self) -> Vec<u8> {
        self.live.lock().unwrap().clone()
    }
}

impl StorageFile for CrashFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        MemFile::from_bytes(self.live_image()).read_exact_at(offset, buf)
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut w = self.writes.lock().unwrap();
        if w.0 >= w.1 {
            w.1 = 0; // crashed: syncs fail from now on
            return Err(io::Error::other("simulated crash"));
        }
        w.0 += 1;
        let m = MemFile::from_bytes(self.live_image());
        m.write_all_at(offset, data)?;
        *self.live.lock().unwrap() = m.to_bytes();
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        let w = self.writes.lock().unwrap();
        if w.1 == 0 {
            return Err(io::Error::other("simulated crash"));
        }
        *self.durable.lock().unwrap() = self.live_image();
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.live.lock().unwrap().len() as u64)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.live.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
}

#[test]
fn crash_at_any_write_leaves_the_previous_version() {
    let mut rng = StdRng::seed_from_u64(3);
    let base = MemFile::new();
    let mut t = FlexTree::new();
    mutate(&mut t, &mut rng, 5000);
    t.checkpoint(&base, b"v1").unwrap();
    let v1 = snapshot(&t);
    mutate(&mut t, &mut rng, 3000);
    let v2 = snapshot(&t);
    // Count the writes a full checkpoint takes.
    let probe = CrashFile::from(base.to_bytes(), usize::MAX);
    let mut t_probe = t.clone();
    t_probe.checkpoint(&probe, b"v2").unwrap();
    let total_writes = probe.writes.lock().unwrap().0;
    assert!(total_writes >= 2);
    for limit in 0..=total_writes {
        let f = CrashFile::from(base.to_bytes(), limit);
        let mut tc = t.clone();
        let result = tc.checkpoint(&f, b"v2");
        // Whatever reached the disk before the crash, the durable image
        // loads as exactly one of the two versions.
        let (loaded, cp) = FlexTree::load(&MemFile::from_bytes(f.crashed_image())).unwrap();
        if limit < total_writes {
            assert!(result.is_err());
            assert_eq!(snapshot(&loaded), v1, "crash after {limit} writes");
            assert_eq!(cp.meta, b"v1");
            // The failed checkpoint left the tree intact.
            assert_eq!(snapshot(&tc), v2);
        } else {
            result.unwrap();
            assert_eq!(snapshot(&loaded), v2);
            assert_eq!(cp.meta, b"v2");
        }
    }
}

#[test]
fn torn_header_falls_back_and_corrupt_headers_are_errors() {
    let mut rng = StdRng::seed_from_u64(4);
    let file = MemFile::new();
    let mut t = FlexTree::new();
    mutate(&mut t, &mut rng, 1000);
    t.checkpoint(&file, b"one").unwrap();
    let v1 = snapshot(&t);
    mutate(&mut t, &mut rng, 1000);
    t.checkpoint(&file, b"two").unwrap(); // slot 0
    let good = file.to_bytes();
    // Tear version 2's header slot (page 0): version 1 (slot 1) loads.
    let mut torn = good.clone();
    for b in &mut torn[100..2048] {
        *b = 0;
    }
    let (l, cp) = FlexTree::load(&MemFile::from_bytes(torn.clone())).unwrap();
    assert_eq!(cp.meta, b"one");
    assert_eq!(snapshot(&l), v1);
    // Both slots corrupt: a typed error.
    torn[2048 + 20] ^= 0xff;
    assert!(matches!(
        FlexTree::load(&MemFile::from_bytes(torn)),
        Err(Error::Corrupt(_))
    ));
}

#[test]
fn flipped_bytes_never_give_a_wrong_tree() {
    let mut rng = StdRng::seed_from_u64(5);
    let file = MemFile::new();
    let mut t = FlexTree::new();
    mutate(&mut t, &mut rng, 3000);
    t.checkpoint(&file, b"a").unwrap();
    let va = snapshot(&t);
    mutate(&mut t, &mut rng, 300);
    t.checkpoint(&file, b"b").unwrap();
    let vb = snapshot(&t);
    let good = file.to_bytes();
    for _ in 0..400 {
        let mut bad = good.clone();
        let at = rng.gen_range(0..bad.len());
        bad[at] ^= 1 << rng.gen_range(0..8);
        match FlexTree::load(&MemFile::from_bytes(bad)) {
            Ok((l, _)) => {
                let s = snapshot(&l);
                assert!(s == va || s == vb, "flip at {at} produced a different tree");
            }
            Err(Error::Corrupt(_)) => {}
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}

#[test]
fn truncated_files_are_errors_or_a_written_version() {
    let mut rng = StdRng::seed_from_u64(6);
    let file = MemFile::new();
    let mut t = FlexTree::new();
    mutate(&mut t, &mut rng, 2000);
    t.checkpoint(&file, &[]).unwrap();
    let v = snapshot(&t);
    let good = file.to_bytes();
    for cut in (0..good.len()).step_by(512) {
        match FlexTree::load(&MemFile::from_bytes(good[..cut].to_vec())) {
            Ok((l, _)) => assert_eq!(snapshot(&l), v),
            Err(Error::Corrupt(_)) => {}
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert!(matches!(
        FlexTree::load(&MemFile::new()),
        Err(Error::Corrupt(_))
    ));
}

#[test]
fn a_new_tree_refuses_a_non_empty_file() {
    let file = MemFile::from_bytes(vec![1; 10]);
    let mut t = FlexTree::new();
    t.append(5, 5).unwrap();
    assert!(matches!(t.checkpoint(&file, &[]), Err(Error::FileNotEmpty)));
    assert_eq!(file.to_bytes(), vec![1; 10]);
}
