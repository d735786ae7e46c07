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
        // A checkpoint leaves the tree clean, in normal form; so is a load.
        t.check_invariants();
        let (loaded, cp) = FlexTree::load(&file).unwrap();
        loaded.check_invariants();
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
    let t_probe = t.clone();
    t_probe.checkpoint(&probe, b"v2").unwrap();
    let total_writes = probe.writes.lock().unwrap().0;
    assert!(total_writes >= 2);
    for limit in 0..=total_writes {
        let f = CrashFile::from(base.to_bytes(), limit);
        let tc = t.clone();
        let result = tc.checkpoint(&f, b"v2");
        // Whatever reached the disk before the crash, the durable image
        // loads as exactly one of the two versions.
        let (loaded, cp) = FlexTree::load(&MemFile::from_bytes(f.crashed_image())).unwrap();
        loaded.check_invariants();
        if limit < total_writes {
            assert!(result.is_err());
            assert_eq!(snapshot(&loaded), v1, "crash after {limit} writes");
            assert_eq!(cp.meta, b"v1");
            // The failed checkpoint left the tree intact...
            assert_eq!(snapshot(&tc), v2);
            assert_eq!(tc.checkpoint_version(), 1);
            // ...and able to checkpoint again into what is on the disk,
            // partial writes of the failed attempt included.
            let retry = MemFile::from_bytes(f.live_image());
            assert_eq!(tc.checkpoint(&retry, b"v2").unwrap(), 2);
            let (l, cp) = FlexTree::load(&retry).unwrap();
            assert_eq!((snapshot(&l), cp.meta), (v2.clone(), b"v2".to_vec()));
            // The free-page lists are right too: a third version written
            // over the second's free pages still loads.
            let mut tm = tc.clone();
            mutate(&mut tm, &mut StdRng::seed_from_u64(limit as u64), 300);
            assert_eq!(tm.checkpoint(&retry, b"v3").unwrap(), 3);
            assert_eq!(snapshot(&FlexTree::load(&retry).unwrap().0), snapshot(&tm));
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

#[test]
fn a_failed_first_checkpoint_can_be_retried() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut t = FlexTree::new();
    mutate(&mut t, &mut rng, 3000);
    let want = snapshot(&t);
    let probe = CrashFile::from(Vec::new(), usize::MAX);
    t.clone().checkpoint(&probe, b"first").unwrap();
    let total_writes = probe.writes.lock().unwrap().0;
    for limit in 0..total_writes {
        let f = CrashFile::from(Vec::new(), limit);
        let tc = t.clone();
        assert!(tc.checkpoint(&f, b"first").is_err());
        assert_eq!(tc.checkpoint_version(), 0);
        // The file now holds partial writes but no header; the tree
        // remembers it claimed the file and checkpoints into it.
        let retry = MemFile::from_bytes(f.live_image());
        assert_eq!(tc.checkpoint(&retry, b"first").unwrap(), 1);
        let (l, cp) = FlexTree::load(&retry).unwrap();
        assert_eq!(snapshot(&l), want);
        assert_eq!(cp.meta, b"first");
    }
}

#[test]
fn tree_is_send_sync_and_clone() {
    fn check<T: Send + Sync + Clone>() {}
    check::<FlexTree>();
}

/// A `MemFile` whose first write waits until readers have done `gate`
/// operations, so the checkpoint is provably in progress while they run,
/// and whose writes are slowed down a little.
struct GatedFile {
    inner: MemFile,
    reads_done: std::sync::atomic::AtomicUsize,
    gate: usize,
}

impl StorageFile for GatedFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_exact_at(offset, buf)
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        while self.reads_done.load(Ordering::Relaxed) < self.gate {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
        self.inner.write_all_at(offset, data)
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
}

/// The extent of `want` (sorted by offset) containing `off`.
fn expected_at(want: &[Extent], off: u64) -> Extent {
    let i = want.partition_point(|e| e.offset <= off) - 1;
    want[i]
}

#[test]
fn readers_run_during_a_checkpoint_and_see_the_tree() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let mut rng = StdRng::seed_from_u64(8);
    let mut t = FlexTree::new();
    for i in 0..30_000u64 {
        t.append(50, i * 1000).unwrap();
    }
    mutate(&mut t, &mut rng, 20_000);
    let want = snapshot(&t);
    let total = t.len();
    let file = GatedFile {
        inner: MemFile::new(),
        reads_done: AtomicUsize::new(0),
        gate: 2000,
    };
    let done = AtomicBool::new(false);
    let during = AtomicUsize::new(0);
    let tree = &t;
    std::thread::scope(|s| {
        let checker = s.spawn(|| {
            let v = tree.checkpoint(&file, b"concurrent").unwrap();
            done.store(true, Ordering::SeqCst);
            v
        });
        for seed in 0..2u64 {
            let (want, file, done, during) = (&want, &file, &done, &during);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + seed);
                let mut pieces = Vec::new();
                while !done.load(Ordering::SeqCst) {
                    let off = rng.gen_range(0..total);
                    let e = expected_at(want, off);
                    assert_eq!(tree.extent_at(off).unwrap(), e);
                    assert_eq!(
                        tree.lookup(off).unwrap(),
                        e.addr.map(|a| a + (off - e.offset))
                    );
                    let tag = if off == e.offset { e.tag } else { 0 };
                    assert_eq!(tree.get_tag(off).unwrap(), tag);
                    let len = rng.gen_range(1..=(total - off).min(5000));
                    tree.query_into(off, len, &mut pieces).unwrap();
                    assert_eq!(pieces.iter().map(|p| p.len).sum::<u64>(), len);
                    assert_eq!(pieces[0].addr, tree.lookup(off).unwrap());
                    let got: Vec<Extent> = tree.extents_from(off).unwrap().take(20).collect();
                    let i = want.partition_point(|x| x.offset <= off) - 1;
                    let end = (i + 20).min(want.len());
                    assert_eq!(got, want[i..end]);
                    file.reads_done.fetch_add(1, Ordering::Relaxed);
                    if !done.load(Ordering::SeqCst) {
                        during.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        assert_eq!(checker.join().unwrap(), 1);
    });
    assert!(during.load(Ordering::Relaxed) >= 2000);
    let (loaded, cp) = FlexTree::load(&file.inner).unwrap();
    assert_eq!(cp.meta, b"concurrent");
    assert_eq!(snapshot(&loaded), want);
    assert_eq!(snapshot(&t), want);
}

#[test]
fn concurrent_checkpoints_take_turns() {
    let mut rng = StdRng::seed_from_u64(9);
    let mut t = FlexTree::new();
    mutate(&mut t, &mut rng, 5000);
    let file = MemFile::new();
    t.checkpoint(&file, b"0").unwrap();
    mutate(&mut t, &mut rng, 5000);
    let tree = &t;
    let mut versions: Vec<u64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| tree.checkpoint(&file, b"x").unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    versions.sort_unstable();
    assert_eq!(versions, vec![2, 3, 4, 5]);
    let (loaded, cp) = FlexTree::load(&file).unwrap();
    assert_eq!(cp.version, 5);
    assert_eq!(snapshot(&loaded), snapshot(&t));
    // The page lists survived the interleaving: more versions still load.
    for round in 0..5 {
        mutate(&mut t, &mut rng, 500);
        t.checkpoint(&file, &[round]).unwrap();
        assert_eq!(snapshot(&FlexTree::load(&file).unwrap().0), snapshot(&t));
    }
}
