//! `put`, `get` and `del` of one key, in one keyspace.
//!
//! Invariants: `get` prints the value followed by one newline (raw bytes in
//! text mode, else encoded) and returns [`Code::KeyNotFound`] with no
//! output when the key is absent; `put` and `del` print nothing. Each
//! reads or writes only the keyspace it is given.

use std::io::Write;
use std::path::Path;

use flexdb::Keyspace;

use super::stdout_err;
use crate::encoding::Encoding;
use crate::exit::{CliError, Code};

/// Sets `key` to `value`.
pub fn put(
    ks: &Keyspace,
    dir: &Path,
    key: &[u8],
    value: &[u8],
    ttl: Option<std::time::Duration>,
) -> Result<(), CliError> {
    match ttl {
        Some(ttl) => ks.put_with_ttl(key, value, ttl),
        None => ks.put(key, value),
    }
    .map_err(|e| CliError::db(dir, e))
}

/// Prints the value of `key`.
pub fn get(
    ks: &Keyspace,
    dir: &Path,
    key: &[u8],
    enc: Encoding,
    out: &mut dyn Write,
) -> Result<Code, CliError> {
    match ks.get(key).map_err(|e| CliError::db(dir, e))? {
        Some(value) => {
            out.write_all(&enc.value(&value)).map_err(stdout_err)?;
            out.write_all(b"\n").map_err(stdout_err)?;
            Ok(Code::Success)
        }
        None => Ok(Code::KeyNotFound),
    }
}

/// Removes `key`.
pub fn del(ks: &Keyspace, dir: &Path, key: &[u8]) -> Result<(), CliError> {
    ks.delete(key).map_err(|e| CliError::db(dir, e))
}
