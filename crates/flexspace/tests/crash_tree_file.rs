//! Crashes while checkpoints give the tree file's free pages back (cut its
//! free tail, punch whole free 4 KiB blocks), on the fault-injecting
//! storage with the reordering crash model:
//! - a FlexTree checkpointed straight into a `FaultStorage` file loads,
//!   after a crash anywhere, as the last completed checkpoint or a later
//!   one, extent for extent;
//! - a space whose Zipf-like updates and deletions dirty most of its tree
//!   between frequent checkpoints recovers a state no older than its last
//!   completed sync or checkpoint, and its tree file's allocation stays
//!   near one tree.
//!
//! - the same for a tree whose sparse random updates make checkpoints move
//!   clean leaves out of pages that became sparse (tree-file format 2).
//!
//! Half the crash points fall inside a checkpoint. `CRASH_ITERATIONS`
//! sets the number of crashes per test (default 12); `CRASH_SEED` the
//! master seed (random otherwise, printed on failure: `flexsys::test_seed`).

use std::sync::Arc;

use flexspace::{CrashModel, Fault, FaultStorage, FlexSpace, Options, Storage};
use flexsys::test_seed::{self, TestSeed};
use flextree::{Extent, FlexTree};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn iterations() -> u64 {
    test_seed::iterations(12)
}

/// A Zipf-like rank (`u^3` of uniform `u`) scrambled over `0..n`, as YCSB
/// scrambles its hot keys: hot items are spread over every leaf.
fn zipf_like(rng: &mut StdRng, n: u64) -> u64 {
    let u: f64 = rng.gen();
    let rank = (u * u * u * n as f64) as u64;
    rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) % n
}

/// A crash point: half the time inside one of `windows` (the operations
/// of a checkpoint), else anywhere after the first quarter.
fn crash_point(rng: &mut StdRng, total: u64, windows: &[(u64, u64)]) -> u64 {
    let inside: Vec<_> = windows.iter().filter(|w| w.1 > w.0).collect();
    if !inside.is_empty() && rng.gen_bool(0.5) {
        let w = inside[rng.gen_range(0..inside.len())];
        rng.gen_range(w.0..w.1)
    } else {
        rng.gen_range(total / 4..total)
    }
}

// ---- The tree alone -------------------------------------------------------

struct TreeRun {
    /// The extents of each version (index = version).
    versions: Vec<Vec<Extent>>,
    /// The last version whose checkpoint returned.
    done: u64,
    /// Operations of each checkpoint (first, end).
    windows: Vec<(u64, u64)>,
    punched: u64,
    truncated: u64,
    /// Clean leaves the checkpoints moved out of sparse pages.
    moved: u64,
}

/// Grows a tree, updates it Zipf-like (`sparse`: a few uniformly chosen
/// extents), shrinks and regrows it, checkpointing into `storage`'s file
/// `tree` after every round.
fn tree_run(seed: u64, storage: &FaultStorage, sparse: bool) -> TreeRun {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut r = TreeRun {
        versions: vec![Vec::new()],
        done: 0,
        windows: Vec::new(),
        punched: 0,
        truncated: 0,
        moved: 0,
    };
    let Ok(file) = storage.open_file("tree", true) else {
        return r;
    };
    if storage.sync_dir().is_err() {
        return r;
    }
    let mut t = FlexTree::new();
    let n = if sparse { 20_000u64 } else { 4000 };
    for i in 0..n {
        t.append(100, i * 1000).unwrap();
    }
    for round in 0..24u64 {
        match round % 8 {
            5 => {
                // Shrink: the free tail is cut two checkpoints later.
                let keep = t.len() / 10;
                t.collapse(keep, t.len() - keep).unwrap();
            }
            6 => {
                let base = t.len();
                for i in 0..n - base / 100 {
                    t.insert(base + i * 100, 100, (1 << 40) + (round << 20) + i * 1000)
                        .unwrap();
                }
            }
            _ => {
                let cur = t.len() / 100;
                let updates = if sparse { 60 } else { 3000 };
                for k in 0..updates {
                    let i = if sparse {
                        rng.gen_range(0..cur)
                    } else {
                        zipf_like(&mut rng, cur)
                    };
                    t.remap(i * 100, 100, (1 << 36) + ((round << 16) + k) * 1000)
                        .unwrap();
                }
            }
        }
        r.versions.push(t.extents_from(0).unwrap().collect());
        let first = storage.ops();
        let report = t.checkpoint_report(file.as_ref(), &round.to_le_bytes());
        // The window (pushed below) covers the give-back too.
        match report {
            Ok(rep) => {
                assert_eq!(rep.version as usize, r.versions.len() - 1);
                r.done = rep.version;
                r.moved += rep.leaves_moved;
                // Every third round the next checkpoint gives back.
                if round % 3 != 2 {
                    let g = rep.free_pages.give_back(file.as_ref());
                    r.punched += g.punched_bytes;
                    r.truncated += g.truncated_bytes;
                    if g.error.is_some() {
                        break;
                    }
                }
            }
            Err(_) => break,
        }
        r.windows.push((first, storage.ops()));
    }
    r
}

#[test]
fn tree_checkpoints_that_punch_and_cut_survive_crashes_anywhere() {
    let master = TestSeed::new("tree_checkpoints_that_punch_and_cut_survive_crashes_anywhere");
    tree_crashes(master.get(), false);
}

#[test]
fn tree_checkpoints_that_move_leaves_out_of_sparse_pages_survive_crashes() {
    let master =
        TestSeed::new("tree_checkpoints_that_move_leaves_out_of_sparse_pages_survive_crashes");
    tree_crashes(master.get(), true);
}

fn tree_crashes(seed: u64, sparse: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    for it in 0..iterations() {
        let seed = rng.gen();
        let model = CrashModel::Reorder { seed: rng.gen() };
        let dry = FaultStorage::with_model(model);
        let full = tree_run(seed, &dry, sparse);
        assert!(!sparse || full.moved > 0, "the run must move leaves");
        assert!(full.punched > 0, "the run must punch");
        assert!(full.truncated > 0, "the run must cut the tail");
        let at = crash_point(&mut rng, dry.ops(), &full.windows);
        let storage = FaultStorage::with_model(model);
        storage.plan(at, Fault::Crash { tear: rng.gen() });
        let crashed = tree_run(seed, &storage, sparse);
        let image = storage.crash_image();
        let ctx = format!("iteration {it} (seed {seed}, crash at {at}/{})", dry.ops());
        let Ok(file) = image.open_file("tree", false) else {
            assert_eq!(crashed.done, 0, "{ctx}: the tree file vanished");
            continue;
        };
        if crashed.done == 0 && file.len().unwrap() == 0 {
            continue;
        }
        let (tree, cp) = match FlexTree::load(file.as_ref()) {
            Ok(x) => x,
            Err(e) if crashed.done == 0 => {
                // The first checkpoint never completed: nothing promised.
                let _ = e;
                continue;
            }
            Err(e) => panic!("{ctx}: {e} (version {} was durable)", crashed.done),
        };
        assert!(
            cp.version >= crashed.done && cp.version < full.versions.len() as u64,
            "{ctx}: loaded version {} with {} durable",
            cp.version,
            crashed.done
        );
        let got: Vec<Extent> = tree.extents_from(0).unwrap().collect();
        assert_eq!(got, full.versions[cp.version as usize], "{ctx}");
        tree.check_invariants();
        // The recovered file takes further checkpoints and loads them.
        let mut tree = tree;
        tree.remap(0, 100, 5).unwrap();
        tree.checkpoint(file.as_ref(), &[]).unwrap();
        let (again, _) = FlexTree::load(file.as_ref()).unwrap();
        assert_eq!(
            again.extents_from(0).unwrap().collect::<Vec<_>>(),
            tree.extents_from(0).unwrap().collect::<Vec<_>>()
        );
    }
}

// ---- A whole space --------------------------------------------------------

/// Bytes of one record: its id and version, twice.
const REC: usize = 16;

fn record(id: u32, ver: u32) -> Vec<u8> {
    let mut w = [0u8; 8];
    w[..4].copy_from_slice(&id.to_le_bytes());
    w[4..].copy_from_slice(&ver.to_le_bytes());
    w.repeat(2)
}

fn decode(bytes: &[u8]) -> Option<Vec<(u32, u32)>> {
    if !bytes.len().is_multiple_of(REC) {
        return None;
    }
    bytes
        .chunks(REC)
        .map(|r| {
            (r[..8] == r[8..]).then(|| {
                let id = u32::from_le_bytes(r[..4].try_into().unwrap());
                (id, u32::from_le_bytes(r[4..8].try_into().unwrap()))
            })
        })
        .collect()
}

fn hash(state: &[(u32, u32)]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &(a, b) in state {
        h = (h ^ (u64::from(a) << 32 | u64::from(b))).wrapping_mul(0x100_0000_01b3);
    }
    h ^ state.len() as u64
}

fn content(space: &FlexSpace) -> Vec<u8> {
    let mut buf = vec![0u8; space.len() as usize];
    let n = space.read(0, &mut buf).expect("read");
    assert_eq!(n, buf.len());
    buf
}

fn space_opts() -> Options {
    Options::new()
        .create(true)
        .commit_log_bytes(64 << 10)
        .checkpoint_log_bytes(1 << 30)
}

struct SpaceRun {
    hashes: Vec<u64>,
    /// Index into `hashes` of the last state a sync or checkpoint made
    /// durable.
    floor: usize,
    windows: Vec<(u64, u64)>,
    /// The tree file's largest allocation and length after a checkpoint,
    /// and its allocation after the last one.
    tree_allocated: u64,
    tree_len: u64,
    records: usize,
}

/// Records inserted at random places (one extent each), then rounds of
/// Zipf-like overwrites, deletions and inserts, a sync now and then and a
/// checkpoint after every round.
fn space_run(seed: u64, storage: Arc<FaultStorage>) -> SpaceRun {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut r = SpaceRun {
        hashes: vec![hash(&[])],
        floor: 0,
        windows: Vec::new(),
        tree_allocated: 0,
        tree_len: 0,
        records: 0,
    };
    let Ok(space) = FlexSpace::open_with_storage(storage.clone(), space_opts()) else {
        return r;
    };
    let mut state: Vec<(u32, u32)> = Vec::new();
    let mut next = 0u32;
    let mut ok = true;
    // Enough records for a tree of ~50 pages (leaves are packed, ~7 to
    // a page), so that the freed pages make whole 4 KiB holes.
    while ok && state.len() < 15_000 {
        let i = rng.gen_range(0..=state.len());
        state.insert(i, (next, 0));
        ok = space.insert((i * REC) as u64, &record(next, 0)).is_ok();
        next += 1;
        r.hashes.push(hash(&state));
    }
    for round in 0..12 {
        for step in 0..1500 {
            if !ok {
                break;
            }
            let n = state.len() as u64;
            let res = match rng.gen_range(0..20) {
                0 if n > 500 => {
                    let i = zipf_like(&mut rng, n) as usize;
                    state.remove(i);
                    space.collapse((i * REC) as u64, REC as u64)
                }
                1 => {
                    let i = rng.gen_range(0..=state.len());
                    state.insert(i, (next, 0));
                    next += 1;
                    space.insert((i * REC) as u64, &record(next - 1, 0))
                }
                _ => {
                    let i = zipf_like(&mut rng, n) as usize;
                    state[i].1 += 1;
                    space.write((i * REC) as u64, &record(state[i].0, state[i].1))
                }
            };
            ok = res.is_ok();
            r.hashes.push(hash(&state));
            if ok && step % 500 == 499 {
                ok = space.sync().is_ok();
                if ok {
                    r.floor = r.hashes.len() - 1;
                }
            }
        }
        if !ok {
            break;
        }
        if round == 8 {
            // Delete most records: the tree shrinks, its file's tail is cut.
            let keep = state.len() / 8;
            ok = space
                .collapse((keep * REC) as u64, ((state.len() - keep) * REC) as u64)
                .is_ok();
            state.truncate(keep);
            r.hashes.push(hash(&state));
        }
        let first = storage.ops();
        ok = ok && space.checkpoint().is_ok();
        r.windows.push((first, storage.ops()));
        if !ok {
            break;
        }
        r.floor = r.hashes.len() - 1;
        if let (Ok(a), Some(b)) = (storage.allocated_bytes("tree"), storage.file_bytes("tree")) {
            r.tree_allocated = r.tree_allocated.max(a);
            r.tree_len = r.tree_len.max(b.len() as u64);
        }
    }
    r.records = state.len();
    r
}

#[test]
fn space_checkpoints_that_give_pages_back_survive_crashes() {
    let master = TestSeed::new("space_checkpoints_that_give_pages_back_survive_crashes");
    let mut rng = StdRng::seed_from_u64(master.get());
    for it in 0..iterations() {
        let seed = rng.gen();
        let model = CrashModel::Reorder { seed: rng.gen() };
        let dry = Arc::new(FaultStorage::with_model(model));
        let full = space_run(seed, dry.clone());
        assert!(
            full.tree_allocated + 16 * 4096 < full.tree_len,
            "the tree file must have holes: {} allocated of {}",
            full.tree_allocated,
            full.tree_len
        );
        let end_len = dry.file_bytes("tree").unwrap().len() as u64;
        assert!(
            end_len * 2 < full.tree_len,
            "the tail must be cut: {end_len}"
        );
        let total = dry.ops();
        let at = crash_point(&mut rng, total, &full.windows);
        let storage = Arc::new(FaultStorage::with_model(model));
        storage.plan(at, Fault::Crash { tear: false });
        let r = space_run(seed, storage.clone());
        let image = Arc::new(storage.crash_image());
        let ctx = format!("iteration {it} (seed {seed}, crash at {at}/{total})");
        let space = FlexSpace::open_with_storage(image, space_opts())
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        space.check_invariants();
        let got = decode(&content(&space))
            .unwrap_or_else(|| panic!("{ctx}: recovered bytes no state had"));
        assert!(
            r.hashes[r.floor..].contains(&hash(&got)),
            "{ctx}: not a state since the last sync ({} records)",
            got.len()
        );
        assert_eq!(space.check().unwrap(), Vec::<String>::new(), "{ctx}");
        // It takes further checkpoints.
        if !got.is_empty() {
            space.write(0, &record(u32::MAX, 1)).unwrap();
        }
        space.checkpoint().unwrap();
        space.check_invariants();
    }
}
