//! `dump`: every pair of one keyspace (the default one unless told), in
//! key order, to a writer.
//!
//! Invariants: the output holds exactly the pairs an iterator over the
//! whole keyspace yields, in its order, so loading it into an empty
//! keyspace gives an identical keyspace; no other keyspace's pair is
//! written; on a write error nothing more is read.

use std::path::Path;

use flexdb::Keyspace;

use crate::exit::CliError;
use crate::formats::PairWriter;
use crate::progress::Progress;

/// Writes every pair of `ks` to `writer` (named `dest` in messages); returns how
/// many.
pub fn dump(
    ks: &Keyspace,
    dir: &Path,
    writer: &mut dyn PairWriter,
    dest: &str,
    progress: &mut Progress,
) -> Result<u64, CliError> {
    for item in ks.iter() {
        let (key, value) = item.map_err(|e| CliError::db(dir, e))?;
        writer
            .write_pair(&key, &value)
            .map_err(|e| CliError::io(dest, e))?;
        progress.pair((key.len() + value.len()) as u64, None);
    }
    writer.finish().map_err(|e| CliError::io(dest, e))?;
    Ok(progress.pairs())
}
