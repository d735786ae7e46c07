//! Key ranges as the command line gives them (`--from`, `--to`,
//! `--prefix`), shared by `scan` (also in the shell) and `delete-range`,
//! so that both commands take the same flags to mean the same keys.
//!
//! Invariants: `--from` is inclusive, `--to` exclusive, `--prefix` keeps
//! keys that start with it; the three combine as an intersection, and an
//! empty intersection (e.g. `--from b --to a`) is `None` from
//! [`KeyBounds::range`], never a range whose start is past its end. A
//! bound is decoded with the command's encoding; nothing here touches the
//! store or panics.

use std::ops::Bound;

use crate::cli::RangeArgs;
use crate::commands::decode_arg;
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

/// The bounds given on the command line, decoded (`None`: not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyBounds {
    /// `--from`: the first key (inclusive).
    pub from: Option<Vec<u8>>,
    /// `--to`: the key bound (exclusive).
    pub to: Option<Vec<u8>>,
    /// `--prefix`: keys starting with it.
    pub prefix: Option<Vec<u8>>,
}

impl KeyBounds {
    /// Decodes the bounds of `args` in `enc`; the error names the flag.
    pub fn decode(args: &RangeArgs, enc: Encoding) -> Result<KeyBounds, CliError> {
        let arg = |what: &str, v: &Option<String>| {
            v.as_deref().map(|s| decode_arg(enc, what, s)).transpose()
        };
        Ok(KeyBounds {
            from: arg("--from", &args.from)?,
            to: arg("--to", &args.to)?,
            prefix: arg("--prefix", &args.prefix)?,
        })
    }

    /// Whether any bound was given.
    pub fn any(&self) -> bool {
        self.from.is_some() || self.to.is_some() || self.prefix.is_some()
    }

    /// The intersection as its lowest key (inclusive) and its end
    /// (exclusive); `None` for no limit on that side. The lower limit may
    /// be at or past the upper one (an empty intersection).
    pub fn limits(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let end = self.prefix.as_deref().and_then(prefix_end);
        let lower = match (&self.from, &self.prefix) {
            (Some(a), Some(b)) => Some(a.max(b).clone()),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        let upper = match (&self.to, end) {
            (Some(a), Some(b)) => Some(a.clone().min(b)),
            (a, b) => a.clone().or(b),
        };
        (lower, upper)
    }

    /// The range of keys `>= from`, `< to` and starting with `prefix`, or
    /// `None` when it holds no key.
    pub fn range(&self) -> Option<Range> {
        let (lower, upper) = self.limits();
        if let Some(u) = &upper {
            // No key is below the empty key.
            if lower.as_deref().unwrap_or_default() >= u.as_slice() {
                return None;
            }
        }
        Some((
            lower.map_or(Bound::Unbounded, Bound::Included),
            upper.map_or(Bound::Unbounded, Bound::Excluded),
        ))
    }
}

/// Decodes the bounds given on the command line into a range (`None`:
/// empty).
pub fn range_of(args: &RangeArgs, enc: Encoding) -> Result<Option<Range>, CliError> {
    Ok(KeyBounds::decode(args, enc)?.range())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Code;

    fn v(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }
    fn inc(s: &str) -> Bound<Vec<u8>> {
        Bound::Included(s.as_bytes().to_vec())
    }
    fn exc(s: &str) -> Bound<Vec<u8>> {
        Bound::Excluded(s.as_bytes().to_vec())
    }
    fn bounds(
        from: Option<Vec<u8>>,
        to: Option<Vec<u8>>,
        prefix: Option<Vec<u8>>,
    ) -> Option<Range> {
        KeyBounds { from, to, prefix }.range()
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
        assert_eq!(bounds(None, v("b"), None), Some((U, exc("b"))));
        assert_eq!(bounds(v("b"), v("a"), None), None);
        assert_eq!(bounds(v("a"), v("a"), None), None);
        assert_eq!(bounds(v("b"), None, v("a")), None);
        assert_eq!(bounds(None, v("a"), v("b")), None);
        // Nothing is below the empty key.
        assert_eq!(bounds(None, v(""), None), None);
    }

    #[test]
    fn limits_show_the_intersection_even_when_empty() {
        let kb = KeyBounds {
            from: v("c"),
            to: None,
            prefix: v("a"),
        };
        assert_eq!(kb.limits(), (v("c"), v("b")));
        assert!(kb.any());
        assert!(!KeyBounds::default().any());
        assert_eq!(KeyBounds::default().limits(), (None, None));
    }

    #[test]
    fn decoding_names_the_flag() {
        let args = RangeArgs {
            from: Some("00".into()),
            to: Some("zz".into()),
            prefix: None,
        };
        let e = range_of(&args, Encoding::Hex).unwrap_err();
        assert_eq!(e.code, Code::BadInput);
        assert!(e.message.unwrap().starts_with("--to \"zz\": invalid hex"));
        let args = RangeArgs {
            from: Some("a".into()),
            to: None,
            prefix: Some("".into()),
        };
        assert_eq!(
            KeyBounds::decode(&args, Encoding::Text).unwrap(),
            KeyBounds {
                from: v("a"),
                to: None,
                prefix: v(""),
            }
        );
    }
}
