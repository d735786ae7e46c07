//! put, get, del, scan, delete-range, stats, check, backup and compact
//! against real stores, through the built binary.

mod common;

use common::{code, flexdb, flexdb_in, p};

fn store() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = p(&tmp.path().join("db")).to_string();
    (tmp, dir)
}

#[test]
fn put_creates_the_store_and_get_reads_it_back() {
    let (_tmp, d) = store();
    assert_eq!(flexdb(&["put", &d, "hello", "world"]).ok(), "");
    assert_eq!(flexdb(&["get", &d, "hello"]).ok(), "world\n");
    // Overwrite, and values that look like flags.
    flexdb(&["put", &d, "hello", "-1"]).ok();
    assert_eq!(flexdb(&["get", &d, "hello"]).ok(), "-1\n");
    // Empty key and empty value.
    flexdb(&["put", &d, "", ""]).ok();
    assert_eq!(flexdb(&["get", &d, ""]).ok(), "\n");
    // Unicode, spaces, tabs and newlines in text mode are taken verbatim;
    // `get` prints the raw value.
    flexdb(&["put", &d, "naïve key", "日本\tx\ny"]).ok();
    assert_eq!(flexdb(&["get", &d, "naïve key"]).ok(), "日本\tx\ny\n");
}

#[test]
fn get_of_an_absent_key_exits_1_silently() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "a", "1"]).ok();
    let run = flexdb(&["get", &d, "b"]);
    assert_eq!(run.code, Some(code::NOT_FOUND_KEY));
    assert!(run.stdout.is_empty() && run.stderr.is_empty(), "{run:?}");
}

#[test]
fn del_removes_and_deleting_an_absent_key_succeeds() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "a", "1"]).ok();
    assert_eq!(flexdb(&["del", &d, "a"]).ok(), "");
    assert_eq!(flexdb(&["get", &d, "a"]).code, Some(code::NOT_FOUND_KEY));
    assert_eq!(flexdb(&["del", &d, "a"]).ok(), "");
    assert_eq!(flexdb(&["del", &d, "never"]).ok(), "");
}

#[test]
fn hex_and_base64_switch_input_and_output() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "00ff", "DEADbeef", "--hex"]).ok();
    assert_eq!(flexdb(&["get", &d, "00FF", "--hex"]).ok(), "deadbeef\n");
    assert_eq!(flexdb(&["get", &d, "AP8=", "--base64"]).ok(), "3q2+7w==\n");
    assert_eq!(flexdb(&["get", &d, "AP8", "--base64"]).ok(), "3q2+7w==\n");
    // Text mode prints the raw bytes.
    let run = flexdb(&["get", &d, "AP8=", "--base64"]);
    assert_eq!(run.code, Some(0));
    // Both arguments are base64: the key "text" is dGV4dA==.
    let raw = flexdb(&["put", &d, "dGV4dA==", "aGk=", "--base64"]);
    assert_eq!(raw.code, Some(0), "{}", raw.stderr);
    assert_eq!(flexdb(&["get", &d, "text"]).stdout, b"hi\n");
    assert_eq!(
        flexdb(&["scan", &d, "--hex"]).ok(),
        "00ff\tdeadbeef\n74657874\t6869\n"
    );
}

#[test]
fn scan_bounds_prefix_limit_reverse() {
    let (_tmp, d) = store();
    for k in ["a", "b", "ba", "bb", "c", "d"] {
        flexdb(&["put", &d, k, &k.to_uppercase()]).ok();
    }
    let keys = |args: &[&str]| {
        let mut all = vec!["scan", d.as_str(), "--keys-only"];
        all.extend_from_slice(args);
        flexdb(&all)
            .ok()
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        flexdb(&["scan", &d]).ok(),
        "a\tA\nb\tB\nba\tBA\nbb\tBB\nc\tC\nd\tD\n"
    );
    assert_eq!(keys(&[]), "a b ba bb c d");
    assert_eq!(keys(&["--from", "b"]), "b ba bb c d", "--from is inclusive");
    assert_eq!(keys(&["--to", "c"]), "a b ba bb", "--to is exclusive");
    assert_eq!(keys(&["--from", "b", "--to", "c"]), "b ba bb");
    assert_eq!(keys(&["--from", "bz", "--to", "zz"]), "c d");
    assert_eq!(keys(&["--prefix", "b"]), "b ba bb");
    assert_eq!(keys(&["--prefix", "b", "--from", "b0"]), "ba bb");
    assert_eq!(keys(&["--prefix", "b", "--to", "bb"]), "b ba");
    assert_eq!(keys(&["--prefix", "x"]), "");
    assert_eq!(keys(&["--limit", "2"]), "a b");
    assert_eq!(keys(&["--limit", "0"]), "");
    assert_eq!(keys(&["--reverse"]), "d c bb ba b a");
    assert_eq!(keys(&["--reverse", "--limit", "2", "--to", "c"]), "bb ba");
    assert_eq!(keys(&["--reverse", "--prefix", "b"]), "bb ba b");
    assert_eq!(keys(&["--from", "c", "--to", "a"]), "", "empty range");
    assert_eq!(keys(&["--from", "b", "--to", "b"]), "");
}

#[test]
fn scan_escapes_text_so_each_pair_is_one_line() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "k\t1", "line\nbreak\\"]).ok();
    flexdb(&["put", &d, "ff", "ff00", "--hex"]).ok();
    flexdb(&["put", &d, "uni", "日本"]).ok();
    assert_eq!(
        flexdb(&["scan", &d]).ok(),
        "k\\t1\tline\\nbreak\\\\\nuni\t日本\n\\xff\t\\xff\\x00\n"
    );
    assert_eq!(
        flexdb(&["scan", &d, "--base64", "--keys-only", "--limit", "1"]).ok(),
        "awkx\n"
    );
}

#[test]
fn stats_table_and_json() {
    let (_tmp, d) = store();
    let input: String = (0..100)
        .map(|i| format!("key{i:03}\tsome value\n"))
        .collect();
    flexdb_in(&["load", &d, "--format", "tsv", "-q"], input.as_bytes()).ok();
    let table = flexdb(&["stats", &d]).ok();
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["pairs", "100"]),
        "{table}"
    );
    assert!(table.contains("space_bytes"), "{table}");
    let json: serde_json::Value =
        serde_json::from_str(&flexdb(&["stats", &d, "--json"]).ok()).unwrap();
    assert_eq!(json["pairs"], 100);
    assert!(json["space_bytes"].as_u64().unwrap() >= 100 * 16);
    assert_eq!(json.as_object().unwrap().len(), 46);
    assert!(
        json["disk_total_bytes"].as_u64().unwrap() >= json["disk_live_bytes"].as_u64().unwrap()
    );
}

#[test]
fn check_passes_on_a_healthy_store() {
    let (_tmp, d) = store();
    for i in 0..5 {
        flexdb(&["put", &d, &format!("k{i}"), &"v".repeat(i)]).ok();
    }
    let input: String = (5..50)
        .map(|i| format!("k{i},{}\n", "v".repeat(i)))
        .collect();
    flexdb_in(&["load", &d, "--format", "csv", "-q"], input.as_bytes()).ok();
    let report = flexdb(&["check", &d]).ok();
    assert!(report.contains("status          ok"), "{report}");
    assert!(report.starts_with("pairs           50\n"), "{report}");
    let json: serde_json::Value =
        serde_json::from_str(&flexdb(&["check", &d, "--json"]).ok()).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(
        json["pairs"].as_u64().unwrap() + json["memtable_pairs"].as_u64().unwrap(),
        50
    );
}

#[test]
fn oversized_keys_exit_8_naming_the_store() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "a", "1"]).ok();
    let big = "k".repeat(flexdb::MAX_KEY_LEN + 1);
    flexdb(&["put", &d, &big, "v"]).fails(code::BAD_INPUT, &[&d, "exceeds the limit"]);
    assert_eq!(flexdb(&["get", &d, "a"]).ok(), "1\n");
}

#[test]
fn backup_copies_the_store_into_a_new_one_and_refuses_a_full_directory() {
    let (tmp, d) = store();
    let input: String = (0..500)
        .map(|i| format!("{{\"key\":\"k{i:04}\",\"value\":\"v{i}\"}}\n"))
        .collect();
    let file = tmp.path().join("in.jsonl");
    std::fs::write(&file, input).unwrap();
    flexdb(&["load", &d, p(&file), "--format", "jsonl", "-q"]).ok();
    flexdb(&["del", &d, "k0007"]).ok();
    let dest = tmp.path().join("b");
    let out = flexdb(&["backup", &d, p(&dest), "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["pairs"], 499, "{out}");
    assert_eq!(v["method"], "physical", "{out}");
    assert!(v["disk_bytes"].as_u64().unwrap() > 0, "{out}");
    assert_eq!(v["dest"], p(&dest));
    assert_eq!(flexdb(&["scan", p(&dest)]).ok(), flexdb(&["scan", &d]).ok());
    assert_eq!(flexdb(&["get", p(&dest), "k0499"]).ok(), "v499\n");
    flexdb(&["check", p(&dest)]).ok();
    // Text form; and a destination that is not empty is refused.
    let text = flexdb(&["backup", &d, p(&tmp.path().join("c"))]).ok();
    assert!(text.contains("\npairs         499\n"), "{text}");
    // A logical backup reads the same.
    let logical = tmp.path().join("l");
    let out = flexdb(&["backup", &d, p(&logical), "--logical", "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["method"].as_str(), v["pairs"].as_u64()),
        (Some("logical"), Some(499)),
        "{out}"
    );
    assert_eq!(v["shared_bytes"], 0, "{out}");
    assert_eq!(
        flexdb(&["scan", p(&logical)]).ok(),
        flexdb(&["scan", &d]).ok()
    );
    flexdb(&["backup", &d, p(&dest)]).fails(code::BAD_INPUT, &["not empty"]);
    assert_eq!(flexdb(&["get", p(&dest), "k0499"]).ok(), "v499\n");
}

#[test]
fn compact_gives_disk_back_and_keeps_every_pair() {
    let (tmp, d) = store();
    // Many overwrites of 4 KiB values, then most keys deleted.
    let mut input = String::new();
    for round in 0..6 {
        for i in 0..800 {
            let v = format!("{round}{}", "v".repeat(4000));
            input.push_str(&format!("{{\"key\":\"k{i:04}\",\"value\":\"{v}\"}}\n"));
        }
    }
    let file = tmp.path().join("in.jsonl");
    std::fs::write(&file, input).unwrap();
    flexdb(&["load", &d, p(&file), "--format", "jsonl", "-q"]).ok();
    let dels: String = (0..800)
        .filter(|i| i % 4 != 0)
        .map(|i| format!("del k{i:04}\n"))
        .collect();
    flexdb_in(&["shell", &d], dels.as_bytes()).ok();
    let out = flexdb(&["compact", &d, "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (before, after) = (
        v["disk_bytes_before"].as_u64().unwrap(),
        v["disk_bytes_after"].as_u64().unwrap(),
    );
    assert!(after < before, "{out}");
    let text = flexdb(&["compact", &d]).ok();
    assert!(text.starts_with("disk_bytes_before  "), "{text}");
    assert!(text.contains("\ndisk_bytes_after   "), "{text}");
    let scan = flexdb(&["scan", &d]).ok();
    assert_eq!(scan.lines().count(), 200);
    assert!(scan.lines().all(|l| l.contains("\t5vvvv")));
    let stats = flexdb(&["stats", &d, "--json"]).ok();
    let s: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert!(s["disk_total_bytes"].as_u64().unwrap() > 0);
    flexdb(&["check", &d]).ok();
}

/// A store holding `k000`..`k{n-1}` (values `v0`..), loaded and flushed
/// by `load` in its own process.
fn loaded(n: usize) -> (tempfile::TempDir, String) {
    let (tmp, d) = store();
    let input: String = (0..n).map(|i| format!("k{i:03}\tv{i}\n")).collect();
    flexdb_in(&["load", &d, "--format", "tsv", "-q"], input.as_bytes()).ok();
    (tmp, d)
}

/// The keys `scan` lists (its own process: the store is reopened).
fn scanned_keys(d: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec!["scan", d, "--keys-only"];
    all.extend_from_slice(args);
    flexdb(&all).ok().lines().map(String::from).collect()
}

/// `k{i:03}` for each `i` of `range`.
fn ks(range: impl Iterator<Item = usize>) -> Vec<String> {
    range.map(|i| format!("k{i:03}")).collect()
}

/// The `name  value` lines of a text report, as pairs.
fn report(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap_or((l, ""));
            (k.to_string(), v.trim_start().to_string())
        })
        .collect()
}

#[test]
fn delete_range_removes_a_middle_range_for_good() {
    let (_tmp, d) = loaded(100);
    let out = flexdb(&["delete-range", &d, "--from", "k030", "--to", "k070"]).ok();
    assert_eq!(
        report(&out),
        [
            ("start".into(), "k030".into()),
            ("end".into(), "k070".into()),
            ("pairs".into(), "40".into()),
            ("status".into(), "removed".into()),
        ],
        "{out}"
    );
    // Checked by later processes: after the store's close and reopen.
    let want: Vec<String> = ks(0..30).into_iter().chain(ks(70..100)).collect();
    assert_eq!(scanned_keys(&d, &[]), want);
    for gone in ["k030", "k050", "k069"] {
        let run = flexdb(&["get", &d, gone]);
        assert_eq!(run.code, Some(code::NOT_FOUND_KEY), "{gone} is back");
    }
    assert_eq!(flexdb(&["get", &d, "k029"]).ok(), "v29\n");
    assert_eq!(
        flexdb(&["get", &d, "k070"]).ok(),
        "v70\n",
        "--to is exclusive"
    );
    // Once more, after a second reopen and a full check.
    flexdb(&["check", &d]).ok();
    assert_eq!(scanned_keys(&d, &[]), want);
    // Again over the emptied range: nothing left to remove.
    let again = flexdb(&["delete-range", &d, "--from", "k030", "--to", "k070"]).ok();
    assert!(again.contains("\npairs   0\n"), "{again}");
}

#[test]
fn delete_range_by_prefix() {
    let (_tmp, d) = store();
    let keys = ["user", "user:", "user:1", "user:2:x", "user;", "users", "u"];
    for k in keys {
        flexdb(&["put", &d, k, "v"]).ok();
    }
    let out = flexdb(&["delete-range", &d, "--prefix", "user:"]).ok();
    let r = report(&out);
    assert_eq!(r[0], ("start".into(), "user:".into()), "{out}");
    assert_eq!(r[1], ("end".into(), "user;".into()), "{out}");
    assert_eq!(r[2], ("pairs".into(), "3".into()), "{out}");
    assert_eq!(scanned_keys(&d, &[]), ["u", "user", "user;", "users"]);
    // The prefix combines with --from and --to as in `scan`.
    for k in ["p:a", "p:b", "p:c", "p:d", "q"] {
        flexdb(&["put", &d, k, "v"]).ok();
    }
    let args = ["--prefix", "p:", "--from", "p:b", "--to", "p:d"];
    assert_eq!(scanned_keys(&d, &args), ["p:b", "p:c"]);
    let mut del = vec!["delete-range", d.as_str()];
    del.extend_from_slice(&args);
    assert!(flexdb(&del).ok().contains("\npairs   2\n"));
    assert_eq!(scanned_keys(&d, &["--prefix", "p"]), ["p:a", "p:d"]);
    assert_eq!(
        scanned_keys(&d, &["--from", "q"]),
        ["q", "u", "user", "user;", "users"]
    );
}

#[test]
fn delete_range_with_an_open_end_removes_through_the_last_key() {
    let (_tmp, d) = loaded(100);
    let out = flexdb(&["delete-range", &d, "--from", "k075"]).ok();
    assert_eq!(
        out,
        "start   k075\nend     (after the last key)\npairs   25\nstatus  removed\n"
    );
    assert_eq!(scanned_keys(&d, &[]), ks(0..75));
    // And an open start: from the first key.
    let out = flexdb(&["delete-range", &d, "--to", "k010"]).ok();
    assert!(
        out.starts_with("start   (first key)\nend     k010\npairs   10\n"),
        "{out}"
    );
    assert_eq!(scanned_keys(&d, &[]), ks(10..75));
}

#[test]
fn delete_range_dry_run_counts_and_changes_nothing() {
    let (_tmp, d) = loaded(100);
    let before = flexdb(&["dump", &d]).ok();
    let out = flexdb(&[
        "delete-range",
        &d,
        "--from",
        "k010",
        "--to",
        "k020",
        "--dry-run",
    ])
    .ok();
    assert_eq!(
        out,
        "start   k010\nend     k020\npairs   10\nstatus  dry run: nothing removed\n"
    );
    let all = flexdb(&["delete-range", &d, "--all", "--dry-run", "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&all).unwrap();
    assert_eq!(
        (v["pairs"].as_u64(), &v["removed"]),
        (Some(100), &false.into())
    );
    assert_eq!(flexdb(&["dump", &d]).ok(), before);
    assert_eq!(flexdb(&["get", &d, "k015"]).ok(), "v15\n");
}

#[test]
fn delete_range_of_every_key_needs_all() {
    let (_tmp, d) = loaded(20);
    let before = flexdb(&["dump", &d]).ok();
    flexdb(&["delete-range", &d]).fails(code::USAGE, &[&d, "no range given", "--all"]);
    // Bounds that take in every key count as none.
    flexdb(&["delete-range", &d, "--prefix", ""]).fails(code::USAGE, &[&d, "--all"]);
    flexdb(&["delete-range", &d, "--from", ""]).fails(code::USAGE, &[&d, "--all"]);
    // --all with a bound is a usage error (clap's, several lines).
    let run = flexdb(&["delete-range", &d, "--all", "--from", "k005"]);
    assert_eq!(run.code, Some(code::USAGE), "{}", run.stderr);
    assert!(run.stderr.contains("cannot be used with"), "{}", run.stderr);
    assert_eq!(
        flexdb(&["dump", &d]).ok(),
        before,
        "a refusal changed the store"
    );
    let out = flexdb(&["delete-range", &d, "--all"]).ok();
    assert_eq!(
        out,
        "start   (first key)\nend     (after the last key)\npairs   20\nstatus  removed\n"
    );
    assert_eq!(scanned_keys(&d, &[]), Vec::<String>::new());
    assert_eq!(flexdb(&["get", &d, "k000"]).code, Some(code::NOT_FOUND_KEY));
}

#[test]
fn delete_range_refuses_bad_bounds_and_stores_with_nothing_changed() {
    let (tmp, d) = loaded(50);
    let before = flexdb(&["dump", &d]).ok();
    let line = flexdb(&["delete-range", &d, "--from", "k040", "--to", "k010"])
        .fails(code::BAD_INPUT, &[&d]);
    assert!(
        line.contains("--from \"k040\" is past --to \"k010\""),
        "{line}"
    );
    flexdb(&[
        "delete-range",
        &d,
        "--from",
        "k040",
        "--to",
        "k010",
        "--dry-run",
    ])
    .fails(code::BAD_INPUT, &["is past"]);
    let big = "k".repeat(flexdb::MAX_KEY_LEN + 1);
    flexdb(&["delete-range", &d, "--from", &big])
        .fails(code::BAD_INPUT, &[&d, "exceeds the limit"]);
    flexdb(&["delete-range", &d, "--to", &big])
        .fails(code::BAD_INPUT, &["--to", "exceeds the limit"]);
    flexdb(&["delete-range", &d, "--from", "zz", "--hex"])
        .fails(code::BAD_INPUT, &["--from", "invalid hex"]);
    // Equal bounds: an empty range, not an error.
    let out = flexdb(&["delete-range", &d, "--from", "k010", "--to", "k010"]).ok();
    assert!(out.contains("\npairs   0\n"), "{out}");
    assert_eq!(flexdb(&["dump", &d]).ok(), before);
    // No store: nothing created.
    let missing = tmp.path().join("missing");
    flexdb(&["delete-range", p(&missing), "--from", "a"])
        .fails(code::NO_STORE, &[p(&missing), "no FlexDB store here"]);
    assert!(!missing.exists());
    // A store open in another process (here: this one) is locked.
    let db = flexdb::Db::open(&d, flexdb::Options::new()).unwrap();
    flexdb(&["delete-range", &d, "--from", "k000", "--to", "k010"])
        .fails(code::LOCKED, &[&d, "locked"]);
    db.close().unwrap();
    assert_eq!(flexdb(&["dump", &d]).ok(), before);
}

#[test]
fn delete_range_json_report_parses() {
    let (_tmp, d) = loaded(30);
    let out = flexdb(&[
        "delete-range",
        &d,
        "--from",
        "k005",
        "--to",
        "k015",
        "--json",
    ])
    .ok();
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["start"], "k005");
    assert_eq!(v["end"], "k015");
    assert_eq!(v["pairs"], 10);
    assert_eq!(v["removed"], true);
    assert_eq!(v.as_object().unwrap().len(), 4, "{out}");
    // Keys in the selected encoding; an open end is null.
    let out = flexdb(&[
        "delete-range",
        &d,
        "--from",
        "6b303235",
        "--hex",
        "--json",
        "--dry-run",
    ])
    .ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["start"], "6b303235");
    assert_eq!(v["end"], serde_json::Value::Null);
    assert_eq!(v["pairs"], 5);
    assert_eq!(v["removed"], false);
}
