//! `compact`: runs `Db::compact` with a progress bar and prints the store's
//! disk bytes before and after.
//!
//! Invariants: the bar goes to stderr, only when stderr is a terminal and
//! the command is not `--quiet`; the report goes to the given writer
//! (stdout) as two `name  value` lines per figure or one JSON object with
//! the fields of [`flexdb::CompactReport`].

use std::io::Write;
use std::path::Path;

use flexdb::{CompactReport, Db};
use serde_json::json;

use super::stdout_err;
use crate::exit::CliError;
use crate::progress::human_bytes;

/// Compacts the store and prints the report.
pub fn compact(
    db: &Db,
    dir: &Path,
    json: bool,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let res = crate::progress::with_bar(quiet, BAR, |tick| {
        db.compact_with_progress(|p| tick(p.done, p.total))
    });
    let report = res.map_err(|e| CliError::db(dir, e))?;
    out.write_all(render(&report, json).as_bytes())
        .map_err(stdout_err)
}

/// The report as text lines or one JSON object.
pub fn render(r: &CompactReport, json: bool) -> String {
    let CompactReport {
        disk_bytes_before,
        disk_bytes_after,
        relocated_bytes,
        punched_bytes,
        held_bytes,
    } = r;
    if json {
        let v = json!({
            "disk_bytes_before": disk_bytes_before,
            "disk_bytes_after": disk_bytes_after,
            "relocated_bytes": relocated_bytes,
            "punched_bytes": punched_bytes,
            "held_bytes": held_bytes,
        });
        return format!("{v}\n");
    }
    let rows = [
        ("disk_bytes_before", disk_bytes_before),
        ("disk_bytes_after", disk_bytes_after),
        ("relocated_bytes", relocated_bytes),
        ("punched_bytes", punched_bytes),
        ("held_bytes", held_bytes),
    ];
    rows.iter()
        .map(|(k, v)| format!("{k:<17}  {v} ({})\n", human_bytes(**v)))
        .collect()
}

/// The bar: live bytes relocated so far.
const BAR: &str =
    "{spinner} [{elapsed_precise}] [{wide_bar}] {decimal_bytes}/{decimal_total_bytes} \
     relocated (ETA {eta})";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_forms() {
        let r = CompactReport {
            disk_bytes_before: 5_000_000,
            disk_bytes_after: 2_000_000,
            relocated_bytes: 1_000,
            punched_bytes: 0,
            held_bytes: 0,
        };
        assert_eq!(
            render(&r, false),
            "disk_bytes_before  5000000 (5.0 MB)\ndisk_bytes_after   2000000 (2.0 MB)\n\
             relocated_bytes    1000 (1.0 kB)\npunched_bytes      0 (0 B)\n\
             held_bytes         0 (0 B)\n"
        );
        let v: serde_json::Value = serde_json::from_str(&render(&r, true)).unwrap();
        assert_eq!(v["disk_bytes_before"], 5_000_000);
        assert_eq!(v["disk_bytes_after"], 2_000_000);
        assert_eq!(v["held_bytes"], 0);
    }
}
