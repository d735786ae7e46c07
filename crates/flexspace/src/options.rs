//! Options of a FlexSpace.
//!
//! Invariant: the defaults are the paper's parameters where it has them
//! (4 MiB segments and 128 KiB extents are fixed by the format); every
//! other default is explained in docs/DESIGN.md, which says which of them
//! rest on a measurement and which on reasoning alone.

/// Size of one data-file segment.
pub const SEGMENT_SIZE: u64 = 4 << 20;
/// The largest extent (1/32 of a segment, §4.1).
pub const MAX_EXTENT: u64 = SEGMENT_SIZE / 32;
/// The largest `max_data_size` a space accepts: 64 TiB, that is 16 Mi
/// segments (an open makes a table of 8 bytes a segment) and half of
/// x86-64's user address space (the data file may be mapped whole).
pub const MAX_DATA_SIZE: u64 = 1 << 46;

/// How to open a FlexSpace.
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the space if it does not exist.
    pub create: bool,
    /// Capacity of the data file in bytes (rounded down to segments, at
    /// least 8, at most [`MAX_DATA_SIZE`]: an open refuses more with
    /// [`crate::Error::InvalidOptions`]). Live data is capped at 30/32 of
    /// it.
    pub max_data_size: u64,
    /// Commit the logical log when this many bytes of entries are buffered.
    pub commit_log_bytes: usize,
    /// Checkpoint the tree when the log holds this many bytes.
    pub checkpoint_log_bytes: u64,
    /// Whether commits, checkpoints and garbage collection happen on their
    /// own, inside the mutating calls (true, the default). When false,
    /// mutations do none of them unless they must to make room, and the
    /// caller runs [`crate::FlexSpace::maintain`] (see
    /// [`crate::FlexSpace::maintenance_due`] and [`crate::FlexSpace::reserve`]).
    pub auto_maintenance: bool,
    /// Garbage collection starts when the garbage in segments that still
    /// hold live data exceeds this fraction of them (bounding space
    /// amplification)...
    pub gc_garbage_high: f64,
    /// ...and stops when it is below this fraction (hysteresis).
    pub gc_garbage_low: f64,
    /// Background threads writing sealed segments (at least 1).
    pub segment_writers: usize,
    /// Read the data file through a read-only memory mapping where the
    /// storage can map it ([`crate::FileStorage`] can): reads copy from the
    /// page cache without a system call per extent. An I/O error while a
    /// mapped page is read in (or another process truncating the data
    /// file) raises SIGBUS, which a handler turns into a failed copy: the
    /// read falls back to `pread`, which returns the error (see
    /// `storage/sigbus.rs` for the one race). Off by default.
    pub mmap_reads: bool,
    /// Open what the files allow instead of refusing damage (for repair
    /// tools): a log damaged inside its synced part is cut at the damage
    /// (the commits after it are lost), a log that follows a lost
    /// checkpoint is dropped. What was given up is in
    /// [`crate::FlexSpace::salvaged`]. Off by default.
    pub salvage: bool,
    /// Open an existing space for reading only, alongside a writer in
    /// another process or not: no lock taken, no file changed (but the
    /// reader's own file in the reader registry, `registry.rs`), every
    /// mutation refused with [`crate::Error::ReadOnly`]. The state is the
    /// last commit as of the open. Off by default.
    pub read_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create: false,
            max_data_size: 64 << 30,
            commit_log_bytes: 1 << 20,
            checkpoint_log_bytes: 64 << 20,
            auto_maintenance: true,
            gc_garbage_high: 0.6,
            gc_garbage_low: 0.5,
            segment_writers: 2,
            mmap_reads: false,
            salvage: false,
            read_only: false,
        }
    }
}

impl Options {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets `create`.
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }
    /// Sets `max_data_size`.
    pub fn max_data_size(mut self, bytes: u64) -> Self {
        self.max_data_size = bytes;
        self
    }
    /// Sets `commit_log_bytes`.
    pub fn commit_log_bytes(mut self, bytes: usize) -> Self {
        self.commit_log_bytes = bytes;
        self
    }
    /// Sets `checkpoint_log_bytes`.
    pub fn checkpoint_log_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint_log_bytes = bytes;
        self
    }
    /// Sets `auto_maintenance`.
    pub fn auto_maintenance(mut self, auto: bool) -> Self {
        self.auto_maintenance = auto;
        self
    }
    /// Sets `gc_garbage_high` and `gc_garbage_low` (fractions in 0..1;
    /// `high` >= 1 disables garbage-driven collection).
    pub fn gc_garbage(mut self, high: f64, low: f64) -> Self {
        self.gc_garbage_high = high;
        self.gc_garbage_low = low;
        self
    }
    /// Sets `segment_writers`.
    pub fn segment_writers(mut self, threads: usize) -> Self {
        self.segment_writers = threads;
        self
    }

    /// Sets `mmap_reads`.
    pub fn mmap_reads(mut self, on: bool) -> Self {
        self.mmap_reads = on;
        self
    }

    /// Sets `salvage`.
    pub fn salvage(mut self, on: bool) -> Self {
        self.salvage = on;
        self
    }

    /// Sets `read_only`.
    pub fn read_only(mut self, on: bool) -> Self {
        self.read_only = on;
        self
    }
    /// The options no space can work with, refused before any file is
    /// touched: a data file beyond [`MAX_DATA_SIZE`], garbage thresholds
    /// that are not numbers, negative, or out of order.
    pub(crate) fn validate(&self) -> Result<(), crate::Error> {
        if self.max_data_size > MAX_DATA_SIZE {
            return Err(crate::Error::InvalidOptions(format!(
                "max_data_size ({}) must be at most {MAX_DATA_SIZE}",
                self.max_data_size
            )));
        }
        let (high, low) = (self.gc_garbage_high, self.gc_garbage_low);
        // Written so that NaN fails it.
        if !(low >= 0.0 && low <= high) {
            return Err(crate::Error::InvalidOptions(format!(
                "gc_garbage needs 0 <= low <= high (got high {high}, low {low})"
            )));
        }
        Ok(())
    }

    /// Segments of the data file these options ask for.
    pub(crate) fn segment_count(&self) -> usize {
        (self.max_data_size / SEGMENT_SIZE).clamp(8, u64::from(u32::MAX / 2)) as usize
    }
}
