//! `repair`: runs `Db::repair` on a store's directory (the one command
//! that works on a closed store rather than an open one) with a progress
//! bar, and prints what was salvaged and what was lost.
//!
//! Invariants: the bar goes to stderr, only when stderr is a terminal and
//! the command is not `--quiet`; the report goes to the given writer
//! (stdout) as `name  value` lines followed by one line per thing lost,
//! or as one JSON object with the fields of [`flexdb::RepairReport`]. A
//! repair that completes succeeds even when it lost pairs: the report
//! says which key ranges.

use std::io::Write;
use std::path::Path;

use flexdb::{Db, RepairReport};
use serde_json::json;

use super::stdout_err;
use crate::encoding::shown_bound;
use crate::exit::CliError;

/// Repairs the store in `dir` (into `into`, or in place) and prints the
/// report.
pub fn repair(
    dir: &Path,
    into: Option<&Path>,
    json: bool,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let res = crate::progress::with_bar(quiet, BAR, |tick| {
        Db::repair(dir, into, |p| tick(p.done, p.total))
    });
    let report = res.map_err(|e| CliError::db(dir, e))?;
    out.write_all(render(&report, json).as_bytes())
        .map_err(stdout_err)
}

/// The report as text lines or one JSON object.
pub fn render(r: &RepairReport, json: bool) -> String {
    // Every field by name: a new field fails the build here until shown.
    let RepairReport {
        pairs,
        replayed,
        lost,
        salvaged,
        into,
        original,
    } = r;
    if json {
        let v = json!({
            "complete": r.is_complete(),
            "pairs": pairs,
            "replayed": replayed,
            "into": into.display().to_string(),
            "original": original.as_ref().map(|p| p.display().to_string()),
            "salvaged": salvaged,
            "lost": lost
                .iter()
                .map(|d| json!({
                    "offset": d.offset,
                    "after": shown_bound(&d.after),
                    "before": shown_bound(&d.before),
                }))
                .collect::<Vec<_>>(),
        });
        return format!("{v}\n");
    }
    let mut t = format!(
        "pairs     {pairs}\nreplayed  {replayed}\ninto      {}\n",
        into.display()
    );
    if let Some(o) = original {
        t.push_str(&format!("original  {}\n", o.display()));
    }
    t.push_str(if r.is_complete() {
        "status    complete: nothing lost\n"
    } else {
        "status    incomplete: see the lines below\n"
    });
    for s in salvaged {
        t.push_str(&format!("gave up: {}\n", s.replace('\n', " ")));
    }
    for d in lost {
        t.push_str(&format!("lost: {d}\n"));
    }
    t
}

/// The bar: intervals of the damaged store read so far.
const BAR: &str =
    "{spinner} [{elapsed_precise}] [{wide_bar}] {pos}/{len} intervals read (ETA {eta})";
