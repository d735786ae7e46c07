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
//! Half the crash points fall inside a checkpoint. Each run gives several
//! crash images (`FaultStorage::image_at`: what a crash before operation
//! N would leave, taken without stopping the run), each checked against
//! what had returned before operation N. `CRASH_ITERATIONS`
//! sets the number of crashes per test (default 12); `CRASH_SEED` the
//! master seed (random otherwise, printed on failure: `flexsys::test_seed`).

use std::sync::Arc;

use flexspace::{CrashModel, FaultStorage, FlexSpace, Options, Storage};
use flexsys::test_seed::{self, TestSeed};
use flextree::{Extent, FlexTree};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn iterations() -> u64 {
    test_seed::iterations(12)
}

/// Crash images taken from one run (`FaultStorage::image_at`): the runs
/// are deterministic (the tree's) or nearly so, and an image costs a
/// fraction of a run.
const IMAGES_PER_RUN: u64 = 8;

/// `k` crash points (see `crash_point`).
fn crash_points(rng: &mut StdRng, k: u64, total: u64, windows: &[(u64, u64)]) -> Vec<u64> {
    (0..k).map(|_| crash_point(rng, total, windows)).collect()
}

/// The last value in `marks` (`(operations so far, value)`, in order)
/// recorded at or before operation `at`, or 0: what had returned when an
/// image was taken before operation `at`.
fn as_of(marks: &[(u64, u64)], at: u64) -> u64 {
    marks
        .iter()
        .take_while(|(ops, _)| *ops <= at)
        .last()
        .map_or(0, |m| m.1)
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
    /// `(operations so far, version)` as each checkpoint returned.
    returned: Vec<(u64, u64)>,
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
        returned: Vec::new(),
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
                r.returned.push((storage.ops(), rep.version));
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
    let name = "tree_checkpoints_that_punch_and_cut_survive_crashes_anywhere";
    let master = TestSeed::new(name);
    tree_crashes(name, master.get(), false);
}

#[test]
fn tree_checkpoints_that_move_leaves_out_of_sparse_pages_survive_crashes() {
    let name = "tree_checkpoints_that_move_leaves_out_of_sparse_pages_survive_crashes";
    let master = TestSeed::new(name);
    tree_crashes(name, master.get(), true);
}

/// Prints how many planned crashes fired (run with `--nocapture` to see
/// it), and checks that nearly all did, or the test tests little.
fn report_fired(name: &str, fired: u64, iterations: u64) {
    eprintln!("{name}: {fired} of {iterations} planned crashes fired");
    assert!(
        fired * 10 >= iterations * 8,
        "{name}: only {fired} of {iterations} planned crashes fired"
    );
}

fn tree_crashes(name: &str, seed: u64, sparse: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut planned, mut fired) = (0u64, 0u64);
    while planned < iterations() {
        let seed = rng.gen();
        let model = CrashModel::Reorder { seed: rng.gen() };
        let dry = FaultStorage::with_model(model);
        let full = tree_run(seed, &dry, sparse);
        assert!(!sparse || full.moved > 0, "the run must move leaves");
        assert!(full.punched > 0, "the run must punch");
        assert!(full.truncated > 0, "the run must cut the tail");
        let k = IMAGES_PER_RUN.min(iterations() - planned);
        let mut points = crash_points(&mut rng, k, dry.ops(), &full.windows);
        points.sort_unstable();
        points.dedup();
        planned += points.len() as u64;
        let storage = FaultStorage::with_model(model);
        storage.image_at(&points, rng.gen());
        let run = tree_run(seed, &storage, sparse);
        for (at, image) in storage.take_images() {
            fired += 1;
            let done = as_of(&run.returned, at);
            check_tree_image(
                &image,
                done,
                &full,
                &format!("seed {seed}, crash at {at}/{}", dry.ops()),
            );
        }
    }
    report_fired(name, fired, planned);
}

/// Checks the crash image `image` of a tree run in which version `done`
/// was durable (`full`: the whole run's versions).
fn check_tree_image(image: &FaultStorage, done: u64, full: &TreeRun, ctx: &str) {
    {
        let Ok(file) = image.open_file("tree", false) else {
            assert_eq!(done, 0, "{ctx}: the tree file vanished");
            return;
        };
        if done == 0 && file.len().unwrap() == 0 {
            return;
        }
        let (tree, cp) = match FlexTree::load(file.as_ref()) {
            Ok(x) => x,
            Err(e) if done == 0 => {
                // The first checkpoint never completed: nothing promised.
                let _ = e;
                return;
            }
            Err(e) => panic!("{ctx}: {e} (version {done} was durable)"),
        };
        assert!(
            cp.version >= done && cp.version < full.versions.len() as u64,
            "{ctx}: loaded version {} with {done} durable",
            cp.version,
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
    /// `(operations so far, floor)` each time the floor rose.
    floors: Vec<(u64, u64)>,
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
        floors: Vec::new(),
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
                    r.floors.push((storage.ops(), r.floor as u64));
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
        r.floors.push((storage.ops(), r.floor as u64));
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
    let name = "space_checkpoints_that_give_pages_back_survive_crashes";
    let master = TestSeed::new(name);
    let mut rng = StdRng::seed_from_u64(master.get());
    let (mut planned, mut fired) = (0u64, 0u64);
    while planned < iterations() {
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
        let k = IMAGES_PER_RUN.min(iterations() - planned);
        let mut points = crash_points(&mut rng, k, total, &full.windows);
        points.sort_unstable();
        points.dedup();
        planned += points.len() as u64;
        let storage = Arc::new(FaultStorage::with_model(model));
        storage.image_at(&points, false);
        let r = space_run(seed, storage.clone());
        for (at, image) in storage.take_images() {
            fired += 1;
            let floor = as_of(&r.floors, at) as usize;
            let ctx = format!("seed {seed}, crash at {at}/{total}");
            let space = FlexSpace::open_with_storage(Arc::new(image), space_opts())
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            space.check_invariants();
            let got = decode(&content(&space))
                .unwrap_or_else(|| panic!("{ctx}: recovered bytes no state had"));
            assert!(
                r.hashes[floor..].contains(&hash(&got)),
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
    report_fired(name, fired, planned);
}
