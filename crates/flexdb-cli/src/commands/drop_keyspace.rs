//! `drop-keyspace`: removes a keyspace and every pair in it with one
//! atomic `Db::drop_keyspace`, and prints how many pairs it held.
//!
//! Invariants:
//! - [`check`] refuses, before the store is opened (so nothing changes):
//!   a bad name (bad input, status 8) and `default`, which cannot be
//!   dropped (usage, status 2; `delete-range --all` empties it).
//! - A keyspace that is not in the store is an error (status 3, as a
//!   missing store) and nothing is written.
//! - The pairs are counted through the keyspace just before the drop, so
//!   the count is what the drop removed: the command has the store to
//!   itself (its lock), and nothing writes between the count and the
//!   drop. No other keyspace loses a pair.
//! - The report goes to the given writer (stdout) as `name  value` lines
//!   or one JSON object; the counting spinner goes to stderr, only when
//!   stderr is a terminal and the command is not `--quiet`.

use std::io::Write;
use std::path::Path;

use flexdb::{Db, DEFAULT_KEYSPACE};
use serde_json::json;

use super::{count, stdout_err};
use crate::encoding::escape;
use crate::exit::{CliError, Code};
use crate::keyspace::{check_name, missing};

/// What the command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The keyspace dropped.
    pub name: String,
    /// The pairs it held, counted just before the drop.
    pub pairs: u64,
}

/// Checks `name` for the store in `dir` (named in messages) before the
/// store is opened.
pub fn check(dir: &Path, name: &str) -> Result<(), CliError> {
    check_name(name)?;
    if name == DEFAULT_KEYSPACE {
        return Err(CliError::new(
            Code::Usage,
            format!(
                "{}: the default keyspace cannot be dropped \
                 (`flexdb delete-range DIR --all` empties it)",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// Counts the pairs of keyspace `name`, drops it and prints the report.
pub fn drop_keyspace(
    db: &Db,
    dir: &Path,
    name: &str,
    json: bool,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<Report, CliError> {
    check(dir, name)?;
    let ks = db
        .existing_keyspace(name)
        .map_err(|e| CliError::db(dir, e))?
        .ok_or_else(|| missing(dir, name))?;
    let pairs = count(ks.iter(), dir, quiet, BAR)?;
    if !db.drop_keyspace(name).map_err(|e| CliError::db(dir, e))? {
        // Only another handle of this process could have dropped it.
        return Err(missing(dir, name));
    }
    let report = Report {
        name: name.to_string(),
        pairs,
    };
    out.write_all(render(&report, json).as_bytes())
        .map_err(stdout_err)?;
    Ok(report)
}

/// The report as text lines (the name escaped as `scan` escapes text) or
/// one JSON object.
pub fn render(r: &Report, json: bool) -> String {
    if json {
        let v = json!({
            "keyspace": r.name,
            "pairs": r.pairs,
            "dropped": true,
        });
        return format!("{v}\n");
    }
    format!(
        "keyspace  {}\npairs     {}\nstatus    dropped\n",
        escape(r.name.as_bytes()),
        r.pairs
    )
}

/// The spinner: pairs counted so far (the total is not known).
const BAR: &str = "{spinner} [{elapsed_precise}] counting the keyspace: {human_pos} pairs";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_bad_names_are_refused_before_opening() {
        let e = check(Path::new("/db"), DEFAULT_KEYSPACE).unwrap_err();
        assert_eq!(e.code, Code::Usage);
        let msg = e.message.unwrap();
        assert!(msg.starts_with("/db: the default keyspace cannot be dropped"));
        assert!(msg.contains("delete-range DIR --all"), "{msg}");
        assert_eq!(
            check(Path::new("/db"), "").unwrap_err().code,
            Code::BadInput
        );
        check(Path::new("/db"), "users").unwrap();
    }

    #[test]
    fn text_and_json_forms() {
        let r = Report {
            name: "a\nb".into(),
            pairs: 7,
        };
        assert_eq!(
            render(&r, false),
            "keyspace  a\\nb\npairs     7\nstatus    dropped\n"
        );
        let v: serde_json::Value = serde_json::from_str(&render(&r, true)).unwrap();
        assert_eq!(v, json!({"keyspace": "a\nb", "pairs": 7, "dropped": true}));
    }

    #[test]
    fn counts_then_drops_one_keyspace_only() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = flexdb::Options::new().create_if_missing(true);
        let db = Db::open(tmp.path(), opts).unwrap();
        let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
        for k in ["1", "2", "3"] {
            a.put(k, "a").unwrap();
            b.put(k, "b").unwrap();
            db.put(k, "default").unwrap();
        }
        let mut out = Vec::new();
        let r = drop_keyspace(&db, tmp.path(), "a", false, true, &mut out).unwrap();
        assert_eq!(r.pairs, 3);
        assert_eq!(db.keyspaces(), ["default", "b"]);
        assert_eq!(b.iter().count(), 3);
        assert_eq!(db.iter().count(), 3);
        let e = drop_keyspace(&db, tmp.path(), "a", false, true, &mut out).unwrap_err();
        assert_eq!(e.code, Code::NoStore);
        assert!(e.message.unwrap().contains("no keyspace \"a\""));
        db.close().unwrap();
    }
}
