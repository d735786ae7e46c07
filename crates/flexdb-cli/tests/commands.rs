//! put, get, del, scan, stats and check against real stores, through the
//! built binary.

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
    assert_eq!(json.as_object().unwrap().len(), 44);
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
    assert!(v["disk_bytes"].as_u64().unwrap() > 0, "{out}");
    assert_eq!(v["dest"], p(&dest));
    assert_eq!(flexdb(&["scan", p(&dest)]).ok(), flexdb(&["scan", &d]).ok());
    assert_eq!(flexdb(&["get", p(&dest), "k0499"]).ok(), "v499\n");
    flexdb(&["check", p(&dest)]).ok();
    // Text form; and a destination that is not empty is refused.
    let text = flexdb(&["backup", &d, p(&tmp.path().join("c"))]).ok();
    assert!(text.contains("\npairs       499\n"), "{text}");
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
