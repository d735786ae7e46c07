//! `load`: pairs from a file into one keyspace of the store, in write
//! batches.
//!
//! Invariants: every pair goes into the keyspace given (the default one
//! unless told; `--keyspace` creates it if missing); pairs are applied in input order (a later duplicate wins)
//! in batches of at most `batch_size` pairs and about 16 MiB; the store is
//! flushed at the end, also when the input turns out malformed, in which
//! case every pair before the bad record is loaded and the error names its
//! line and how many pairs were loaded.

use std::path::Path;

use flexdb::{Db, Keyspace, WriteBatch};

use crate::exit::CliError;
use crate::formats::{PairReader, ReadError};
use crate::progress::Progress;

/// Bytes of keys and values above which a batch is written early.
pub const BATCH_BYTES: usize = 16 << 20;

/// How `load` writes: pairs per batch, and every pair's time to live.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    pub batch_size: u64,
    pub ttl: Option<std::time::Duration>,
}

/// Loads every pair of `reader` (named `source` in messages) into
/// keyspace `ks` of `db`; returns how many. Counts them in `progress`.
pub fn load(
    db: &Db,
    ks: &Keyspace,
    dir: &Path,
    reader: &mut dyn PairReader,
    source: &str,
    opts: LoadOptions,
    progress: &mut Progress,
) -> Result<u64, CliError> {
    let LoadOptions { batch_size, ttl } = opts;
    let write = |batch: WriteBatch| db.write(batch).map_err(|e| CliError::db(dir, e));
    let mut batch = WriteBatch::new();
    let mut batch_bytes = 0usize;
    let failure = loop {
        let (key, value) = match reader.next_pair() {
            Ok(Some(pair)) => pair,
            Ok(None) => break None,
            Err(ReadError::Io(e)) => break Some(CliError::io(source, e)),
            Err(e @ ReadError::Malformed { .. }) => {
                break Some(CliError::bad_input(format!("{source}: {e}")))
            }
        };
        let size = key.len() + value.len();
        let full = batch.len() as u64 >= batch_size || batch_bytes + size > BATCH_BYTES;
        if full && !batch.is_empty() {
            write(std::mem::take(&mut batch))?;
            batch_bytes = 0;
        }
        let added = match ttl {
            Some(ttl) => batch.put_with_ttl_in(ks, &key, &value, ttl),
            None => batch.put_in(ks, &key, &value),
        };
        if let Err(e) = added {
            let line = reader.line();
            break Some(CliError::bad_input(format!("{source}: line {line}: {e}")));
        }
        batch_bytes += size;
        progress.pair(size as u64, Some(reader.bytes_read()));
    };
    if !batch.is_empty() {
        write(batch)?;
    }
    progress.stage("flushing");
    db.flush().map_err(|e| CliError::db(dir, e))?;
    match failure {
        None => Ok(progress.pairs()),
        Some(mut e) => {
            if let Some(msg) = &mut e.message {
                let n = progress.pairs();
                msg.push_str(&format!("; the {n} pairs before it were loaded"));
            }
            Err(e)
        }
    }
}
