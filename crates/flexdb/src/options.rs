//! Options of a store and of individual writes.
//!
//! Invariant: the defaults are the paper's parameters where it has them and
//! otherwise what a production embedded store would pick; every option is
//! validated by `Db::open`, which refuses nonsense with
//! `Error::InvalidArgument` instead of panicking later.

/// How to open a store. Build it with [`Options::new`] and the setters:
///
/// ```
/// use flexdb::Options;
/// let opts = Options::new()
///     .create_if_missing(true)
///     .cache_bytes(256 << 20)
///     .memtable_bytes(64 << 20);
/// assert!(opts.create_if_missing);
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the store when the directory holds none (default: false).
    pub create_if_missing: bool,
    /// Refuse to open a store that already exists (default: false).
    pub error_if_exists: bool,
    /// Bytes of memory for cached reads (default: 256 MiB): one sixteenth
    /// holds the rows of keys that gets read often (the row cache), the
    /// rest decoded intervals (the interval cache). At most the machine's
    /// physical memory (`Db::open` refuses more with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    pub cache_bytes: usize,
    /// Bytes of writes a MemTable takes before it is frozen and committed
    /// to the space (default: 512 MiB, measured: docs/DESIGN.md, "The
    /// MemTable's size"). Up to `1 + max_frozen_memtables` MemTables exist
    /// at once (the active one and the frozen ones waiting for the
    /// committer, which commits them as one), so the store's memory for
    /// writes is up to that many times this, and its write-ahead log holds
    /// about as many files of this size. The memory of committed MemTables
    /// is kept for the next ones (within that bound) until the store has
    /// been idle for a second.
    /// At least 1024, and at most 1 TiB and the machine's physical memory
    /// (`Db::open` refuses others with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    pub memtable_bytes: usize,
    /// Frozen MemTables that may wait for the committer before writers
    /// stall (default: 3). It bounds the memory of MemTables and the write-ahead
    /// log's files (`1 + max_frozen_memtables` of each), and writes are slowed
    /// once this many are frozen (smooth backpressure). Fewer saves memory
    /// and disk; more rides out longer commits without slowing writers.
    /// At least 1 (`Db::open` refuses 0 with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    pub max_frozen_memtables: usize,
    /// Whether `put`, `delete` and `write` sync the write-ahead log before
    /// returning (default: false; per write with [`WriteOptions`]).
    pub sync_writes: bool,
    /// Whether each sync of the write-ahead log also makes its own length
    /// durable, with a second fsync (default: true). With it, damage to
    /// any synced record fails the open with `Error::Corrupt`. Without it
    /// a sync costs one fsync, but damage to the records of the last sync
    /// before a crash cannot be told from a write the crash tore, and
    /// replay drops them as a torn tail (every other record is vouched for
    /// by a later sync). Writes that are not synced do not pay for it.
    pub strict_wal_sync: bool,
    /// Capacity of the space's data file in bytes; live data may use 30/32
    /// of it (default: 1 TiB, at most 64 TiB; the file is sparse and grows
    /// as needed).
    pub max_space_bytes: u64,
    /// Whether intervals missing from the cache are copied out of a
    /// read-only memory mapping of the space's data file instead of read
    /// with `pread` (default: true on 64-bit targets, where the mapping's
    /// address space is free). It skips a system call per extent: at 10 M
    /// pairs with a 1 GiB cache, YCSB C (gets) ran 1.5 times as fast and E
    /// (scans) 1.4 times (docs/DESIGN.md, "Reading the data file through a
    /// mapping"). An I/O error while the kernel reads a mapped page in,
    /// or another process truncating the data file under the store,
    /// raises SIGBUS: flexspace's handler fails that copy and the read
    /// falls back to `pread`, whose error the reader gets (a reader
    /// copying the same page at that instant may get `Corrupt`). Set it
    /// to false to read with `pread` only.
    pub mmap_reads: bool,
    /// Whether gets keep the rows of keys they read often (the row cache,
    /// one sixteenth of `cache_bytes`; default: true). A get of such a key
    /// that no MemTable holds costs one hash probe instead of a search of
    /// the sparse index and the key's interval: at 3 M pairs, Zipfian gets
    /// took 1.28 µs of CPU each against 2.18 without
    /// (docs/experiments/2026-11-28-row-cache.md). Off, the interval cache
    /// takes all of `cache_bytes`.
    pub row_cache: bool,
    /// The space collects garbage when the garbage in its segments that
    /// still hold live data passes this fraction of them (default: 0.25),
    /// relocating the live bytes of the emptiest segments...
    /// Lower keeps the data file closer to the live data's size and costs
    /// more relocation writes: at 10 M pairs, 0.25 / 0.2 against 0.4 / 0.33
    /// left the store 1.43 / 1.42 / 1.46 times its logical bytes after
    /// load / A / put instead of 1.66 / 1.72 / 1.81, for write
    /// amplification (bytes written by the store's parts) 2.91 / 2.13 /
    /// 2.10 instead of 2.86 / 2.09 / 1.97 (one run each;
    /// docs/experiments/2026-11-27-grace-epochs-and-gc-thresholds.md).
    pub gc_garbage_high: f64,
    /// ...until the garbage is below this fraction (default: 0.2). Both in
    /// (0, 1] with `low <= high`; 1 stops garbage-driven collection
    /// (collection to make room for writes still runs).
    pub gc_garbage_low: f64,
    /// How often the store's expiry thread removes the pairs whose
    /// deadline passed (`Db::put_with_ttl`; default: 1 s). Expired pairs
    /// are invisible to reads from their deadline on whatever this is: it
    /// only sets how long their space waits to be reclaimed. At least
    /// 1 ms.
    pub expiry_interval: std::time::Duration,
    /// The clock deadlines are judged by (default: `None`, the system
    /// clock): a [`crate::ManualClock`] lets tests and simulations move
    /// time by hand.
    pub clock: Option<crate::ManualClock>,
    /// Open read-only (default: false): many processes may open the same
    /// store so at once, beside a writer process or not. Nothing on disk
    /// changes (no lock, no checkpoint, no saved index, no log replayed
    /// into the space; the one file made is the handle's own entry in the
    /// reader registry, `readers/`). The state is the store's as of the
    /// open, the writer's logs included; [`crate::Db::catch_up`] moves it
    /// forward. Every write method fails with [`crate::Error::ReadOnly`].
    /// A store that does not exist is `NotFound` (never created); a
    /// format-1 store is refused (`NeedsUpgrade`: a writable open
    /// upgrades it). See `docs/DESIGN.md`, "Read-only opens".
    pub read_only: bool,
    /// Open what the files allow instead of refusing damage (`Db::repair`
    /// only): see `recovery::repair`.
    pub(crate) salvage: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: false,
            error_if_exists: false,
            cache_bytes: 256 << 20,
            memtable_bytes: 512 << 20,
            max_frozen_memtables: 3,
            sync_writes: false,
            strict_wal_sync: true,
            max_space_bytes: 1 << 40,
            mmap_reads: cfg!(target_pointer_width = "64"),
            row_cache: true,
            gc_garbage_high: 0.25,
            gc_garbage_low: 0.2,
            expiry_interval: std::time::Duration::from_secs(1),
            clock: None,
            read_only: false,
            salvage: false,
        }
    }
}

impl Options {
    /// The default options.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets [`Options::read_only`].
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }
    /// Sets [`Options::create_if_missing`].
    pub fn create_if_missing(mut self, yes: bool) -> Self {
        self.create_if_missing = yes;
        self
    }
    /// Sets [`Options::error_if_exists`].
    pub fn error_if_exists(mut self, yes: bool) -> Self {
        self.error_if_exists = yes;
        self
    }
    /// Sets [`Options::cache_bytes`].
    pub fn cache_bytes(mut self, bytes: usize) -> Self {
        self.cache_bytes = bytes;
        self
    }
    /// Sets [`Options::memtable_bytes`].
    pub fn memtable_bytes(mut self, bytes: usize) -> Self {
        self.memtable_bytes = bytes;
        self
    }
    /// Sets [`Options::max_frozen_memtables`].
    pub fn max_frozen_memtables(mut self, n: usize) -> Self {
        self.max_frozen_memtables = n;
        self
    }
    /// Sets [`Options::sync_writes`].
    pub fn sync_writes(mut self, yes: bool) -> Self {
        self.sync_writes = yes;
        self
    }
    /// Sets [`Options::max_space_bytes`].
    pub fn max_space_bytes(mut self, bytes: u64) -> Self {
        self.max_space_bytes = bytes;
        self
    }
    /// Sets [`Options::row_cache`].
    pub fn row_cache(mut self, yes: bool) -> Self {
        self.row_cache = yes;
        self
    }

    /// Sets [`Options::strict_wal_sync`].
    pub fn strict_wal_sync(mut self, yes: bool) -> Self {
        self.strict_wal_sync = yes;
        self
    }

    /// Sets [`Options::mmap_reads`].
    pub fn mmap_reads(mut self, yes: bool) -> Self {
        self.mmap_reads = yes;
        self
    }
    /// Sets [`Options::gc_garbage_high`] and [`Options::gc_garbage_low`].
    pub fn gc_garbage(mut self, high: f64, low: f64) -> Self {
        self.gc_garbage_high = high;
        self.gc_garbage_low = low;
        self
    }
    /// Sets [`Options::expiry_interval`].
    pub fn expiry_interval(mut self, every: std::time::Duration) -> Self {
        self.expiry_interval = every;
        self
    }
    /// Sets [`Options::clock`].
    pub fn clock(mut self, clock: crate::ManualClock) -> Self {
        self.clock = Some(clock);
        self
    }
}

/// Options of one write.
///
/// ```
/// use flexdb::WriteOptions;
/// let durable = WriteOptions { sync: true };
/// assert!(durable.sync && !WriteOptions::default().sync);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Return only once the write is durable (the write-ahead log is
    /// synced; concurrent synced writes share one fsync).
    pub sync: bool,
}
