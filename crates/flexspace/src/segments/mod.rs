//! The data file's segments: their accounting, their in-memory buffers and
//! the background threads that write sealed ones.
//!
//! - [`table`]: valid bytes per segment, the free set and the waits an
//!   emptied segment goes through before reuse ([`SegmentTable`]).
//! - [`segbuf`]: one segment's bytes in memory, appended by a single
//!   filler while readers copy the appended part.
//! - [`writers`]: the background writers of sealed segment buffers.
//!
//! Invariant (shared by the three): a segment is either free, or open (its
//! buffer being filled and serving reads), or sealed and in flight (its
//! buffer still serving reads until its write finished), or on file; only a
//! free segment is ever allocated, and the table alone decides which
//! segments are free.

pub mod segbuf;
mod table;
pub mod writers;

pub use table::{for_each_part, ReaderPin, SegmentTable};
