//! `delete-range`: removes every pair of a key range of one keyspace with
//! one atomic `Keyspace::delete_range` and prints the range and how many
//! pairs it removed.
//!
//! Invariants:
//! - Only the given keyspace loses pairs (the default one without
//!   `--keyspace`); a missing keyspace is an error, never created.
//! - The range is the one `scan` lists for the same `--from`, `--to` and
//!   `--prefix` ([`crate::range`]); an empty intersection removes nothing
//!   and writes nothing.
//! - [`plan`] refuses, before the store is opened (so nothing changes):
//!   `--from` past `--to` and bounds longer than `flexdb::MAX_KEY_LEN`
//!   (bad input, status 8), and a range that takes in every key without
//!   `--all` (usage, status 2).
//! - The number of pairs is counted through a snapshot of the range just
//!   before the delete, so it is the number the delete removes: the
//!   command has the store to itself (its lock), and nothing writes
//!   between the count and the delete. `--dry-run` counts and writes
//!   nothing.
//! - The report goes to the given writer (stdout) as `name  value` lines
//!   or one JSON object; the counting spinner goes to stderr, only when
//!   stderr is a terminal and the command is not `--quiet`.

use std::io::Write;
use std::path::Path;

use flexdb::{Keyspace, MAX_KEY_LEN};
use serde_json::json;

use super::{count, shown_arg, stdout_err};
use crate::cli::RangeArgs;
use crate::encoding::Encoding;
use crate::exit::{CliError, Code};
use crate::range::{KeyBounds, Range};

/// What to remove, checked before the store is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The range's first key (inclusive); `None`: the store's first key.
    pub start: Option<Vec<u8>>,
    /// The range's end (exclusive); `None`: through the store's last key.
    pub end: Option<Vec<u8>>,
    /// The range to count and delete; `None` when it holds no key.
    pub range: Option<Range>,
}

/// Checks the command line's range for the store in `dir` (named in
/// messages) and returns what to remove.
pub fn plan(dir: &Path, args: &RangeArgs, all: bool, enc: Encoding) -> Result<Plan, CliError> {
    let bounds = KeyBounds::decode(args, enc)?;
    let named = [
        ("--from", &bounds.from),
        ("--to", &bounds.to),
        ("--prefix", &bounds.prefix),
    ];
    for (what, key) in named {
        if let Some(key) = key.as_ref().filter(|k| k.len() > MAX_KEY_LEN) {
            let e = flexdb::Error::KeyTooLarge {
                len: key.len(),
                max: MAX_KEY_LEN,
            };
            return Err(CliError::bad_input(format!(
                "{}: {what}: {e}",
                dir.display()
            )));
        }
    }
    if let (Some(from), Some(to)) = (&bounds.from, &bounds.to) {
        if from > to {
            let shown = |a: &Option<String>| shown_arg(a.as_deref().unwrap_or_default());
            return Err(CliError::bad_input(format!(
                "{}: --from {:?} is past --to {:?}; nothing removed",
                dir.display(),
                shown(&args.from),
                shown(&args.to)
            )));
        }
    }
    let (start, end) = bounds.limits();
    // The empty key is the first key there is.
    let start = start.filter(|s| !s.is_empty());
    if start.is_none() && end.is_none() && !all {
        let what = if bounds.any() {
            "this range takes in every key; add --all to remove every pair"
        } else {
            "no range given: give --from, --to or --prefix, or --all to remove every pair"
        };
        return Err(CliError::new(
            Code::Usage,
            format!("{}: {what}", dir.display()),
        ));
    }
    let range = KeyBounds {
        from: start.clone(),
        to: end.clone(),
        prefix: None,
    }
    .range();
    Ok(Plan { start, end, range })
}

/// How the command runs and reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Count only; remove nothing.
    pub dry_run: bool,
    /// One JSON object instead of lines.
    pub json: bool,
    /// No spinner.
    pub quiet: bool,
    /// The encoding of the keys in the report.
    pub enc: Encoding,
}

/// What the command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The range's first key (inclusive); `None`: the store's first key.
    pub start: Option<Vec<u8>>,
    /// The range's end (exclusive); `None`: through the store's last key.
    pub end: Option<Vec<u8>>,
    /// Pairs in the range, counted just before the delete.
    pub pairs: u64,
    /// Whether they were removed (`false` with `--dry-run`).
    pub removed: bool,
}

/// Counts the pairs of `plan`'s range in keyspace `ks`, removes them
/// (unless `dry_run`) and prints the report.
pub fn delete_range(
    ks: &Keyspace,
    dir: &Path,
    plan: &Plan,
    opts: Options,
    out: &mut dyn Write,
) -> Result<Report, CliError> {
    // Counted through a snapshot taken now, just before the delete.
    let pairs = match &plan.range {
        Some(range) => count(
            ks.snapshot()
                .map_err(|e| CliError::db(dir, e))?
                .range::<Vec<u8>, _>(range.clone()),
            dir,
            opts.quiet,
            BAR,
        )?,
        None => 0,
    };
    if !opts.dry_run {
        if let Some(range) = &plan.range {
            ks.delete_range::<Vec<u8>, _>(range.clone())
                .map_err(|e| CliError::db(dir, e))?;
        }
    }
    let report = Report {
        start: plan.start.clone(),
        end: plan.end.clone(),
        pairs,
        removed: !opts.dry_run,
    };
    out.write_all(render(&report, opts.enc, opts.json).as_bytes())
        .map_err(stdout_err)?;
    Ok(report)
}

/// The report as text lines or one JSON object; keys in `enc` (text:
/// escaped as in `scan` output).
pub fn render(r: &Report, enc: Encoding, json: bool) -> String {
    let key = |k: &Option<Vec<u8>>| k.as_deref().map(|k| enc.field(k));
    let (start, end) = (key(&r.start), key(&r.end));
    if json {
        let v = json!({
            "start": start,
            "end": end,
            "pairs": r.pairs,
            "removed": r.removed,
        });
        return format!("{v}\n");
    }
    let status = if r.removed {
        "removed"
    } else {
        "dry run: nothing removed"
    };
    format!(
        "start   {}\nend     {}\npairs   {}\nstatus  {status}\n",
        start.as_deref().unwrap_or("(first key)"),
        end.as_deref().unwrap_or("(after the last key)"),
        r.pairs
    )
}

/// The spinner: pairs counted so far (the total is not known).
const BAR: &str = "{spinner} [{elapsed_precise}] counting the range: {human_pos} pairs";

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use super::*;

    fn args(from: Option<&str>, to: Option<&str>, prefix: Option<&str>) -> RangeArgs {
        RangeArgs {
            from: from.map(String::from),
            to: to.map(String::from),
            prefix: prefix.map(String::from),
        }
    }

    fn plan_of(a: RangeArgs, all: bool) -> Result<Plan, CliError> {
        plan(Path::new("/db"), &a, all, Encoding::Text)
    }

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn plans_follow_the_scan_flags() {
        let p = plan_of(args(Some("a"), Some("c"), None), false).unwrap();
        assert_eq!(
            (p.start.clone(), p.end.clone()),
            (Some(b("a")), Some(b("c")))
        );
        assert_eq!(
            p.range,
            Some((Bound::Included(b("a")), Bound::Excluded(b("c"))))
        );
        // Open end.
        let p = plan_of(args(Some("m"), None, None), false).unwrap();
        assert_eq!(p.range, Some((Bound::Included(b("m")), Bound::Unbounded)));
        // Open start.
        let p = plan_of(args(None, Some("m"), None), false).unwrap();
        assert_eq!(p.range, Some((Bound::Unbounded, Bound::Excluded(b("m")))));
        // A prefix, and a prefix cut by --from.
        let p = plan_of(args(None, None, Some("user:")), false).unwrap();
        assert_eq!((p.start, p.end), (Some(b("user:")), Some(b("user;"))));
        let p = plan_of(args(Some("user:5"), None, Some("user:")), false).unwrap();
        assert_eq!((p.start, p.end), (Some(b("user:5")), Some(b("user;"))));
        // Empty: equal bounds, or a prefix that --from is past.
        assert_eq!(
            plan_of(args(Some("b"), Some("b"), None), false)
                .unwrap()
                .range,
            None
        );
        let p = plan_of(args(Some("c"), None, Some("a")), false).unwrap();
        assert_eq!(
            (p.start, p.end, p.range),
            (Some(b("c")), Some(b("b")), None)
        );
        // Everything, with --all.
        let p = plan_of(RangeArgs::default(), true).unwrap();
        assert_eq!(p.range, Some((Bound::Unbounded, Bound::Unbounded)));
    }

    #[test]
    fn every_key_needs_all() {
        for a in [
            RangeArgs::default(),
            args(Some(""), None, None),
            args(None, None, Some("")),
        ] {
            let e = plan_of(a.clone(), false).unwrap_err();
            assert_eq!(e.code, Code::Usage, "{a:?}");
            let msg = e.message.unwrap();
            assert!(msg.starts_with("/db: ") && msg.contains("--all"), "{msg}");
        }
        let e = plan_of(RangeArgs::default(), false).unwrap_err();
        assert!(e.message.unwrap().contains("no range given"));
        let e = plan_of(args(None, None, Some("")), false).unwrap_err();
        assert!(e.message.unwrap().contains("takes in every key"));
    }

    #[test]
    fn bad_bounds_are_bad_input() {
        let e = plan_of(args(Some("b"), Some("a"), None), false).unwrap_err();
        assert_eq!(e.code, Code::BadInput);
        assert_eq!(
            e.message.as_deref(),
            Some("/db: --from \"b\" is past --to \"a\"; nothing removed")
        );
        // Even when a prefix would make the range empty anyway.
        let e = plan_of(args(Some("b"), Some("a"), Some("x")), false).unwrap_err();
        assert_eq!(e.code, Code::BadInput);
        let big = "k".repeat(MAX_KEY_LEN + 1);
        for a in [
            args(Some(&big), None, None),
            args(None, Some(&big), None),
            args(None, None, Some(&big)),
        ] {
            let e = plan_of(a, false).unwrap_err();
            assert_eq!(e.code, Code::BadInput);
            let msg = e.message.unwrap();
            assert!(msg.contains("exceeds the limit"), "{msg}");
        }
        let max = "k".repeat(MAX_KEY_LEN);
        plan_of(args(Some(&max), None, None), false).unwrap();
        let e = plan(
            Path::new("/db"),
            &args(Some("zz"), None, None),
            false,
            Encoding::Hex,
        )
        .unwrap_err();
        assert_eq!(e.code, Code::BadInput);
    }

    #[test]
    fn text_and_json_forms() {
        let r = Report {
            start: Some(b("a\tb")),
            end: None,
            pairs: 3,
            removed: true,
        };
        assert_eq!(
            render(&r, Encoding::Text, false),
            "start   a\\tb\nend     (after the last key)\npairs   3\nstatus  removed\n"
        );
        let v: serde_json::Value = serde_json::from_str(&render(&r, Encoding::Hex, true)).unwrap();
        assert_eq!(v["start"], "610962");
        assert_eq!(v["end"], serde_json::Value::Null);
        assert_eq!(v["pairs"], 3);
        assert_eq!(v["removed"], true);
        let dry = Report {
            start: None,
            end: Some(b("m")),
            pairs: 0,
            removed: false,
        };
        assert_eq!(
            render(&dry, Encoding::Text, false),
            "start   (first key)\nend     m\npairs   0\nstatus  dry run: nothing removed\n"
        );
    }

    #[test]
    fn counts_then_removes_and_a_dry_run_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = flexdb::Options::new().create_if_missing(true);
        let db = flexdb::Db::open(tmp.path(), opts).unwrap();
        let logs = db.keyspace("logs").unwrap();
        for k in ["a", "b", "ba", "c", "d"] {
            logs.put(k, "v").unwrap();
            // The same keys in the default keyspace, which must keep them.
            db.put(k, "default").unwrap();
        }
        let p = plan_of(args(Some("b"), Some("d"), None), false).unwrap();
        let mut out = Vec::new();
        let dry = Options {
            dry_run: true,
            quiet: true,
            ..Options::default()
        };
        let r = delete_range(&logs, tmp.path(), &p, dry, &mut out).unwrap();
        assert_eq!((r.pairs, r.removed), (3, false));
        assert_eq!(logs.iter().count(), 5);
        let run = Options {
            quiet: true,
            ..Options::default()
        };
        let r = delete_range(&logs, tmp.path(), &p, run, &mut out).unwrap();
        assert_eq!((r.pairs, r.removed), (3, true));
        let keys: Vec<Vec<u8>> = logs.iter().map(|kv| kv.unwrap().0).collect();
        assert_eq!(keys, [b("a"), b("d")]);
        assert_eq!(db.iter().count(), 5, "the default keyspace lost pairs");
        // An empty range writes nothing and counts nothing.
        let empty = plan_of(args(Some("c"), None, Some("a")), false).unwrap();
        let r = delete_range(&logs, tmp.path(), &empty, run, &mut out).unwrap();
        assert_eq!(r.pairs, 0);
        db.close().unwrap();
    }
}
