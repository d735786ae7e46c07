//! `scan`: pairs of a key range in order, one line each.
//!
//! Invariants: `--from` is inclusive, `--to` exclusive, `--prefix` keeps
//! keys that start with it; all three combine as an intersection, so an
//! empty intersection (e.g. `--from b --to a`) prints nothing without
//! asking the store. A line is `KEY<TAB>VALUE<LF>` (or `KEY<LF>` with
//! `--keys-only`) with each field encoded by [`Encoding::field`], so it
//! never contains a raw tab or newline.

use std::io::Write;
use std::ops::Bound;
use std::path::Path;

use flexdb::Db;

use super::{decode_arg, stdout_err};
use crate::cli::ScanArgs;
use crate::encoding::Encoding;
use crate::exit::CliError;

/// A key range: lower and upper bound.
pub type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The smallest key greater than every key starting with `prefix`, or
/// `None` when there is none (an empty prefix, or only 0xff bytes).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=keep].to_vec();
    end[keep] += 1;
    Some(end)
}

/// The range of keys `>= from`, `< to` and starting with `prefix`, or
/// `None` when it is empty.
pub fn bounds(
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
) -> Option<Range> {
    let end = prefix.as_deref().and_then(prefix_end);
    let lower = match (from, prefix) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let upper = match (to, end) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if let (Some(l), Some(u)) = (&lower, &upper) {
        if l >= u {
            return None;
        }
    }
    Some((
        lower.map_or(Bound::Unbounded, Bound::Included),
        upper.map_or(Bound::Unbounded, Bound::Excluded),
    ))
}

/// Decodes the bounds given on the command line.
pub fn range_of(args: &ScanArgs, enc: Encoding) -> Result<Option<Range>, CliError> {
    let arg =
        |what: &str, v: &Option<String>| v.as_deref().map(|s| decode_arg(enc, what, s)).transpose();
    Ok(bounds(
        arg("--from", &args.from)?,
        arg("--to", &args.to)?,
        arg("--prefix", &args.prefix)?,
    ))
}

/// Prints the pairs of `range`; returns how many.
pub fn scan(
    db: &Db,
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
    let iter = db.range::<Vec<u8>, _>(range);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }
    fn inc(s: &str) -> Bound<Vec<u8>> {
        Bound::Included(s.as_bytes().to_vec())
    }
    fn exc(s: &str) -> Bound<Vec<u8>> {
        Bound::Excluded(s.as_bytes().to_vec())
    }

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn bounds_intersect() {
        use Bound::Unbounded as U;
        assert_eq!(bounds(None, None, None), Some((U, U)));
        assert_eq!(bounds(v("a"), v("c"), None), Some((inc("a"), exc("c"))));
        assert_eq!(bounds(None, None, v("ab")), Some((inc("ab"), exc("ac"))));
        assert_eq!(
            bounds(v("abc"), None, v("ab")),
            Some((inc("abc"), exc("ac")))
        );
        assert_eq!(
            bounds(v("a"), v("abz"), v("ab")),
            Some((inc("ab"), exc("abz")))
        );
        assert_eq!(bounds(None, None, v("")), Some((inc(""), U)));
        assert_eq!(bounds(v("b"), v("a"), None), None);
        assert_eq!(bounds(v("a"), v("a"), None), None);
        assert_eq!(bounds(v("b"), None, v("a")), None);
        assert_eq!(bounds(None, v("a"), v("b")), None);
    }
}
