//! `scan`: pairs of a key range of one keyspace in order, one line each.
//!
//! Invariants: the range is decoded by [`crate::range`] (shared with
//! `delete-range`): `--from` is inclusive, `--to` exclusive, `--prefix`
//! keeps keys that start with it; all three combine as an intersection,
//! so an empty intersection (e.g. `--from b --to a`) prints nothing
//! without asking the store. A line is `KEY<TAB>VALUE<LF>` (or `KEY<LF>` with
//! `--keys-only`) with each field encoded by [`Encoding::field`], so it
//! never contains a raw tab or newline.

use std::io::Write;
use std::path::Path;

use flexdb::Keyspace;

use super::stdout_err;
use crate::cli::ScanArgs;
use crate::encoding::Encoding;
use crate::exit::CliError;
use crate::range::Range;

/// Prints the pairs of `range`; returns how many.
pub fn scan(
    ks: &Keyspace,
    dir: &Path,
    range: Option<Range>,
    args: &ScanArgs,
    enc: Encoding,
    out: &mut dyn Write,
) -> Result<u64, CliError> {
    let Some(range) = range else {
        return Ok(0);
    };
    let limit = args.limit.unwrap_or(u64::MAX);
    if limit == 0 {
        return Ok(0);
    }
    let iter = ks.range::<Vec<u8>, _>(range);
    let iter: Box<dyn Iterator<Item = flexdb::Result<flexdb::KeyValue>>> = if args.reverse {
        Box::new(iter.rev())
    } else {
        Box::new(iter)
    };
    let mut count = 0;
    for item in iter {
        let (key, value) = item.map_err(|e| CliError::db(dir, e))?;
        let mut line = enc.field(&key);
        if !args.keys_only {
            line.push('\t');
            line.push_str(&enc.field(&value));
        }
        line.push('\n');
        out.write_all(line.as_bytes()).map_err(stdout_err)?;
        count += 1;
        if count >= limit {
            break;
        }
    }
    Ok(count)
}
