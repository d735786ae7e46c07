//! `keyspaces`: the store's keyspaces and how many pairs each holds.
//!
//! Invariants: one entry per name of `Db::keyspaces`, in its order
//! (`default` first, then the others by name); a count is the pairs an
//! iterator over the keyspace yields (exact: the command has the store to
//! itself). Nothing is created or written. Text output is one
//! `NAME<TAB>PAIRS` line per keyspace, the name escaped as `scan` escapes
//! text so that a line is always one keyspace; `--json` is one array of
//! `{"name":..,"pairs":..}` objects with the names as they are.

use std::io::Write;
use std::path::Path;

use flexdb::Db;
use serde_json::json;

use super::{count, stdout_err};
use crate::encoding::escape;
use crate::exit::CliError;
use crate::store::Mode;

/// One keyspace and its pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The keyspace's name.
    pub name: String,
    /// The pairs it holds.
    pub pairs: u64,
}

/// Counts the pairs of every keyspace of `db` (the store in `dir`).
pub fn list(db: &Db, dir: &Path, quiet: bool) -> Result<Vec<Entry>, CliError> {
    db.keyspaces()
        .into_iter()
        .map(|name| {
            let ks = crate::keyspace::open(db, dir, &name, Mode::Existing)?;
            let pairs = count(ks.iter(), dir, quiet, BAR)?;
            Ok(Entry { name, pairs })
        })
        .collect()
}

/// Lists the keyspaces of `db` with their pairs on `out`.
pub fn keyspaces(
    db: &Db,
    dir: &Path,
    json: bool,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let entries = list(db, dir, quiet)?;
    out.write_all(render(&entries, json).as_bytes())
        .map_err(stdout_err)
}

/// The list as lines or one JSON array.
pub fn render(entries: &[Entry], json: bool) -> String {
    if json {
        let v: Vec<_> = entries
            .iter()
            .map(|e| json!({"name": e.name, "pairs": e.pairs}))
            .collect();
        return format!("{}\n", serde_json::Value::Array(v));
    }
    entries
        .iter()
        .map(|e| format!("{}\t{}\n", escape(e.name.as_bytes()), e.pairs))
        .collect()
}

/// The spinner: pairs counted so far in the keyspace being counted.
const BAR: &str = "{spinner} [{elapsed_precise}] counting a keyspace: {human_pos} pairs";

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, pairs: u64) -> Entry {
        Entry {
            name: name.into(),
            pairs,
        }
    }

    #[test]
    fn text_and_json_forms() {
        let entries = [entry("default", 3), entry("a\tb", 0), entry("日本", 12)];
        assert_eq!(render(&entries, false), "default\t3\na\\tb\t0\n日本\t12\n");
        let text = render(&entries, true);
        assert_eq!(text.lines().count(), 1);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!([
                {"name": "default", "pairs": 3},
                {"name": "a\tb", "pairs": 0},
                {"name": "日本", "pairs": 12},
            ])
        );
    }

    #[test]
    fn counts_each_keyspace_and_creates_none() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = flexdb::Options::new().create_if_missing(true);
        let db = Db::open(tmp.path(), opts).unwrap();
        db.put("k", "v").unwrap();
        let b = db.keyspace("b").unwrap();
        for k in ["1", "2", "3"] {
            b.put(k, "v").unwrap();
        }
        db.keyspace("a").unwrap();
        let got = list(&db, tmp.path(), true).unwrap();
        assert_eq!(got, [entry("default", 1), entry("a", 0), entry("b", 3)]);
        assert_eq!(db.keyspaces(), ["default", "a", "b"]);
        db.close().unwrap();
    }
}
