//! `dump`: every pair of the store, in key order, to a writer.
//!
//! Invariants: the output holds exactly the pairs an iterator over the
//! whole store yields, in its order, so loading it into an empty store
//! gives an identical store; on a write error nothing more is read.

use std::path::Path;

use flexdb::Db;

use crate::exit::CliError;
use crate::formats::PairWriter;
use crate::progress::Progress;

/// Writes every pair to `writer` (named `dest` in messages); returns how
/// many.
pub fn dump(
    db: &Db,
    dir: &Path,
    writer: &mut dyn PairWriter,
    dest: &str,
    progress: &mut Progress,
) -> Result<u64, CliError> {
    for item in db.iter() {
        let (key, value) = item.map_err(|e| CliError::db(dir, e))?;
        writer
            .write_pair(&key, &value)
            .map_err(|e| CliError::io(dest, e))?;
        progress.pair((key.len() + value.len()) as u64, None);
    }
    writer.finish().map_err(|e| CliError::io(dest, e))?;
    Ok(progress.pairs())
}
