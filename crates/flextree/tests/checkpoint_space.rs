//! The tree file gives free pages back: after many checkpoints of an
//! update pattern that dirties nearly every leaf each time, the file's
//! allocated bytes stay close to one tree's pages; a shrinking tree cuts
//! the file's tail; a loaded file's free pages are punched by the next
//! checkpoint; a page that reads as zeros is never accepted as a node.

use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;

use flextree::{Error, Extent, FlexTree, MemFile, StorageFile};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PAGE: u64 = 2048;
const BLOCK: u64 = 4096;

/// An in-memory file that keeps track of its allocated 4 KiB blocks as a
/// sparse file does: writes allocate the blocks they touch, a punch frees
/// the whole blocks inside its range (and zeroes the range), truncation
/// frees the blocks past the end.
#[derive(Default)]
struct SparseFile {
    inner: Mutex<(Vec<u8>, BTreeSet<u64>)>,
}

impl SparseFile {
    fn from_bytes(bytes: Vec<u8>) -> Self {
        let blocks = (0..(bytes.len() as u64).div_ceil(BLOCK)).collect();
        SparseFile {
            inner: Mutex::new((bytes, blocks)),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        self.inner.lock().unwrap().0.clone()
    }
}

impl StorageFile for SparseFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let g = self.inner.lock().unwrap();
        let end = offset as usize + buf.len();
        if end > g.0.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&g.0[offset as usize..end]);
        Ok(())
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut g = self.inner.lock().unwrap();
        let end = offset as usize + data.len();
        if end > g.0.len() {
            g.0.resize(end, 0);
        }
        g.0[offset as usize..end].copy_from_slice(data);
        for b in offset / BLOCK..(end as u64).div_ceil(BLOCK) {
            g.1.insert(b);
        }
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.inner.lock().unwrap().0.len() as u64)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut g = self.inner.lock().unwrap();
        g.0.resize(len as usize, 0);
        let keep = len.div_ceil(BLOCK);
        g.1.retain(|&b| b < keep);
        Ok(())
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<u64> {
        let mut g = self.inner.lock().unwrap();
        let end = (offset + len).min(g.0.len() as u64);
        g.0[offset as usize..end as usize].fill(0);
        let before = g.1.len() as u64;
        for b in offset.div_ceil(BLOCK)..end / BLOCK {
            g.1.remove(&b);
        }
        Ok((before - g.1.len() as u64) * BLOCK)
    }
    fn allocated_bytes(&self) -> io::Result<u64> {
        Ok(self.inner.lock().unwrap().1.len() as u64 * BLOCK)
    }
}

fn snapshot(t: &FlexTree) -> Vec<Extent> {
    t.extents_from(0).unwrap().collect()
}

/// A tree of `n` extents of 100 bytes at addresses that never merge.
fn tree_of(n: u64) -> FlexTree {
    let mut t = FlexTree::new();
    for i in 0..n {
        t.append(100, i * 1000).unwrap();
    }
    t
}

/// Extent `i`'s rank under a Zipf-like skew (`u^3` of uniform `u`),
/// scrambled over the key space as YCSB scrambles its hot keys, so hot
/// extents are spread over every leaf.
fn zipf_like(rng: &mut StdRng, n: u64) -> u64 {
    let u: f64 = rng.gen();
    let rank = (u * u * u * n as f64) as u64;
    rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) % n
}

/// Points `updates` Zipf-like chosen extents at new addresses.
fn zipf_updates(t: &mut FlexTree, rng: &mut StdRng, n: u64, updates: usize, round: u64) {
    for k in 0..updates as u64 {
        let i = zipf_like(rng, n);
        t.remap(i * 100, 100, (1 << 36) + (round * 1_000_000 + k) * 1000)
            .unwrap();
    }
}

#[test]
fn zipf_like_checkpoints_keep_about_one_tree_allocated() {
    let n = 60_000;
    let file = SparseFile::default();
    let mut rng = StdRng::seed_from_u64(11);
    let mut t = tree_of(n);
    t.checkpoint(&file, &[]).unwrap();
    let mut worst: f64 = 0.0;
    for round in 1..=30 {
        zipf_updates(&mut t, &mut rng, n, 30_000, round);
        let r = t.checkpoint_report(&file, &[]).unwrap();
        let g = r.free_pages.give_back(&file);
        assert!(g.error.is_none(), "{g:?}");
        assert!(
            r.pages_written * 10 >= r.node_pages * 8,
            "the pattern must dirty nearly every node: {r:?}"
        );
        let one_tree = r.node_pages * PAGE + BLOCK;
        let allocated = file.allocated_bytes().unwrap();
        let ratio = allocated as f64 / one_tree as f64;
        worst = worst.max(ratio);
        assert!(
            ratio <= 1.3,
            "round {round}: {allocated} bytes allocated for a tree of {one_tree} ({r:?}, length {})",
            file.len().unwrap()
        );
        if round % 10 == 0 {
            let (loaded, cp) = FlexTree::load(&file).unwrap();
            assert_eq!(cp.version, r.version);
            assert_eq!(snapshot(&loaded), snapshot(&t));
        }
    }
    assert!(worst > 0.9, "ratio {worst}: the file must hold the tree");
}

#[test]
fn a_shrinking_tree_cuts_the_file_tail() {
    let file = SparseFile::default();
    let mut t = tree_of(40_000);
    t.checkpoint(&file, &[]).unwrap();
    let big = file.len().unwrap();
    // Remove nearly everything: the first checkpoint writes the small tree
    // past the big one's pages, the second moves it to the file's head.
    t.collapse(1000, t.len() - 2000).unwrap();
    let r1 = t.checkpoint_report(&file, &[]).unwrap();
    let g1 = r1.free_pages.give_back(&file);
    t.remap(0, 100, 7).unwrap();
    let r2 = t.checkpoint_report(&file, &[]).unwrap();
    let g2 = r2.free_pages.give_back(&file);
    assert!(g2.truncated_bytes > 0, "{r1:?} {g1:?} {r2:?} {g2:?}");
    // Nothing is left to give back.
    let again = r2.free_pages.give_back(&file);
    assert_eq!((again.punched_bytes, again.truncated_bytes), (0, 0));
    let len = file.len().unwrap();
    assert!(len * 20 < big, "file {big} -> {len} bytes ({r2:?})");
    assert_eq!(len, r2.file_pages * PAGE);
    assert!(file.allocated_bytes().unwrap() <= len.next_multiple_of(BLOCK));
    let (loaded, _) = FlexTree::load(&file).unwrap();
    assert_eq!(snapshot(&loaded), snapshot(&t));
    // And grows again from its new end.
    for i in 0..5000 {
        t.append(100, (1 << 40) + i * 1000).unwrap();
    }
    t.checkpoint(&file, &[]).unwrap();
    let (loaded, _) = FlexTree::load(&file).unwrap();
    assert_eq!(snapshot(&loaded), snapshot(&t));
}

#[test]
fn the_first_checkpoint_after_a_load_punches_the_free_pages() {
    let n = 30_000;
    let mut rng = StdRng::seed_from_u64(5);
    let file = SparseFile::default();
    let mut t = tree_of(n);
    t.checkpoint(&file, &[]).unwrap();
    zipf_updates(&mut t, &mut rng, n, 20_000, 1);
    t.checkpoint(&file, &[]).unwrap();
    // The same bytes, every block allocated (as after a copy).
    let copy = SparseFile::from_bytes(file.bytes());
    let (mut loaded, _) = FlexTree::load(&copy).unwrap();
    loaded.remap(0, 100, 3).unwrap();
    let r = loaded.checkpoint_report(&copy, &[]).unwrap();
    let g = r.free_pages.give_back(&copy);
    assert!(g.punched_bytes > 0, "{r:?} {g:?}");
    let one_tree = r.node_pages * PAGE + BLOCK;
    assert!(
        copy.allocated_bytes().unwrap() as f64 <= 1.3 * one_tree as f64,
        "{} allocated for {one_tree} ({r:?})",
        copy.allocated_bytes().unwrap()
    );
    let (again, _) = FlexTree::load(&copy).unwrap();
    assert_eq!(snapshot(&again), snapshot(&loaded));
}

#[test]
fn what_the_caller_does_not_give_back_the_next_checkpoint_does() {
    let n = 30_000;
    let mut rng = StdRng::seed_from_u64(9);
    let file = SparseFile::default();
    let mut t = tree_of(n);
    let mut handles = Vec::new();
    for round in 1..=6 {
        zipf_updates(&mut t, &mut rng, n, 20_000, round);
        // Dropped without giving back.
        handles.push(t.checkpoint_report(&file, &[]).unwrap().free_pages);
    }
    let r = t.checkpoint_report(&file, &[]).unwrap();
    // A late handle finds nothing to do: the checkpoints gave back first.
    let late = handles[2].give_back(&file);
    assert_eq!((late.punched_bytes, late.truncated_bytes), (0, 0));
    // Only the last checkpoint's pages are still allocated.
    let one_tree = r.node_pages * PAGE + BLOCK;
    let allocated = file.allocated_bytes().unwrap();
    assert!(
        allocated as f64 <= 2.1 * one_tree as f64,
        "{allocated} {r:?}"
    );
    r.free_pages.give_back(&file);
    let allocated = file.allocated_bytes().unwrap();
    assert!(
        allocated as f64 <= 1.3 * one_tree as f64,
        "{allocated} {r:?}"
    );
    let (loaded, _) = FlexTree::load(&file).unwrap();
    assert_eq!(snapshot(&loaded), snapshot(&t));
}

#[test]
fn a_page_that_reads_as_zeros_is_never_a_node() {
    let file = MemFile::new();
    let mut t = tree_of(30_000);
    t.checkpoint(&file, &[]).unwrap();
    t.remap(0, 100, 9).unwrap();
    let r = t.checkpoint_report(&file, &[]).unwrap();
    let want = snapshot(&t);
    let image = file.to_bytes();
    let pages = image.len() as u64 / PAGE;
    let mut rejected = 0;
    for p in 2..pages {
        let mut bytes = image.clone();
        bytes[(p * PAGE) as usize..((p + 1) * PAGE) as usize].fill(0);
        match FlexTree::load(&MemFile::from_bytes(bytes)) {
            // A free page: the tree does not reference it.
            Ok((l, _)) => assert_eq!(snapshot(&l), want, "page {p}"),
            Err(Error::Corrupt(m)) => {
                assert!(m.contains("checksum"), "page {p}: {m}");
                rejected += 1;
            }
            Err(e) => panic!("page {p}: {e}"),
        }
    }
    // Every page the tree references is rejected, every other one ignored.
    assert_eq!(rejected, r.node_pages);
    assert!(rejected > 40);
}
