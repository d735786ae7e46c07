//! `backup`: runs `Db::backup` with a progress bar and prints what the
//! backup holds.
//!
//! Invariants: the bar goes to stderr, only when stderr is a terminal and
//! the command is not `--quiet`; the report goes to the given writer
//! (stdout) as `name  value` lines or one JSON object with the fields of
//! [`flexdb::BackupReport`]. The bar counts bytes: the data segments
//! written or shared, then the pairs written one by one.

use std::io::Write;
use std::path::Path;

use flexdb::{BackupMethod, BackupReport, Db};
use serde_json::json;

use super::stdout_err;
use crate::exit::CliError;
use crate::progress::human_bytes;

/// Backs the store up into `dest` by `method` and prints the report.
pub fn backup(
    db: &Db,
    dir: &Path,
    dest: &Path,
    method: BackupMethod,
    json: bool,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let res = crate::progress::with_bar(quiet, BAR, |tick| {
        db.backup_with(dest, method, |p| tick(p.bytes, p.total_bytes.max(p.bytes)))
    });
    let report = res.map_err(|e| CliError::db(dir, e))?;
    out.write_all(render(&report, json).as_bytes())
        .map_err(stdout_err)
}

/// The method's name in the report.
fn method_name(m: BackupMethod) -> &'static str {
    match m {
        BackupMethod::Physical => "physical",
        BackupMethod::Logical => "logical",
    }
}

/// The report as text lines or one JSON object.
pub fn render(r: &BackupReport, json: bool) -> String {
    let BackupReport {
        dest,
        method,
        pairs,
        bytes,
        shared_bytes,
        disk_bytes,
    } = r;
    let dest = dest.display().to_string();
    let method = method_name(*method);
    if json {
        let v = json!({
            "dest": dest,
            "method": method,
            "pairs": pairs,
            "bytes": bytes,
            "shared_bytes": shared_bytes,
            "disk_bytes": disk_bytes,
        });
        return format!("{v}\n");
    }
    format!(
        "dest          {dest}\nmethod        {method}\npairs         {pairs}\nbytes         {bytes} ({})\nshared_bytes  {shared_bytes} ({})\ndisk_bytes    {disk_bytes} ({})\n",
        human_bytes(*bytes),
        human_bytes(*shared_bytes),
        human_bytes(*disk_bytes)
    )
}

/// The bar: bytes done (data segments, then pairs), of about how many.
const BAR: &str =
    "{spinner} [{elapsed_precise}] [{wide_bar}] {binary_bytes}/{binary_total_bytes} (ETA {eta})";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_forms() {
        let r = BackupReport {
            dest: "/b".into(),
            method: BackupMethod::Physical,
            pairs: 3,
            bytes: 2_000,
            shared_bytes: 4_000_000,
            disk_bytes: 5_000_000,
        };
        assert_eq!(
            render(&r, false),
            "dest          /b\nmethod        physical\npairs         3\nbytes         2000 (2.0 kB)\nshared_bytes  4000000 (4.0 MB)\ndisk_bytes    5000000 (5.0 MB)\n"
        );
        let v: serde_json::Value = serde_json::from_str(&render(&r, true)).unwrap();
        assert_eq!(v["dest"], "/b");
        assert_eq!(v["method"], "physical");
        assert_eq!(v["pairs"], 3);
        assert_eq!(v["bytes"], 2_000);
        assert_eq!(v["shared_bytes"], 4_000_000);
        assert_eq!(v["disk_bytes"], 5_000_000);
    }
}
