//! Options of a FlexSpace.
//!
//! Invariant: the defaults are the paper's parameters where it has them
//! (4 MiB segments and 128 KiB extents are fixed by the format).

/// Size of one data-file segment.
pub const SEGMENT_SIZE: u64 = 4 << 20;
/// The largest extent (1/32 of a segment, §4.1).
pub const MAX_EXTENT: u64 = SEGMENT_SIZE / 32;

/// How to open a FlexSpace.
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the space if it does not exist.
    pub create: bool,
    /// Capacity of the data file in bytes (rounded down to segments, at
    /// least 8). Live data is capped at 30/32 of it.
    pub max_data_size: u64,
    /// Commit the logical log when this many bytes of entries are buffered.
    pub commit_log_bytes: usize,
    /// Checkpoint the tree when the log holds this many bytes.
    pub checkpoint_log_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create: false,
            max_data_size: 64 << 30,
            commit_log_bytes: 1 << 20,
            checkpoint_log_bytes: 64 << 20,
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
}
