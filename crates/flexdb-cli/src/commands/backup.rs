//! `backup`: runs `Db::backup` with a progress bar and prints what the
//! backup holds.
//!
//! Invariants: the bar goes to stderr, only when stderr is a terminal and
//! the command is not `--quiet`; the report goes to the given writer
//! (stdout) as `name  value` lines or one JSON object with the fields of
//! [`flexdb::BackupReport`].

use std::io::Write;
use std::path::Path;

use flexdb::{BackupReport, Db};
use serde_json::json;

use super::stdout_err;
use crate::exit::CliError;
use crate::progress::human_bytes;

/// Backs the store up into `dest` and prints the report.
pub fn backup(
    db: &Db,
    dir: &Path,
    dest: &Path,
    json: bool,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let res = crate::progress::with_bar(quiet, BAR, |tick| {
        db.backup_with_progress(dest, |p| tick(p.pairs, p.total_pairs.max(p.pairs)))
    });
    let report = res.map_err(|e| CliError::db(dir, e))?;
    out.write_all(render(&report, json).as_bytes())
        .map_err(stdout_err)
}

/// The report as text lines or one JSON object.
pub fn render(r: &BackupReport, json: bool) -> String {
    let BackupReport {
        dest,
        pairs,
        bytes,
        disk_bytes,
    } = r;
    let dest = dest.display().to_string();
    if json {
        let v = json!({
            "dest": dest,
            "pairs": pairs,
            "bytes": bytes,
            "disk_bytes": disk_bytes,
        });
        return format!("{v}\n");
    }
    format!(
        "dest        {dest}\npairs       {pairs}\nbytes       {bytes} ({})\ndisk_bytes  {disk_bytes} ({})\n",
        human_bytes(*bytes),
        human_bytes(*disk_bytes)
    )
}

/// The bar: pairs copied so far, of the store's pairs when it started.
const BAR: &str =
    "{spinner} [{elapsed_precise}] [{wide_bar}] {human_pos}/{human_len} pairs (ETA {eta})";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_forms() {
        let r = BackupReport {
            dest: "/b".into(),
            pairs: 3,
            bytes: 2_000,
            disk_bytes: 5_000_000,
        };
        assert_eq!(
            render(&r, false),
            "dest        /b\npairs       3\nbytes       2000 (2.0 kB)\ndisk_bytes  5000000 (5.0 MB)\n"
        );
        let v: serde_json::Value = serde_json::from_str(&render(&r, true)).unwrap();
        assert_eq!(v["dest"], "/b");
        assert_eq!(v["pairs"], 3);
        assert_eq!(v["bytes"], 2_000);
        assert_eq!(v["disk_bytes"], 5_000_000);
    }
}
