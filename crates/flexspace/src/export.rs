//! Writing a snapshot out as a new space in other storage
//! ([`Snapshot::export`]): the physical half of an online backup.
//!
//! The new space maps the same logical bytes to the same physical
//! addresses as the snapshot, so its extent index is the snapshot's (built
//! afresh, so it is compact) and its data file holds, at the same offsets,
//! every segment the snapshot maps into, up to the end of what it maps
//! there (in whole 4 KiB blocks): copied from the source's data file with
//! [`StorageFile::copy_from`], which shares the file system's
//! blocks instead (a reflink) where it can, or written from the segment
//! buffers the snapshot holds for segments not yet in the data file.
//! Segments the snapshot does not map are holes. Nothing else of the
//! source is copied: no log, no garbage segment.
//!
//! Invariants:
//! - The source is only read, and the snapshot keeps every segment it
//!   maps from reuse for its whole life (`snapshot.rs`), so the bytes
//!   copied are those it read: blocks of a segment that the source's
//!   writer appends to meanwhile lie past everything the snapshot maps
//!   there, and the new index never points at them.
//! - The destination becomes a space only at the last step: the data file
//!   is written and synced, then the tree and log files are created and
//!   the tree's first checkpoint written (`open::commit_new`). An export
//!   that fails or crashes before that leaves a directory that is not a
//!   space (`FlexSpace::open` without `create` refuses it), never a space
//!   holding part of the snapshot.
//! - The new space's user metadata words are the snapshot's.

use std::collections::BTreeMap;

use crate::error::{io, Error, Result};
use crate::open::{commit_new, new_tree, DATA, LOG, TREE};
use crate::options::SEGMENT_SIZE;
use crate::segments::for_each_part;
use crate::snapshot::Snapshot;
use crate::storage::{Storage, StorageFile};

/// Copies from the data file end on a multiple of this (the block size
/// of the file systems that share blocks: a reflink takes whole blocks).
const COPY_ALIGN: u64 = 4096;

/// How far an export is: data segments written out of those to write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportProgress {
    /// Segments written so far.
    pub segments: u64,
    /// Segments to write in all.
    pub total_segments: u64,
    /// Bytes of the data file written so far (shared or copied).
    pub bytes: u64,
}

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// The space's length (the snapshot's).
    pub len: u64,
    /// Extents in the new space's index.
    pub extents: u64,
    /// Data segments written (those the snapshot maps into).
    pub segments: u64,
    /// Bytes of the data file that share blocks with the source's (a
    /// reflink).
    pub shared_bytes: u64,
    /// Bytes of the data file copied (from the source's data file or the
    /// snapshot's segment buffers).
    pub copied_bytes: u64,
}

impl Snapshot {
    /// Writes the space as of this snapshot into `dest`, which must hold
    /// no space files (`data`, `tree`, `log`), as a new space that opens as
    /// any other (see the module docs): the same bytes, tags and user
    /// metadata words. `progress` is called after each data segment.
    /// The source space goes on meanwhile; the snapshot keeps the segments
    /// it maps until it is dropped. On an error `dest` is not a space (its
    /// files are left for the caller to remove).
    pub fn export(
        &self,
        dest: &dyn Storage,
        progress: &mut dyn FnMut(ExportProgress),
    ) -> Result<ExportReport> {
        for name in [DATA, TREE, LOG] {
            if dest.exists(name).map_err(io(name))? {
                return Err(Error::Io {
                    file: name.into(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "the destination of an export already holds a space file",
                    ),
                });
            }
        }
        // The index, rebuilt extent by extent, and the segments it maps.
        let mut tree = new_tree();
        // The segments it maps, each with the end of what it maps there (a
        // check that the bytes copied cover it).
        let mut mapped_end = BTreeMap::new();
        for e in self.tree.extents_from(0)? {
            match e.addr {
                None => tree.insert_hole(tree.len(), e.len)?,
                Some(a) => {
                    tree.append(e.len, a)?;
                    let mut at = a;
                    for_each_part(a, e.len, |s, n| {
                        at += n;
                        let end = mapped_end.entry(u64::from(s)).or_insert(0u64);
                        *end = (*end).max(at);
                    });
                }
            }
            if e.tag != 0 {
                tree.set_tag(e.offset, e.tag)?;
            }
        }
        let data = dest.open_file(DATA, true).map_err(io(DATA))?;
        let source: &dyn StorageFile = self.space.files.data.as_ref();
        let source_len = source.len().map_err(io(DATA))?;
        let mut report = ExportReport {
            len: tree.len(),
            extents: tree.extent_count(),
            ..ExportReport::default()
        };
        let mut done = ExportProgress {
            total_segments: mapped_end.len() as u64,
            ..ExportProgress::default()
        };
        for (&s, &end) in &mapped_end {
            let start = s * SEGMENT_SIZE;
            let need = end - start;
            // A segment buffer whose bytes the data file already holds (up
            // to what the index maps) is copied from the file, which may
            // share its blocks.
            let resident = self
                .resident
                .get(s as usize)
                .and_then(Option::as_ref)
                .filter(|buf| (*buf.flushed() as u64) < need);
            let written = match resident {
                Some(buf) => {
                    let filled = buf.filled();
                    let bytes = buf.prefix(filled).filter(|_| filled as u64 >= need);
                    let Some(bytes) = bytes else {
                        return Err(corrupt(s, need, filled as u64));
                    };
                    data.write_all_at(start, bytes).map_err(io(DATA))?;
                    report.copied_bytes += filled as u64;
                    filled as u64
                }
                None => {
                    // Up to the end of what is mapped, in whole blocks (a
                    // reflink takes whole blocks only).
                    let len = need
                        .next_multiple_of(COPY_ALIGN)
                        .min(SEGMENT_SIZE)
                        .min(source_len.saturating_sub(start));
                    if len < need {
                        return Err(corrupt(s, need, len));
                    }
                    let shared = data
                        .copy_from(source, start, start, len)
                        .map_err(io(DATA))?;
                    report.shared_bytes += shared;
                    report.copied_bytes += len - shared;
                    len
                }
            };
            report.segments += 1;
            done.segments += 1;
            done.bytes += written;
            progress(done);
        }
        data.sync().map_err(io(DATA))?;
        let tree_file = dest.open_file(TREE, true).map_err(io(TREE))?;
        let log_file = dest.open_file(LOG, true).map_err(io(LOG))?;
        commit_new(
            dest,
            tree_file.as_ref(),
            log_file.as_ref(),
            &tree,
            &self.user_meta,
        )?;
        dest.sync_dir().map_err(io("directory"))?;
        Ok(report)
    }
}

/// The error of a segment whose bytes end before what the index maps in it.
fn corrupt(segment: u64, need: u64, have: u64) -> Error {
    Error::Corrupt {
        file: DATA.into(),
        detail: format!(
            "segment {segment}: the extent index maps {need} bytes of it, the data holds {have}"
        ),
    }
}
