//! `check`: prints the report of `Db::check`.
//!
//! Invariants: the report goes to the given writer (stdout) in full, every
//! problem on its own line; when there is any problem the command fails
//! with [`Code::Corrupt`] and a one-line summary naming the store.

use std::io::Write;
use std::path::Path;

use flexdb::CheckReport;
use serde_json::json;

use super::stdout_err;
use crate::encoding::shown_bound;
use crate::exit::{CliError, Code};
use crate::progress::human_bytes;

/// Prints `report` (as a table, or one JSON object) and turns problems
/// into an error.
pub fn print(
    dir: &Path,
    report: &CheckReport,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // Every field by name: a new field of `CheckReport` fails the build
    // here until it is shown.
    let CheckReport {
        pairs,
        intervals,
        bytes,
        memtable_pairs,
        problems,
        damaged,
    } = report;
    let text = if json {
        let v = json!({
            "ok": report.is_ok(),
            "pairs": pairs,
            "intervals": intervals,
            "bytes": bytes,
            "memtable_pairs": memtable_pairs,
            "problems": problems,
            "damaged": damaged
                .iter()
                .map(|d| {
                    json!({
                        "offset": d.offset,
                        "after": shown_bound(&d.after),
                        "before": shown_bound(&d.before),
                        "interval_from": d.interval_from.escape_ascii().to_string(),
                    })
                })
                .collect::<Vec<_>>(),
        });
        format!("{v}\n")
    } else {
        let mut t = format!(
            "pairs           {}\nintervals       {}\nbytes           {} ({})\nmemtable_pairs  {}\n",
            pairs,
            intervals,
            bytes,
            human_bytes(*bytes),
            memtable_pairs
        );
        if report.is_ok() {
            t.push_str("status          ok\n");
        } else {
            t.push_str(&format!(
                "status          {} {}\n",
                problems.len(),
                plural(problems.len(), "problem")
            ));
            for p in problems {
                t.push_str(&format!("problem: {}\n", p.replace('\n', " ")));
            }
            if !damaged.is_empty() {
                t.push_str(&format!(
                    "damaged         {} {} of keys (listed above up to the first 100 problems)\n",
                    damaged.len(),
                    plural(damaged.len(), "range")
                ));
            }
        }
        t
    };
    out.write_all(text.as_bytes()).map_err(stdout_err)?;
    if report.is_ok() {
        return Ok(());
    }
    let first = problems.first().map(String::as_str).unwrap_or("");
    Err(CliError::new(
        Code::Corrupt,
        format!(
            "{}: check found {} {}; the first: {first}",
            dir.display(),
            problems.len(),
            plural(problems.len(), "problem")
        ),
    ))
}

/// `word`, with an `s` unless `n` is 1.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_report() {
        let r = CheckReport {
            pairs: 10,
            intervals: 2,
            bytes: 2048,
            memtable_pairs: 1,
            problems: vec![],
            damaged: vec![],
        };
        let mut out = Vec::new();
        print(Path::new("/db"), &r, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("pairs           10\n"));
        assert!(text.contains("bytes           2048 (2.0 kB)\n"));
        assert!(text.ends_with("status          ok\n"));
    }

    #[test]
    fn problems_are_listed_and_fail_with_the_corruption_code() {
        let r = CheckReport {
            problems: vec!["interval 3 out of order".into(), "bad\ncrc".into()],
            ..CheckReport::default()
        };
        let mut out = Vec::new();
        let e = print(Path::new("/db"), &r, false, &mut out).unwrap_err();
        assert_eq!(e.code, Code::Corrupt);
        assert_eq!(
            e.message.unwrap(),
            "/db: check found 2 problems; the first: interval 3 out of order"
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(
            "status          2 problems\nproblem: interval 3 out of order\nproblem: bad crc\n"
        ));
        let mut out = Vec::new();
        assert!(print(Path::new("/db"), &r, true, &mut out).is_err());
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["problems"].as_array().unwrap().len(), 2);
    }
}
