//! Creating a space and recovering one: the newest checkpoint, then the
//! committed log batches of its version, then segment utilization from the
//! extents.
//!
//! Invariants:
//! - Creation makes the three files' names durable (`sync_dir`), then the
//!   log header, and writes the tree's first checkpoint last: a space
//!   exists once its tree file holds a checkpoint, and everything that
//!   checkpoint needs is durable before it.
//! - Recovery never changes what a later recovery would find, except to
//!   cut an invalid log tail or restart a log whose version is stale; both
//!   are synced before the space is used.
//! - A read-only recovery (`Options::read_only`) changes nothing at all:
//!   what a writable one would cut or restart it leaves, and what a
//!   writable one salvages or refuses it reports as `Corrupt` (the caller,
//!   `read_only.rs`, retries: a live writer may be mid-write).

use std::sync::Arc;

use flextree::FlexTree;

use crate::error::{io, Error, Result};
use crate::log::{self, LogOp};
use crate::options::{Options, MAX_EXTENT, SEGMENT_SIZE};
use crate::segments::for_each_part;
use crate::state::apply;
use crate::storage::counting_file::CountingFile;
use crate::storage::{Storage, StorageFile};

pub const DATA: &str = "data";
pub const TREE: &str = "tree";
pub const LOG: &str = "log";
/// Checkpoint metadata: format magic, segment size, user metadata words.
const META_MAGIC: &[u8; 8] = b"FLEXSPC2";

/// The space's files, counting the bytes written to each.
pub struct SpaceFiles {
    pub data: Arc<CountingFile>,
    pub tree: Arc<CountingFile>,
    pub log: Arc<CountingFile>,
}

/// A space as found on storage.
pub struct Opened {
    pub tree: FlexTree,
    pub files: SpaceFiles,
    pub valid: Vec<u64>,
    pub user_meta: [u64; 3],
    /// Checkpoint version, last commit sequence number, end of the log.
    pub version: u64,
    pub seq: u64,
    pub log_end: u64,
    /// What a salvaging open gave up (`Options::salvage`), one sentence each.
    pub salvaged: Vec<String>,
}

/// The checkpoint metadata blob (docs/FORMAT.md).
pub fn meta(user: &[u64; 3]) -> Vec<u8> {
    let mut m = META_MAGIC.to_vec();
    m.extend_from_slice(&SEGMENT_SIZE.to_le_bytes());
    for w in user {
        m.extend_from_slice(&w.to_le_bytes());
    }
    m
}

/// The user metadata words of a checkpoint's metadata, `None` when the
/// metadata is not a flexspace's.
pub(crate) fn parse_meta(m: &[u8]) -> Option<[u64; 3]> {
    if m.len() != 40 || &m[..8] != META_MAGIC || m[8..16] != SEGMENT_SIZE.to_le_bytes() {
        return None;
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&m[16 + 8 * i..24 + 8 * i]);
        u64::from_le_bytes(b)
    };
    Some([word(0), word(1), word(2)])
}

pub fn corrupt(file: &str, detail: impl Into<String>) -> Error {
    Error::Corrupt {
        file: file.to_string(),
        detail: detail.into(),
    }
}

fn open_counted(storage: &dyn Storage, name: &str, create: bool) -> Result<Arc<CountingFile>> {
    let f = storage.open_file(name, create).map_err(io(name))?;
    Ok(Arc::new(CountingFile::new(f)))
}

pub(crate) fn new_tree() -> FlexTree {
    let mut tree = FlexTree::new();
    tree.set_merge_limit(MAX_EXTENT);
    tree.set_merge_boundary(SEGMENT_SIZE);
    tree
}

/// The last steps of creating a space whose data file is written and
/// synced: empties the tree and log files, makes the names durable, writes
/// the log's header and then `tree`'s first checkpoint with `user_meta`
/// (the step that makes the directory a space). Returns the checkpoint's
/// version.
pub(crate) fn commit_new(
    storage: &dyn Storage,
    tree_file: &dyn StorageFile,
    log_file: &dyn StorageFile,
    tree: &FlexTree,
    user_meta: &[u64; 3],
) -> Result<u64> {
    tree_file.set_len(0).map_err(io(TREE))?;
    log_file.set_len(0).map_err(io(LOG))?;
    storage.sync_dir().map_err(io("directory"))?;
    log_file.write_all_at(0, &log::header(1)).map_err(io(LOG))?;
    log_file.sync().map_err(io(LOG))?;
    let version = tree
        .checkpoint(tree_file, &meta(user_meta))
        .map_err(crate::error::tree)?;
    debug_assert_eq!(version, 1, "a new tree file's first checkpoint");
    Ok(version)
}

/// Whether `storage` holds a complete space (its tree file has a
/// checkpoint); errors only on I/O.
pub fn exists(storage: &dyn Storage) -> Result<bool> {
    let exists = |n| storage.exists(n).map_err(io(n));
    if !exists(TREE)? {
        return Ok(false);
    }
    // The tree's first checkpoint is the last step of creation: an empty
    // tree file means creation never completed. A crash during that
    // checkpoint leaves no valid header while the data file is still
    // empty: nothing was ever stored.
    let tree = storage.open_file(TREE, false).map_err(io(TREE))?;
    if tree.len().map_err(io(TREE))? == 0 {
        return Ok(false);
    }
    let data_len = match exists(DATA)? {
        true => storage
            .open_file(DATA, false)
            .and_then(|d| d.len())
            .map_err(io(DATA))?,
        false => 0,
    };
    Ok(data_len > 0 || FlexTree::load(tree.as_ref()).is_ok())
}

/// Creates an empty space.
pub fn create(storage: &dyn Storage, opts: &Options) -> Result<Opened> {
    let files = SpaceFiles {
        data: open_counted(storage, DATA, true)?,
        tree: open_counted(storage, TREE, true)?,
        log: open_counted(storage, LOG, true)?,
    };
    let tree = new_tree();
    let version = commit_new(storage, &files.tree, &files.log, &tree, &[0; 3])?;
    Ok(Opened {
        tree,
        files,
        valid: vec![0; opts.segment_count()],
        user_meta: [0; 3],
        version,
        seq: 0,
        log_end: log::HEADER as u64,
        salvaged: Vec::new(),
    })
}

/// Recovers an existing space.
pub fn recover(storage: &dyn Storage, opts: &Options) -> Result<Opened> {
    let files = SpaceFiles {
        data: open_counted(storage, DATA, false)?,
        tree: open_counted(storage, TREE, false)?,
        log: open_counted(storage, LOG, false)?,
    };
    let (loaded, cp) = FlexTree::load(files.tree.as_ref()).map_err(|e| match e {
        flextree::Error::Io(e) => Error::Io {
            file: TREE.into(),
            source: e,
        },
        e => corrupt(TREE, e.to_string()),
    })?;
    let Some(mut user_meta) = parse_meta(&cp.meta) else {
        return Err(Error::NotAFlexSpace(Default::default()));
    };
    let mut tree = loaded;
    tree.set_merge_limit(MAX_EXTENT);
    tree.set_merge_boundary(SEGMENT_SIZE);
    let log_len = files.log.len().map_err(io(LOG))?;
    let log_len = usize::try_from(log_len).map_err(|_| corrupt(LOG, "log too large"))?;
    let mut bytes = vec![0u8; log_len];
    files.log.read_exact_at(0, &mut bytes).map_err(io(LOG))?;
    let mut log_end = log::HEADER as u64;
    let mut seq = 0;
    let mut salvaged = Vec::new();
    match log::parse_header(&bytes) {
        Some(v) if v == cp.version => {
            let r = log::replay(&bytes[log::HEADER..]);
            if let Some(d) = &r.damage {
                let why = format!(
                    "entry at byte {}: {}; the commits after it are lost",
                    log::HEADER + d.at,
                    d.why
                );
                // Rolling back to the commit before it would drop commits
                // whose writes the caller no longer holds anywhere else.
                if !opts.salvage || opts.read_only {
                    return Err(corrupt(
                        LOG,
                        format!("{why} (repair salvages the ones before)"),
                    ));
                }
                salvaged.push(format!("log: {why}"));
            }
            // The byte offset of each entry, for the error naming it.
            let mut at = log::HEADER;
            for batch in &r.batches {
                for op in batch {
                    if let LogOp::Meta { words } = op {
                        user_meta = *words;
                    } else {
                        apply(&mut tree, op).map_err(|e| {
                            corrupt(LOG, format!("entry at byte {at}: replaying {op:?}: {e}"))
                        })?;
                    }
                    at += log::ENTRY;
                }
                at += log::ENTRY;
            }
            log_end += r.valid_len as u64;
            seq = r.last_seq;
        }
        // A checkpoint finished but the log restart did not: the tree
        // holds everything the log did.
        Some(v) if v < cp.version => {}
        Some(v) => {
            // The log header verified, so the checkpoint it follows (the
            // tree's newest) is the one that is damaged or missing.
            let why = format!(
                "the newest checkpoint is damaged or missing: the log follows tree version {v}, the tree's last intact checkpoint is version {}",
                cp.version
            );
            if !opts.salvage || opts.read_only {
                return Err(corrupt(TREE, why));
            }
            salvaged.push(format!("tree: {why}; the log's commits are lost"));
        }
        // A torn header of an emptied log (crash while restarting it).
        None if log_len <= log::HEADER => {}
        None if !opts.salvage || opts.read_only => return Err(corrupt(LOG, "invalid log header")),
        None => salvaged.push("log: invalid log header; the log's commits are lost".into()),
    }
    if opts.read_only {
        // Nothing is changed: a stale log is ignored, a tail left as it is.
    } else if log::parse_header(&bytes).is_none_or(|v| v != cp.version) {
        files.log.set_len(0).map_err(io(LOG))?;
        files.log.sync().map_err(io(LOG))?;
        files
            .log
            .write_all_at(0, &log::header(cp.version))
            .map_err(io(LOG))?;
        files.log.sync().map_err(io(LOG))?;
    } else if log_end < log_len as u64 {
        files.log.set_len(log_end).map_err(io(LOG))?;
        files.log.sync().map_err(io(LOG))?;
    }
    let mut valid = vec![0u64; opts.segment_count()];
    // Committed extents lie in the data file (synced before the commit
    // that maps them): one past it is damage, and counting it would size
    // the segment table from a corrupt address.
    let data_len = files.data.len().map_err(io(DATA))?;
    let segments = (valid.len() as u64).max(data_len.div_ceil(SEGMENT_SIZE));
    for e in tree.extents_from(0)? {
        if let Some(a) = e.addr {
            if (a + e.len).div_ceil(SEGMENT_SIZE) > segments {
                return Err(corrupt(
                    TREE,
                    format!(
                        "after the log replay, the extent at logical {} maps {} bytes at {a}, past the data file ({data_len} bytes)",
                        e.offset, e.len
                    ),
                ));
            }
            for_each_part(a, e.len, |s, n| {
                if valid.len() <= s as usize {
                    valid.resize(s as usize + 1, 0);
                }
                valid[s as usize] += n;
            });
        }
    }
    for (s, &v) in valid.iter().enumerate() {
        if v > SEGMENT_SIZE {
            return Err(corrupt(TREE, format!("segment {s} holds {v} valid bytes")));
        }
    }
    Ok(Opened {
        tree,
        files,
        valid,
        user_meta,
        version: cp.version,
        seq,
        log_end,
        salvaged,
    })
}
