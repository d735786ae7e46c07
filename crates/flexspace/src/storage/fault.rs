//! A fault-injecting in-memory storage backend for crash and error tests.
//!
//! Files are inodes named by a directory, as in POSIX: a handle reaches its
//! inode's bytes whatever happens to the names later. Each inode keeps its
//! `live` bytes (what reads see), its `durable` bytes (what its last `sync`
//! made durable) and the operations since that sync (writes, length
//! changes). The directory keeps its live names, its durable names (as of
//! the last `sync_dir`) and the changes since. All files share one
//! operation counter (creations, writes, syncs, length changes, removals,
//! renames, directory syncs). A [`Fault`] planned for operation N fires
//! there: `Crash` makes that and every later operation fail, after which
//! [`FaultStorage::crash_image`] gives the storage a restarted machine would
//! see; `NoSpace` and `Io` fail that one operation with ENOSPC or EIO and
//! change nothing.
//!
//! What a crash keeps depends on the [`CrashModel`]:
//! - `SyncedOnly`: each file's durable bytes (plus the sectors of the
//!   last unsynced write before its middle when the crash asks to tear
//!   it); every directory change survives.
//! - `Reorder { seed }` (a device that reorders writes): every operation
//!   since its file's last sync is independently kept, lost or torn (each
//!   512-byte sector of a torn write kept or not); every directory change
//!   since the last `sync_dir` independently survives or not (a created
//!   file may vanish, a removed one reappear with its durable bytes, a
//!   rename happen or not, atomically). The choices come from `seed`, so an
//!   image is reproducible.
//!
//! Reads fail too when asked ([`FaultStorage::fail_reads`], off by
//! default): each read is drawn against [`ReadFaults`] from a seeded
//! sequence and fails with EIO, or is short (part of the buffer filled,
//! then `UnexpectedEof`, as a file cut under the reader would give). Reads
//! have their own counter: they never shift the operation numbers that
//! faults and crashes are planned at, and a failed read changes no byte.
//!
//! A file can be made slow to sync ([`FaultStorage::slow_syncs`]), as a
//! slow device would be, so that tests can make one thread of a store fall
//! behind the others; it changes no byte and no operation count.
//!
//! Holes: `punch_hole` zeroes a range and is an operation like a write
//! (kept or lost by a crash as one); the 4 KiB blocks it covers whole stop
//! counting in `allocated_bytes` until written again. In a crash image
//! every all-zero block counts as a hole.
//!
//! Writable mappings ([`Storage::open_mappable`], on by default, off with
//! [`FaultStorage::without_mappings`]): preallocating and mapping a stretch
//! is an operation (it may crash or fail with ENOSPC, changing nothing),
//! which extends the inode as a length change; each copy into a mapping
//! is an operation too, one write of the inode: reads see it at once, and
//! until a sync a crash keeps, loses or tears it like any unsynced write
//! (as a page of a real mapping may or may not have been written back). A
//! copy cannot fail: after a crash it changes nothing, and an injected
//! error there is reported by the inode's next sync (as the kernel reports
//! a failed write-back at `fsync`).
//!
//! Invariant: `durable` is always `live` as of the last sync with the
//! operations since replayed, so a sync costs what was written since.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::storage::{MappableFile, Storage, StorageFile, WritableMap};

/// What happens at the planned operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The machine stops; with the `SyncedOnly` model, `tear` applies the
    /// sectors before the middle of the last unsynced write to the durable
    /// image (the `Reorder` model
    /// tears writes on its own).
    Crash {
        /// Tear the last write.
        tear: bool,
    },
    /// The operation fails with ENOSPC.
    NoSpace,
    /// The operation fails with EIO.
    Io,
}

/// What survives a crash (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashModel {
    /// Exactly the synced bytes (optionally half of the last write).
    SyncedOnly,
    /// Unsynced writes and directory changes independently kept, lost or
    /// torn, from a seeded random sequence.
    Reorder {
        /// Seed of the random choices.
        seed: u64,
    },
}

/// Which reads fail (see [`FaultStorage::fail_reads`]). Draws come from
/// a splitmix64 sequence seeded with `seed`, one per read, so a run that
/// reads in the same order fails the same reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadFaults {
    /// Seed of the draws.
    pub seed: u64,
    /// One read in this many fails with EIO (0: none).
    pub eio_one_in: u32,
    /// One read in this many is short (0: none).
    pub short_one_in: u32,
    /// Only reads of this file fail (`None`: every file).
    pub file: Option<String>,
}

/// The state of the read faults: the draws and what they did.
struct ReadFaultState {
    faults: ReadFaults,
    rng: Rng,
}

/// Sector size for torn writes.
const SECTOR: usize = 512;

#[derive(Clone)]
enum Pending {
    Write { off: usize, data: Vec<u8> },
    SetLen(usize),
    Punch { off: usize, len: usize },
}

/// Block size of the hole model.
const BLOCK: usize = 4096;

#[derive(Clone, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Pending>,
    /// Blocks of `live` punched and not written since.
    holes: std::collections::BTreeSet<usize>,
    /// An error injected at a copy into a mapping, for the next sync.
    deferred: Option<i32>,
}

impl Inode {
    /// An inode restarted from `bytes`, its all-zero blocks holes.
    fn restarted(bytes: Vec<u8>) -> Inode {
        let holes = bytes
            .chunks(BLOCK)
            .enumerate()
            .filter(|(_, b)| b.len() == BLOCK && b.iter().all(|&x| x == 0))
            .map(|(i, _)| i)
            .collect();
        Inode {
            live: bytes.clone(),
            durable: bytes,
            unsynced: Vec::new(),
            holes,
            deferred: None,
        }
    }

    /// Bytes the live image occupies: its blocks that are not holes.
    fn allocated(&self) -> u64 {
        let blocks = self.live.len().div_ceil(BLOCK);
        (blocks - self.holes.range(..blocks).count()) as u64 * BLOCK as u64
    }

    /// Blocks touched by `off..end` are no longer holes.
    fn fill(&mut self, off: usize, end: usize) {
        if end > off {
            let touched: Vec<usize> = self
                .holes
                .range(off / BLOCK..end.div_ceil(BLOCK))
                .copied()
                .collect();
            for b in touched {
                self.holes.remove(&b);
            }
        }
    }
}

#[derive(Clone)]
enum DirOp {
    Create { name: String, ino: u64 },
    Remove { name: String },
    Rename { from: String, to: String },
}

struct FaultState {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    names: BTreeMap<String, u64>,
    durable_names: BTreeMap<String, u64>,
    dir_ops: Vec<DirOp>,
    ops: u64,
    plan: Option<(u64, Fault)>,
    crashed: bool,
    /// The name of the thread whose operation the crash hit.
    crash_thread: Option<String>,
    torn: bool,
    /// The inode of the last write while it is unsynced.
    last_write: Option<u64>,
    model: CrashModel,
    /// A file name whose handles opened from then on sleep this long in
    /// every sync.
    slow_syncs: Option<(String, std::time::Duration)>,
    /// Read faults, when asked for.
    read_faults: Option<ReadFaultState>,
    /// Reads so far, and those failed with EIO and short.
    reads: u64,
    failed_reads: u64,
    short_reads: u64,
    /// Files may be opened for mapped appends.
    mappable: bool,
    /// Operations to take a crash image before (sorted), whether to tear
    /// its last write, and the images taken.
    image_points: std::collections::VecDeque<u64>,
    image_tear: bool,
    images: Vec<(u64, PackedImage)>,
    /// A full device (see "A full device" below).
    full: FullDevice,
}

impl Default for FaultState {
    fn default() -> Self {
        FaultState {
            inodes: HashMap::new(),
            next_ino: 1,
            names: BTreeMap::new(),
            durable_names: BTreeMap::new(),
            dir_ops: Vec::new(),
            ops: 0,
            plan: None,
            crashed: false,
            crash_thread: None,
            torn: false,
            last_write: None,
            model: CrashModel::SyncedOnly,
            slow_syncs: None,
            read_faults: None,
            reads: 0,
            failed_reads: 0,
            short_reads: 0,
            mappable: true,
            image_points: Default::default(),
            image_tear: false,
            images: Vec::new(),
            full: FullDevice::default(),
        }
    }
}

/// A small deterministic generator (splitmix64) for the crash choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn write_at(img: &mut Vec<u8>, off: usize, data: &[u8]) {
    let end = off + data.len();
    if img.len() < end {
        img.resize(end, 0);
    }
    img[off..end].copy_from_slice(data);
}

fn apply(img: &mut Vec<u8>, p: &Pending) {
    match p {
        Pending::Write { off, data } => write_at(img, *off, data),
        Pending::SetLen(n) => img.resize(*n, 0),
        Pending::Punch { off, len } => {
            let end = (off + len).min(img.len());
            if *off < end {
                img[*off..end].fill(0);
            }
        }
    }
}

/// An in-memory storage that injects faults.
#[derive(Clone, Default)]
pub struct FaultStorage {
    state: Arc<Mutex<FaultState>>,
}

fn crashed_error() -> io::Error {
    io::Error::other("simulated crash")
}

impl FaultStorage {
    /// An empty storage with no fault planned and the `SyncedOnly` model.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty storage whose crashes follow `model`.
    pub fn with_model(model: CrashModel) -> Self {
        let s = Self::default();
        s.state.lock().model = model;
        s
    }

    /// This storage, refusing to map files ([`Storage::open_mappable`]
    /// gives `None`), so that a store takes its buffered write path; its
    /// crash images refuse too.
    pub fn without_mappings(self) -> Self {
        self.state.lock().mappable = false;
        self
    }

    /// Plans `fault` for operation number `at` (counting from now).
    pub fn plan(&self, at: u64, fault: Fault) {
        let mut s = self.state.lock();
        let now = s.ops;
        s.plan = Some((now + at, fault));
    }

    /// Makes every sync of the file `name`, through handles opened from
    /// now on, sleep `delay` first (outside the storage's lock), as on a
    /// slow device. A crash image does not inherit it.
    pub fn slow_syncs(&self, name: &str, delay: std::time::Duration) {
        self.state.lock().slow_syncs = Some((name.to_string(), delay));
    }

    /// Makes reads fail as `faults` says from now on (`None`: no read
    /// fails). Inodes are shared with handles already open, so they fail
    /// too. A crash image does not inherit it.
    pub fn fail_reads(&self, faults: Option<ReadFaults>) {
        self.state.lock().read_faults = faults.map(|faults| ReadFaultState {
            rng: Rng(faults.seed),
            faults,
        });
    }

    /// Reads so far, and of those how many failed with EIO and how many
    /// were short.
    pub fn read_counts(&self) -> (u64, u64, u64) {
        let s = self.state.lock();
        (s.reads, s.failed_reads, s.short_reads)
    }

    /// Removes any planned fault.
    pub fn clear_plan(&self) {
        self.state.lock().plan = None;
    }

    /// Operations counted so far.
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Whether a planned crash has happened.
    pub fn crashed(&self) -> bool {
        self.state.lock().crashed
    }

    /// The name of the thread whose operation a planned crash hit (`None`
    /// before the crash, or for a thread without a name): a test tells a
    /// crash in its own call from one in a background thread's work, whose
    /// failure no caller sees.
    pub fn crash_thread(&self) -> Option<String> {
        self.state.lock().crash_thread.clone()
    }

    /// The storage after a restart (see the module documentation). It has
    /// the same crash model (a `Reorder` seed is varied), nothing unsynced,
    /// and no fault planned.
    pub fn crash_image(&self) -> FaultStorage {
        let s = self.state.lock();
        s.image(s.torn)
    }

    /// Takes, without stopping anything, the image a crash just before
    /// each of the operations `points` (counting from now) would leave
    /// (tearing the last write under `SyncedOnly` when `tear` is set): one
    /// run then yields many crash images. [`FaultStorage::take_images`]
    /// hands them over. Points asked for before and not reached yet stay
    /// (a phase that ran shorter than planned leaves its points to the
    /// next); `tear` applies to all.
    pub fn image_at(&self, points: &[u64], tear: bool) {
        let mut s = self.state.lock();
        let now = s.ops;
        let mut points: Vec<u64> = points.iter().map(|p| now + p).collect();
        points.extend(s.image_points.drain(..));
        points.sort_unstable();
        points.dedup();
        s.image_points = points.into();
        s.image_tear = tear;
    }

    /// The images [`FaultStorage::image_at`] took so far, each with the
    /// operation it was taken before (an absolute count, as
    /// [`FaultStorage::ops`] gives). They are kept packed until then and
    /// each unpacks only when the iterator reaches it, so a caller that
    /// checks one before taking the next holds one whole image at a time.
    pub fn take_images(&self) -> impl ExactSizeIterator<Item = (u64, FaultStorage)> {
        std::mem::take(&mut self.state.lock().images)
            .into_iter()
            .map(|(at, image)| (at, image.unpack()))
    }

    /// A copy of a file's live bytes (for corruption tests).
    pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let s = self.state.lock();
        let ino = s.names.get(name)?;
        s.inodes.get(ino).map(|i| i.live.clone())
    }

    /// Replaces a file's live and durable bytes (for corruption tests);
    /// creates it (durably) if needed.
    pub fn set_file_bytes(&self, name: &str, bytes: Vec<u8>) {
        let mut s = self.state.lock();
        let ino = match s.names.get(name) {
            Some(&i) => i,
            None => {
                let i = s.new_inode();
                s.names.insert(name.to_string(), i);
                s.durable_names.insert(name.to_string(), i);
                i
            }
        };
        s.inodes.insert(ino, Inode::restarted(bytes));
    }
}

/// A crash image as taken on the way ([`FaultStorage::image_at`]): a data
/// file of a flexible space is mostly holes (segments punched as they
/// empty), so its all-zero blocks are left out until the image is checked.
struct PackedImage {
    files: HashMap<u64, PackedFile>,
    names: BTreeMap<String, u64>,
    next_ino: u64,
    model: CrashModel,
    mappable: bool,
}

impl PackedImage {
    /// The storage the image stands for, restarted (its durable names and
    /// bytes only).
    fn unpack(self) -> FaultStorage {
        let inodes: HashMap<u64, Inode> = self
            .files
            .into_iter()
            .map(|(ino, f)| (ino, Inode::restarted(f.unpack())))
            .collect();
        FaultStorage {
            state: Arc::new(Mutex::new(FaultState {
                inodes,
                next_ino: self.next_ino,
                durable_names: self.names.clone(),
                names: self.names,
                model: self.model,
                mappable: self.mappable,
                ..FaultState::default()
            })),
        }
    }
}

/// A file's bytes without its all-zero blocks: its length and each
/// nonzero run of whole blocks (the last one may be partial) with the
/// offset it starts at.
struct PackedFile {
    len: usize,
    runs: Vec<(usize, Vec<u8>)>,
}

impl PackedFile {
    fn pack(bytes: &[u8]) -> PackedFile {
        let zero = |b: &[u8]| {
            b.chunks(8)
                .all(|w| w.iter().fold(0u8, |acc, &x| acc | x) == 0)
        };
        let mut runs: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut open = false;
        for (i, block) in bytes.chunks(BLOCK).enumerate() {
            if zero(block) {
                open = false;
                continue;
            }
            match runs.last_mut() {
                Some((_, run)) if open => run.extend_from_slice(block),
                _ => runs.push((i * BLOCK, block.to_vec())),
            }
            open = true;
        }
        PackedFile {
            len: bytes.len(),
            runs,
        }
    }

    fn unpack(self) -> Vec<u8> {
        let mut bytes = vec![0u8; self.len];
        for (off, run) in self.runs {
            bytes[off..off + run.len()].copy_from_slice(&run);
        }
        bytes
    }
}

impl FaultState {
    /// The storage a crash now would leave (see
    /// [`FaultStorage::crash_image`]); `torn`: tear the last write under
    /// `SyncedOnly`.
    fn image(&self, torn: bool) -> FaultStorage {
        self.packed_image(torn).unpack()
    }

    /// The storage a crash now would leave, its files' all-zero blocks
    /// left out (see [`PackedImage`]).
    fn packed_image(&self, torn: bool) -> PackedImage {
        let s = self;
        let (names, inodes, model) = match s.model {
            CrashModel::SyncedOnly => {
                let mut inodes = HashMap::new();
                for (&ino, img) in &s.inodes {
                    let mut d = img.durable.clone();
                    if torn {
                        if let Some(Pending::Write { off, data }) = img.unsynced.last() {
                            // Only the very last write of the storage tears,
                            // at a sector boundary (a device writes whole
                            // sectors): the sectors before its middle stay.
                            if s.last_write_ino() == Some(ino) {
                                let cut = ((off + data.len() / 2) / SECTOR * SECTOR).max(*off);
                                if cut > *off {
                                    write_at(&mut d, *off, &data[..cut - off]);
                                }
                            }
                        }
                    }
                    inodes.insert(ino, d);
                }
                (s.names.clone(), inodes, CrashModel::SyncedOnly)
            }
            CrashModel::Reorder { seed } => {
                let mut rng = Rng(seed ^ s.ops.rotate_left(32));
                let mut names = s.durable_names.clone();
                for op in &s.dir_ops {
                    if rng.below(2) == 0 {
                        continue;
                    }
                    match op {
                        DirOp::Create { name, ino } => {
                            names.insert(name.clone(), *ino);
                        }
                        DirOp::Remove { name } => {
                            names.remove(name);
                        }
                        DirOp::Rename { from, to } => {
                            if let Some(ino) = names.remove(from) {
                                names.insert(to.clone(), ino);
                            }
                        }
                    }
                }
                let mut inodes = HashMap::new();
                // Inodes in a fixed order, so the image is reproducible.
                let mut order: Vec<&u64> = s.inodes.keys().collect();
                order.sort();
                for ino in order {
                    let img = &s.inodes[ino];
                    let mut d = img.durable.clone();
                    for p in &img.unsynced {
                        match (rng.below(3), p) {
                            (0, _) => {}
                            (1, p) => apply(&mut d, p),
                            (_, Pending::Write { off, data }) => {
                                for (i, sector) in data.chunks(SECTOR).enumerate() {
                                    if rng.below(2) == 1 {
                                        write_at(&mut d, off + i * SECTOR, sector);
                                    }
                                }
                            }
                            (_, p) => apply(&mut d, p),
                        }
                    }
                    inodes.insert(*ino, d);
                }
                let model = CrashModel::Reorder { seed: rng.next() };
                (names, inodes, model)
            }
        };
        // A file no name reaches is gone after a restart: leave it out.
        let named: std::collections::HashSet<u64> = names.values().copied().collect();
        PackedImage {
            files: inodes
                .into_iter()
                .filter(|(ino, _)| named.contains(ino))
                .map(|(ino, d)| (ino, PackedFile::pack(&d)))
                .collect(),
            names,
            next_ino: s.next_ino,
            model,
            mappable: s.mappable,
        }
    }

    /// Counts one operation and applies the plan.
    fn step(&mut self) -> io::Result<()> {
        if self.crashed {
            return Err(crashed_error());
        }
        let n = self.ops;
        while self.image_points.front().is_some_and(|&p| p <= n) {
            if self.image_points.pop_front() == Some(n) {
                let image = self.packed_image(self.image_tear);
                self.images.push((n, image));
            }
        }
        self.ops += 1;
        match self.plan {
            Some((at, fault)) if at == n => {
                self.plan = None;
                match fault {
                    Fault::Crash { tear } => {
                        self.crashed = true;
                        self.crash_thread = std::thread::current().name().map(str::to_owned);
                        self.torn = tear;
                        Err(crashed_error())
                    }
                    Fault::NoSpace => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
                    Fault::Io => Err(io::Error::from_raw_os_error(libc::EIO)),
                }
            }
            _ => Ok(()),
        }
    }

    /// Counts one read of `len` bytes from inode `ino` and draws its
    /// fault: `Some(Err(EIO))`, `Some(Ok(n))` for a read short after `n`
    /// bytes, or `None`.
    fn read_fault(&mut self, ino: u64, len: usize) -> Option<io::Result<usize>> {
        self.reads += 1;
        let names = &self.names;
        let rf = self.read_faults.as_mut()?;
        if let Some(file) = &rf.faults.file {
            if names.get(file) != Some(&ino) {
                return None;
            }
        }
        let draw = |rng: &mut Rng, one_in: u32| one_in > 0 && rng.below(u64::from(one_in)) == 0;
        if draw(&mut rf.rng, rf.faults.eio_one_in) {
            self.failed_reads += 1;
            return Some(Err(io::Error::from_raw_os_error(libc::EIO)));
        }
        if len > 0 && draw(&mut rf.rng, rf.faults.short_one_in) {
            let n = rf.rng.below(len as u64) as usize;
            self.short_reads += 1;
            return Some(Ok(n));
        }
        None
    }

    fn new_inode(&mut self) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, Inode::default());
        ino
    }

    /// The inode written last, if its write is still unsynced.
    fn last_write_ino(&self) -> Option<u64> {
        self.last_write
    }

    /// Makes the inode's operations so far durable (a sync of it), or
    /// reports the error a copy into one of its mappings left.
    fn sync_inode(&mut self, ino: u64) -> io::Result<()> {
        self.step()?;
        if self.last_write == Some(ino) {
            self.last_write = None;
        }
        let img = self.inode(ino)?;
        if let Some(errno) = img.deferred.take() {
            return Err(io::Error::from_raw_os_error(errno));
        }
        let ops = std::mem::take(&mut img.unsynced);
        for p in &ops {
            apply(&mut img.durable, p);
        }
        Ok(())
    }

    /// One write of `data` at `off` to inode `ino`, not synced.
    fn write_inode(&mut self, ino: u64, off: usize, data: &[u8]) -> io::Result<()> {
        self.last_write = Some(ino);
        let img = self.inode(ino)?;
        write_at(&mut img.live, off, data);
        img.fill(off, off + data.len());
        img.unsynced.push(Pending::Write {
            off,
            data: data.to_vec(),
        });
        Ok(())
    }

    fn inode(&mut self, ino: u64) -> io::Result<&mut Inode> {
        self.inodes
            .get_mut(&ino)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }
}

struct FaultFile {
    ino: u64,
    state: Arc<Mutex<FaultState>>,
    /// How long each sync sleeps first (see `FaultStorage::slow_syncs`).
    sync_delay: Option<std::time::Duration>,
}

/// A handle on an inode for appends through simulated mappings.
struct FaultMappable {
    ino: u64,
    state: Arc<Mutex<FaultState>>,
    sync_delay: Option<std::time::Duration>,
}

/// A simulated writable mapping: a stretch of an inode, each copy into it
/// one write of the inode (see the module documentation).
pub(crate) struct SimulatedMap {
    ino: u64,
    state: Arc<Mutex<FaultState>>,
    /// Where the stretch starts in the file, and its length.
    at: usize,
    len: usize,
}

impl SimulatedMap {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies `bytes` to offset `off` of the stretch.
    pub(crate) fn write(&mut self, off: usize, bytes: &[u8]) {
        assert!(
            off.checked_add(bytes.len()).is_some_and(|e| e <= self.len),
            "a write past a mapping"
        );
        let mut s = self.state.lock();
        let fault = s.step();
        if s.crashed {
            // The machine is off: nothing lands.
            return;
        }
        // The inode exists as long as a handle on it does.
        if s.write_inode(self.ino, self.at + off, bytes).is_ok() {
            if let (Err(e), Ok(img)) = (fault, s.inode(self.ino)) {
                img.deferred = e.raw_os_error().or(Some(libc::EIO));
            }
        }
    }
}

impl MappableFile for FaultMappable {
    fn map_writable(&self, at: u64, len: u64) -> io::Result<WritableMap> {
        let (Ok(at), Ok(len)) = (usize::try_from(at), usize::try_from(len)) else {
            return Err(io::ErrorKind::InvalidInput.into());
        };
        let end = at.checked_add(len).ok_or(io::ErrorKind::InvalidInput)?;
        let mut s = self.state.lock();
        s.step()?;
        let img = s.inode(self.ino)?;
        if img.live.len() < end {
            img.live.resize(end, 0);
            img.unsynced.push(Pending::SetLen(end));
        }
        // Preallocated: its blocks are no longer holes.
        img.fill(at, end);
        Ok(WritableMap::simulated(SimulatedMap {
            ino: self.ino,
            state: self.state.clone(),
            at,
            len,
        }))
    }

    fn sync_data(&self) -> io::Result<()> {
        if let Some(d) = self.sync_delay {
            std::thread::sleep(d);
        }
        self.state.lock().sync_inode(self.ino)
    }

    fn start_write_back(&self, _from: u64, _len: u64) {}
}

impl Storage for FaultStorage {
    fn open_mappable(&self, name: &str) -> io::Result<Option<Arc<dyn MappableFile>>> {
        let s = self.state.lock();
        if s.crashed {
            return Err(crashed_error());
        }
        if !s.mappable {
            return Ok(None);
        }
        let ino = *s
            .names
            .get(name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let sync_delay = s
            .slow_syncs
            .as_ref()
            .filter(|(slow, _)| slow == name)
            .map(|&(_, d)| d);
        Ok(Some(Arc::new(FaultMappable {
            ino,
            state: self.state.clone(),
            sync_delay,
        })))
    }

    fn open_file(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let mut s = self.state.lock();
        if s.crashed {
            return Err(crashed_error());
        }
        let ino = match s.names.get(name) {
            Some(&ino) => ino,
            None if create => {
                s.step()?;
                let ino = s.new_inode();
                s.names.insert(name.to_string(), ino);
                s.dir_ops.push(DirOp::Create {
                    name: name.to_string(),
                    ino,
                });
                ino
            }
            None => return Err(io::Error::from(io::ErrorKind::NotFound)),
        };
        let sync_delay = s
            .slow_syncs
            .as_ref()
            .filter(|(slow, _)| slow == name)
            .map(|&(_, d)| d);
        Ok(Arc::new(FaultFile {
            ino,
            state: self.state.clone(),
            sync_delay,
        }))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        let s = self.state.lock();
        if s.crashed {
            return Err(crashed_error());
        }
        Ok(s.names.contains_key(name))
    }

    fn remove_file(&self, name: &str) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        s.names
            .remove(name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.dir_ops.push(DirOp::Remove {
            name: name.to_string(),
        });
        Ok(())
    }

    fn list_files(&self) -> io::Result<Vec<String>> {
        let s = self.state.lock();
        if s.crashed {
            return Err(crashed_error());
        }
        Ok(s.names.keys().cloned().collect())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        let ino = s
            .names
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.names.insert(to.to_string(), ino);
        s.dir_ops.push(DirOp::Rename {
            from: from.to_string(),
            to: to.to_string(),
        });
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        s.durable_names = s.names.clone();
        s.dir_ops.clear();
        Ok(())
    }
}

impl StorageFile for FaultFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut s = self.state.lock();
        if s.crashed {
            return Err(crashed_error());
        }
        let fault = s.read_fault(self.ino, buf.len());
        let img = s.inode(self.ino)?;
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = match start.checked_add(buf.len()) {
            Some(end) if end <= img.live.len() => end,
            _ => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
        };
        match fault {
            None => {
                buf.copy_from_slice(&img.live[start..end]);
                Ok(())
            }
            Some(Ok(n)) => {
                buf[..n].copy_from_slice(&img.live[start..start + n]);
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("simulated short read ({n} of {} bytes)", buf.len()),
                ))
            }
            Some(Err(e)) => Err(e),
        }
    }

    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        let off = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        s.refuse_allocation(self.ino, off, data.len())?;
        s.write_inode(self.ino, off, data)
    }

    fn sync(&self) -> io::Result<()> {
        if let Some(d) = self.sync_delay {
            std::thread::sleep(d);
        }
        self.state.lock().sync_inode(self.ino)
    }

    fn len(&self) -> io::Result<u64> {
        let mut s = self.state.lock();
        if s.crashed {
            return Err(crashed_error());
        }
        Ok(s.inode(self.ino)?.live.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        let n = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        let img = s.inode(self.ino)?;
        let old = img.live.len();
        img.live.resize(n, 0);
        img.fill(n.min(old), usize::MAX);
        img.unsynced.push(Pending::SetLen(n));
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<u64> {
        let mut s = self.state.lock();
        s.step()?;
        let off = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let len = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        let img = s.inode(self.ino)?;
        let before = img.allocated();
        let p = Pending::Punch { off, len };
        apply(&mut img.live, &p);
        let end = off.saturating_add(len).min(img.live.len());
        // Whole blocks inside the range (a partial last block of the file
        // counts as whole).
        let first = off.div_ceil(BLOCK);
        let last = if end == img.live.len() {
            end.div_ceil(BLOCK)
        } else {
            end / BLOCK
        };
        img.holes.extend(first..last.max(first));
        img.unsynced.push(p);
        Ok(before - img.allocated())
    }

    fn allocated_bytes(&self) -> io::Result<u64> {
        let mut s = self.state.lock();
        if s.crashed {
            return Err(crashed_error());
        }
        Ok(s.inode(self.ino)?.allocated())
    }
}

// ---- A full device ----------------------------------------------------
//
// `FaultStorage::fill_device(at)`: from operation `at` on (counting from
// now) the device is full until `free_device()`: a write that needs a new
// block (past the end of its file, into a punched hole or a block of
// zeros) fails with
// ENOSPC and changes nothing, counted as an operation like any other.
// Everything else succeeds: overwrites of allocated blocks, syncs, length
// changes (a longer file is sparse: its new blocks are zeros, and a block
// of zeros counts as unallocated), creations, renames, removals, punches.
// Crash images do not inherit it.

/// The state of a full device.
#[derive(Clone, Copy, Default)]
struct FullDevice {
    /// The operation from which the device is full, if it fills.
    from: Option<u64>,
    /// Writes refused so far.
    refused: u64,
}

impl FaultStorage {
    /// Makes the device full from operation number `at` (counting from
    /// now) until [`FaultStorage::free_device`] (see "A full device" in
    /// the source).
    pub fn fill_device(&self, at: u64) {
        let mut s = self.state.lock();
        let now = s.ops;
        s.full.from = Some(now + at);
    }

    /// Frees the device: writes that need new blocks succeed again.
    pub fn free_device(&self) {
        self.state.lock().full.from = None;
    }

    /// Whether the device is full now.
    pub fn device_full(&self) -> bool {
        let s = self.state.lock();
        s.full.from.is_some_and(|from| s.ops >= from)
    }

    /// Writes a full device refused so far.
    pub fn refused_writes(&self) -> u64 {
        self.state.lock().full.refused
    }
}

impl FaultState {
    /// Fails a write of `len` bytes at `off` of inode `ino` with ENOSPC
    /// when the device is full and the write needs a new block (the
    /// operation was counted already: it is the one numbered `ops - 1`).
    fn refuse_allocation(&mut self, ino: u64, off: usize, len: usize) -> io::Result<()> {
        let Some(from) = self.full.from else {
            return Ok(());
        };
        if self.ops <= from || len == 0 {
            return Ok(());
        }
        let img = self.inode(ino)?;
        let end = off.saturating_add(len);
        let grows = end > img.live.len();
        // A block of zeros is taken for unallocated: a hole, or the sparse
        // tail a longer `set_len` left (a block written with zeros counts
        // as one too: a stricter device, never a laxer one).
        let unallocated = (off / BLOCK..end.div_ceil(BLOCK)).any(|b| {
            let block =
                &img.live[(b * BLOCK).min(img.live.len())..((b + 1) * BLOCK).min(img.live.len())];
            img.holes.contains(&b) || block.iter().all(|&x| x == 0)
        });
        if grows || unallocated {
            self.full.refused += 1;
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_keeps_only_synced_bytes() {
        let st = FaultStorage::new();
        let f = st.open_file("a", true).unwrap();
        f.write_all_at(0, b"hello").unwrap();
        f.sync().unwrap();
        f.write_all_at(5, b" world").unwrap();
        st.plan(0, Fault::Crash { tear: false });
        assert!(f.write_all_at(11, b"!").is_err());
        assert!(f.sync().is_err());
        let img = st.crash_image();
        assert_eq!(img.file_bytes("a").unwrap(), b"hello");
        let torn = {
            let st = FaultStorage::new();
            let f = st.open_file("a", true).unwrap();
            f.write_all_at(0, &[1u8; 3 * SECTOR]).unwrap();
            f.write_all_at(4 * SECTOR as u64, b"abcd").unwrap();
            st.plan(0, Fault::Crash { tear: true });
            let _ = f.sync();
            st.crash_image()
        };
        // The last write lies in one sector: none of it stays.
        assert!(torn.file_bytes("a").unwrap().is_empty());
        let torn = {
            let st = FaultStorage::new();
            let f = st.open_file("a", true).unwrap();
            f.write_all_at(100, &[1u8; 3 * SECTOR]).unwrap();
            st.plan(0, Fault::Crash { tear: true });
            let _ = f.sync();
            st.crash_image()
        };
        // Its sectors before the middle stay, the others do not.
        let mut want = vec![0u8; SECTOR];
        want[100..].fill(1);
        assert_eq!(torn.file_bytes("a").unwrap(), want);
    }

    /// A punched range reads as zeros and stops counting as allocated; a
    /// crash keeps or loses an unsynced punch like a write; a crash at the
    /// punch changes nothing.
    #[test]
    fn holes_read_as_zeros_and_free_blocks() {
        let st = FaultStorage::new();
        let f = st.open_file("a", true).unwrap();
        f.write_all_at(0, &[9u8; 4 * BLOCK]).unwrap();
        f.sync().unwrap();
        assert_eq!(f.allocated_bytes().unwrap(), 4 * BLOCK as u64);
        assert_eq!(
            f.punch_hole(BLOCK as u64, 2 * BLOCK as u64).unwrap(),
            2 * BLOCK as u64
        );
        assert_eq!(f.allocated_bytes().unwrap(), 2 * BLOCK as u64);
        assert_eq!(f.len().unwrap(), 4 * BLOCK as u64);
        let mut b = vec![1u8; 4 * BLOCK];
        f.read_exact_at(0, &mut b).unwrap();
        assert!(b[BLOCK..3 * BLOCK].iter().all(|&x| x == 0));
        assert!(b[..BLOCK].iter().chain(&b[3 * BLOCK..]).all(|&x| x == 9));
        // Unsynced: a crash loses the punch.
        assert_eq!(
            st.crash_image().file_bytes("a").unwrap(),
            vec![9u8; 4 * BLOCK]
        );
        f.sync().unwrap();
        let img = st.crash_image();
        let g = img.open_file("a", false).unwrap();
        assert_eq!(g.allocated_bytes().unwrap(), 2 * BLOCK as u64);
        // Writing into a hole allocates its block again.
        f.write_all_at(BLOCK as u64 + 10, b"x").unwrap();
        assert_eq!(f.allocated_bytes().unwrap(), 3 * BLOCK as u64);
        st.plan(0, Fault::Crash { tear: false });
        assert!(f.punch_hole(0, BLOCK as u64).is_err());
        assert_eq!(
            &st.crash_image().file_bytes("a").unwrap()[..BLOCK],
            &[9u8; BLOCK][..]
        );
    }

    /// Read faults: off by default; EIO and short reads at the rate asked,
    /// the same reads for the same seed, only on the file named; a failed
    /// read changes nothing and the next read of the same bytes succeeds
    /// unless it draws a fault too.
    #[test]
    fn reads_fail_as_asked_and_deterministically() {
        let run = |faults: Option<ReadFaults>| {
            let st = FaultStorage::new();
            let a = st.open_file("a", true).unwrap();
            let b = st.open_file("b", true).unwrap();
            a.write_all_at(0, &[7u8; 1000]).unwrap();
            b.write_all_at(0, &[9u8; 1000]).unwrap();
            let ops = st.ops();
            st.fail_reads(faults);
            let mut outcomes = Vec::new();
            for i in 0..300u64 {
                let mut buf = [0u8; 100];
                let f = if i % 2 == 0 { &a } else { &b };
                let want = if i % 2 == 0 { 7 } else { 9 };
                outcomes.push(match f.read_exact_at(i % 900, &mut buf) {
                    Ok(()) => {
                        assert!(buf.iter().all(|&x| x == want));
                        0
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EIO) => 1,
                    Err(e) => {
                        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
                        // The bytes it did read are the file's.
                        let n = buf.iter().take_while(|&&x| x == want).count();
                        assert!(buf[n..].iter().all(|&x| x == 0));
                        2
                    }
                });
            }
            // Reads are not operations, and changed no byte.
            assert_eq!(st.ops(), ops);
            assert_eq!(st.file_bytes("a").unwrap(), vec![7u8; 1000]);
            let (reads, eio, short) = st.read_counts();
            assert_eq!(reads, 300);
            assert_eq!(eio, outcomes.iter().filter(|&&o| o == 1).count() as u64);
            assert_eq!(short, outcomes.iter().filter(|&&o| o == 2).count() as u64);
            outcomes
        };
        assert!(run(None).iter().all(|&o| o == 0));
        let faults = ReadFaults {
            seed: 3,
            eio_one_in: 5,
            short_one_in: 7,
            file: None,
        };
        let first = run(Some(faults.clone()));
        assert_eq!(first, run(Some(faults.clone())), "same seed, same faults");
        let eio = first.iter().filter(|&&o| o == 1).count();
        let short = first.iter().filter(|&&o| o == 2).count();
        assert!((30..=90).contains(&eio), "{eio} EIO of 300 at 1 in 5");
        assert!((15..=70).contains(&short), "{short} short of 300");
        let other = run(Some(ReadFaults {
            seed: 4,
            ..faults.clone()
        }));
        assert_ne!(first, other, "another seed, other faults");
        // Only file "b" (the odd reads) fails.
        let only_b = run(Some(ReadFaults {
            file: Some("b".into()),
            ..faults
        }));
        assert!(only_b.iter().step_by(2).all(|&o| o == 0));
        assert!(only_b.iter().skip(1).step_by(2).any(|&o| o != 0));
    }

    #[test]
    fn a_slow_file_syncs_slowly_and_the_same() {
        let st = FaultStorage::new();
        st.slow_syncs("slow", std::time::Duration::from_millis(20));
        let slow = st.open_file("slow", true).unwrap();
        let fast = st.open_file("fast", true).unwrap();
        slow.write_all_at(0, b"abc").unwrap();
        fast.write_all_at(0, b"xyz").unwrap();
        fast.sync().unwrap();
        let t = std::time::Instant::now();
        slow.sync().unwrap();
        assert!(t.elapsed() >= std::time::Duration::from_millis(20));
        // Both syncs made their bytes durable, as ever.
        let img = st.crash_image();
        assert_eq!(img.file_bytes("slow").unwrap(), b"abc");
        assert_eq!(img.file_bytes("fast").unwrap(), b"xyz");
    }

    /// An image taken before operation N is what a crash planned at N
    /// leaves, and taking it stops nothing.
    #[test]
    fn packed_files_unpack_to_their_bytes() {
        let mut bytes = vec![0u8; 9 * BLOCK + 100];
        bytes[5] = 1; // block 0
        bytes[BLOCK + 7] = 2; // block 1, the same run
        bytes[4 * BLOCK] = 3; // block 4 alone
        bytes[4 * BLOCK + BLOCK - 1] = 4;
        bytes[9 * BLOCK + 99] = 5; // the partial last block
        let packed = PackedFile::pack(&bytes);
        assert_eq!(
            packed
                .runs
                .iter()
                .map(|r| (r.0, r.1.len()))
                .collect::<Vec<_>>(),
            [(0, 2 * BLOCK), (4 * BLOCK, BLOCK), (9 * BLOCK, 100)]
        );
        assert_eq!(packed.unpack(), bytes);
        for len in [0, 1, BLOCK, 3 * BLOCK + 1] {
            let zeros = vec![0u8; len];
            let packed = PackedFile::pack(&zeros);
            assert!(packed.runs.is_empty());
            assert_eq!(packed.unpack(), zeros);
        }
    }

    #[test]
    fn images_taken_on_the_way_are_crash_images() {
        let ops = |st: &FaultStorage| {
            let f = st.open_file("a", true)?;
            for i in 0..6u8 {
                f.write_all_at(u64::from(i), &[i])?;
                if i % 2 == 1 {
                    f.sync()?;
                }
            }
            st.sync_dir()
        };
        let st = FaultStorage::new();
        st.image_at(&[3, 0, 100], true);
        st.image_at(&[5, 3], true);
        ops(&st).unwrap();
        let images: Vec<_> = st.take_images().collect();
        assert_eq!(images.iter().map(|i| i.0).collect::<Vec<_>>(), [0, 3, 5]);
        for (at, image) in images {
            let crashed = FaultStorage::new();
            crashed.plan(at, Fault::Crash { tear: true });
            assert!(ops(&crashed).is_err());
            let want = crashed.crash_image();
            assert_eq!(image.list_files().unwrap(), want.list_files().unwrap());
            assert_eq!(image.file_bytes("a"), want.file_bytes("a"), "at {at}");
        }
        assert_eq!(st.take_images().len(), 0);
        assert_eq!(st.file_bytes("a").unwrap(), [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn directory_operations() {
        let st = FaultStorage::new();
        st.open_file("b", true)
            .unwrap()
            .write_all_at(0, b"x")
            .unwrap();
        st.open_file("a", true).unwrap();
        assert_eq!(st.list_files().unwrap(), vec!["a", "b"]);
        st.rename("b", "a").unwrap();
        assert_eq!(st.list_files().unwrap(), vec!["a"]);
        assert_eq!(st.file_bytes("a").unwrap(), b"x");
        st.remove_file("a").unwrap();
        assert!(st.remove_file("a").is_err());
        assert!(st.list_files().unwrap().is_empty());
        st.sync_dir().unwrap();
    }

    #[test]
    fn handles_follow_their_file_across_renames() {
        let st = FaultStorage::new();
        let f = st.open_file("a", true).unwrap();
        st.rename("a", "b").unwrap();
        f.write_all_at(0, b"moved").unwrap();
        assert_eq!(st.file_bytes("b").unwrap(), b"moved");
        st.remove_file("b").unwrap();
        // Like an unlinked POSIX file: the handle still works.
        f.write_all_at(0, b"M").unwrap();
        let mut b = [0u8; 5];
        f.read_exact_at(0, &mut b).unwrap();
        assert_eq!(&b, b"Moved");
    }

    #[test]
    fn errors_fire_once() {
        let st = FaultStorage::new();
        let f = st.open_file("a", true).unwrap();
        st.plan(1, Fault::NoSpace);
        f.write_all_at(0, b"x").unwrap();
        let e = f.write_all_at(1, b"y").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        f.write_all_at(1, b"z").unwrap();
        assert_eq!(st.file_bytes("a").unwrap(), b"xz");
        assert!(st.open_file("missing", false).is_err());
    }

    /// Under the reordering model, every unsynced write is kept, lost or
    /// torn independently; synced bytes always survive; images are
    /// reproducible from the seed.
    #[test]
    fn reordering_crashes_mix_unsynced_writes() {
        let mut outcomes = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let st = FaultStorage::with_model(CrashModel::Reorder { seed });
            let f = st.open_file("a", true).unwrap();
            st.sync_dir().unwrap();
            f.write_all_at(0, &[1u8; 1024]).unwrap();
            f.sync().unwrap();
            f.write_all_at(0, &[2u8; 1024]).unwrap();
            f.write_all_at(1024, &[3u8; 512]).unwrap();
            st.plan(0, Fault::Crash { tear: false });
            let _ = f.sync();
            let a = st.crash_image().file_bytes("a").unwrap();
            assert_eq!(a, st.crash_image().file_bytes("a").unwrap(), "seed {seed}");
            assert!(a.len() == 1024 || a.len() == 1536);
            let s0 = a[0];
            assert!(a[..512].iter().all(|&x| x == s0) && (s0 == 1 || s0 == 2));
            let s1 = a[512];
            assert!(a[512..1024].iter().all(|&x| x == s1) && (s1 == 1 || s1 == 2));
            if a.len() > 1024 {
                assert!(a[1024..].iter().all(|&x| x == 3));
            }
            outcomes.insert((s0, s1, a.len()));
        }
        // Kept, lost and torn (sectors differ) all happen.
        assert!(outcomes.contains(&(1, 1, 1024)));
        assert!(outcomes.contains(&(2, 2, 1536)));
        assert!(outcomes.iter().any(|&(a, b, _)| a != b));
    }

    #[test]
    fn reordering_crashes_may_undo_directory_changes() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let st = FaultStorage::with_model(CrashModel::Reorder { seed });
            let old = st.open_file("old", true).unwrap();
            old.write_all_at(0, b"durable").unwrap();
            old.sync().unwrap();
            st.open_file("gone", true).unwrap();
            st.sync_dir().unwrap();
            let new = st.open_file("new", true).unwrap();
            new.write_all_at(0, b"fresh").unwrap();
            new.sync().unwrap();
            st.rename("new", "old").unwrap();
            st.remove_file("gone").unwrap();
            st.plan(0, Fault::Crash { tear: false });
            assert!(st.sync_dir().is_err());
            let img = st.crash_image();
            let names = img.list_files().unwrap();
            let old = img.file_bytes("old").unwrap();
            // The rename is atomic: "old" is the old or the new file.
            assert!(old == b"durable" || old == b"fresh", "seed {seed}");
            if old == b"fresh" {
                assert!(!names.contains(&"new".to_string()));
            }
            seen.insert((old, names));
        }
        assert!(seen.len() >= 4, "{seen:?}");
    }

    /// A full device refuses exactly the writes that need new blocks, from
    /// the operation planned until it is freed, and changes nothing when
    /// it refuses.
    #[test]
    fn a_full_device_refuses_only_writes_that_allocate() {
        let st = FaultStorage::new();
        let f = st.open_file("a", true).unwrap();
        f.write_all_at(0, &[1u8; 2 * BLOCK]).unwrap();
        f.punch_hole(BLOCK as u64, BLOCK as u64).unwrap();
        st.fill_device(1);
        // Operation 0 from now: still room.
        f.write_all_at(2 * BLOCK as u64, &[2u8; 10]).unwrap();
        assert!(st.device_full());
        let full = |r: io::Result<()>| r.unwrap_err().raw_os_error() == Some(libc::ENOSPC);
        let len = 2 * BLOCK as u64 + 10;
        assert!(full(f.write_all_at(len, b"x")), "past the end");
        assert!(full(f.write_all_at(BLOCK as u64 + 5, b"x")), "into a hole");
        assert_eq!(st.refused_writes(), 2);
        assert_eq!(
            st.file_bytes("a").unwrap()[BLOCK + 5],
            0,
            "a refused write changes nothing"
        );
        assert_eq!(f.len().unwrap(), len);
        // Overwrites, syncs, length changes and directory changes succeed.
        f.write_all_at(3, b"over").unwrap();
        f.sync().unwrap();
        f.set_len(4 * BLOCK as u64).unwrap();
        assert!(
            full(f.write_all_at(3 * BLOCK as u64, b"sparse")),
            "into a sparse tail"
        );
        st.open_file("b", true).unwrap();
        st.rename("b", "c").unwrap();
        st.sync_dir().unwrap();
        st.free_device();
        assert!(!st.device_full());
        f.write_all_at(BLOCK as u64 + 5, b"x").unwrap();
        f.write_all_at(4 * BLOCK as u64, b"x").unwrap();
    }
}
