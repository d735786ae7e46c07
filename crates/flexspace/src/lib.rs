//! FlexSpace: a persistent, crash-safe flexible address space (§4 of the
//! FlexSpace paper, called FlexFile in its arXiv version).
//!
//! A space is a byte array in which ranges can be inserted and removed in
//! the middle in O(log N) as well as read and overwritten. It lives in three
//! files in one directory: `data` (4 MiB segments, log-structured), `tree`
//! (copy-on-write FlexTree checkpoints) and `log` (the logical log of index
//! operations since the last checkpoint). All I/O goes through the
//! [`Storage`] trait: real files ([`FileStorage`]) or the fault-injecting
//! [`FaultStorage`] used by the crash tests.
//!
//! Durability contract: after [`FlexSpace::sync`] returns, the content
//! survives a crash; a crash at any moment recovers exactly the content of
//! one commit point no older than the last completed `sync` (commits also
//! happen on their own between operations), never a mixture.
//!
//! Concurrency: every method takes `&self`. Reads translate offsets under
//! a short read lock and copy without it ([`FlexSpace::plan_read`]);
//! commits, checkpoints and garbage collection do their I/O without the
//! exclusive lock (docs/DESIGN.md, "Concurrency and lock order").

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod error;
mod export;
mod grace;
mod log;
mod maintenance;
mod open;
mod options;
mod read;
mod read_only;
mod registry;
mod segments;
mod snapshot;
mod space;
mod state;
mod storage;
mod sync;
mod timed_rwlock;

pub use error::{Error, Result};
pub use export::{ExportProgress, ExportReport};
pub use options::{Options, MAX_DATA_SIZE, MAX_EXTENT, SEGMENT_SIZE};
pub use read::ReadPlan;
pub use read_only::TRIES as READ_ONLY_TRIES;
pub use registry::{scan as scan_reader_registry, Scan as ReaderScan, DIR as READER_REGISTRY_DIR};
pub use snapshot::{IndexMemory, Snapshot};
pub use space::{CompactReport, FlexSpace, Stats};
pub use storage::fault::{CrashModel, Fault, FaultStorage, ReadFaults};
pub use storage::{FileStorage, MappableFile, Mapping, MemFile, Storage, StorageFile, WritableMap};
