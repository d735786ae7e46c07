//! Errors that come from the store itself: an empty directory, a directory
//! of foreign files, a store locked by another process, corruption. Each
//! has its documented exit status and one line on stderr naming the path.
//! (A store open elsewhere is locked for the commands that write only: the
//! read commands open it read-only.)

mod common;

use std::path::{Path, PathBuf};

use common::{code, flexdb, p};

#[test]
fn an_empty_directory_is_no_store_for_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let d = p(tmp.path());
    flexdb(&["get", d, "k"]).fails(code::NO_STORE, &[d, "no FlexDB store here"]);
    flexdb(&["stats", d]).fails(code::NO_STORE, &[d]);
    // A write creates the store in it.
    flexdb(&["put", d, "k", "v"]).ok();
    assert_eq!(flexdb(&["get", d, "k"]).ok(), "v\n");
}

#[test]
fn a_directory_of_foreign_files_is_not_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let d = p(tmp.path());
    std::fs::write(tmp.path().join("notes.txt"), b"my notes").unwrap();
    std::fs::write(tmp.path().join("data"), [0x5au8; 4096]).unwrap();
    std::fs::create_dir(tmp.path().join("photos")).unwrap();
    for args in [
        &["get", d, "k"][..],
        &["scan", d],
        &["check", d],
        &["put", d, "k", "v"],
    ] {
        flexdb(args).fails(code::NOT_A_STORE, &[d, "not a FlexDB store"]);
    }
    assert_eq!(
        std::fs::read(tmp.path().join("notes.txt")).unwrap(),
        b"my notes"
    );
    assert_eq!(
        std::fs::read(tmp.path().join("data")).unwrap(),
        [0x5au8; 4096]
    );
}

/// A store another process has open for writing: the commands that write
/// are refused (locked); the read commands open read-only and read it,
/// the writes still in its logs included, while it stays open and writes.
#[test]
fn a_store_open_elsewhere_is_locked_for_writes_and_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let d = p(tmp.path());
    let db = flexdb::Db::open(tmp.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    db.put(b"k", b"v").unwrap();
    for args in [&["put", d, "k", "w"][..], &["compact", d], &["load", d]] {
        flexdb(args).fails(code::LOCKED, &[d, "locked"]);
    }
    // Not flushed: read from the writer's log.
    assert_eq!(flexdb(&["get", d, "k"]).ok(), "v\n");
    for i in 0..50 {
        db.put(format!("s{i:02}"), format!("{i}")).unwrap();
    }
    let scanned = flexdb(&["scan", d, "--prefix", "s"]).ok();
    assert_eq!(scanned.lines().count(), 50, "{scanned}");
    assert!(flexdb(&["dump", d]).ok().lines().count() >= 51);
    flexdb(&["check", d]).ok();
    let stats = flexdb(&["stats", d, "--json"]).ok();
    assert!(stats.contains("\"pairs\""), "{stats}");
    // The writer goes on, and a read sees it.
    db.put(b"k", b"w").unwrap();
    assert_eq!(flexdb(&["get", d, "k"]).ok(), "w\n");
    db.close().unwrap();
    assert_eq!(flexdb(&["get", d, "k"]).ok(), "w\n");
}

/// Every file named `name` under `dir`.
fn find(dir: &Path, name: &str, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            find(&path, name, found);
        } else if path.file_name().is_some_and(|n| n == name) {
            found.push(path);
        }
    }
}

#[test]
fn flipped_bytes_in_the_data_file_are_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let d = p(tmp.path());
    let input: String = (0..2000)
        .map(|i| format!("key{i:05}\t{}\n", "value".repeat(8)))
        .collect();
    common::flexdb_in(&["load", d, "--format", "tsv", "-q"], input.as_bytes()).ok();
    assert!(flexdb(&["check", d]).ok().contains("status          ok"));
    let mut data = Vec::new();
    find(tmp.path(), "data", &mut data);
    assert_eq!(data.len(), 1, "one data file in the store: {data:?}");
    let mut bytes = std::fs::read(&data[0]).unwrap();
    // The pairs are the non-zero bytes of the (sparse) data file: flip a
    // run of them in the middle.
    let used: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
    assert!(used.len() > 50_000, "the pairs are in the data file");
    for &i in &used[used.len() / 2..used.len() / 2 + 4096] {
        bytes[i] ^= 0xff;
    }
    std::fs::write(&data[0], &bytes).unwrap();
    // Whether opening or the check finds it, the status is 6.
    let run = flexdb(&["check", d]);
    assert_eq!(
        run.code,
        Some(code::CORRUPT),
        "stdout: {}; stderr: {}",
        String::from_utf8_lossy(&run.stdout),
        run.stderr
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.starts_with("flexdb: "), "{}", run.stderr);
    assert!(run.stderr.contains(d), "names the store: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"));
    // Reading every pair meets the damage too: status 6, naming the store.
    for args in [&["scan", d][..], &["dump", d]] {
        flexdb(args).fails(code::CORRUPT, &[d, "corrupt"]);
    }
    // `repair --into` salvages the rest into a store that checks clean and
    // lists the lost key ranges; the damaged store stays as it was.
    let new = tmp.path().with_extension("repaired");
    let n = p(&new);
    let report: serde_json::Value =
        serde_json::from_str(&flexdb(&["repair", d, "--into", n, "--json"]).ok()).unwrap();
    assert_eq!(report["complete"], false, "{report}");
    let lost = report["lost"].as_array().unwrap();
    assert!(!lost.is_empty(), "{report}");
    let pairs = report["pairs"].as_u64().unwrap();
    assert!(pairs > 1000 && pairs < 2000, "{report}");
    assert!(flexdb(&["check", n]).ok().contains("status          ok"));
    assert_eq!(
        flexdb(&["scan", n]).ok().lines().count() as u64,
        pairs,
        "every salvaged pair reads back"
    );
    assert_eq!(std::fs::read(&data[0]).unwrap(), bytes);
    // In place: the text report, then the store under its own name.
    let text = flexdb(&["repair", d, "-q"]).ok();
    assert!(text.contains("status    incomplete"), "{text}");
    assert!(text.contains("lost: data: the record at offset"), "{text}");
    assert!(text.contains("original  "), "{text}");
    assert!(flexdb(&["check", d]).ok().contains("status          ok"));
    std::fs::remove_dir_all(&new).unwrap();
    let original = text
        .lines()
        .find_map(|l| l.strip_prefix("original  "))
        .unwrap();
    assert!(Path::new(original).join("data").exists());
    std::fs::remove_dir_all(original).unwrap();
}
