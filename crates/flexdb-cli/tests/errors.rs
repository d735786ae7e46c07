//! Failures that the command detects before it reaches the store: usage
//! errors, missing stores, paths that are not directories, bad hex/base64
//! arguments, missing input files. Each exits with its documented status
//! and one line on stderr, and none creates a store.

mod common;

use common::{code, flexdb, flexdb_in, p};

#[test]
fn help_and_version_succeed() {
    let help = flexdb(&["--help"]).ok();
    for cmd in [
        "put",
        "get",
        "del",
        "scan",
        "delete-range",
        "load",
        "dump",
        "keyspaces",
        "drop-keyspace",
        "stats",
        "check",
        "compact",
        "shell",
    ] {
        assert!(help.contains(cmd), "{cmd} missing from --help");
    }
    assert!(flexdb(&["--version"]).ok().starts_with("flexdb "));
    assert!(flexdb(&["scan", "--help"]).ok().contains("--reverse"));
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["get", "/tmp/db"],
        &["put", "/tmp/db", "k"],
        &["get", "/tmp/db", "k", "--hex", "--base64"],
        &["load", "/tmp/db", "--format", "xml"],
        &["load", "/tmp/db", "--batch-size", "0"],
        &["scan", "/tmp/db", "--limit", "-1"],
        &["stats", "/tmp/db", "--bogus"],
    ] {
        let run = flexdb(args);
        assert_eq!(run.code, Some(code::USAGE), "{args:?}: {}", run.stderr);
        assert!(!run.stderr.is_empty(), "{args:?}");
        assert!(!run.stderr.contains("panicked"));
    }
}

#[test]
fn read_commands_on_a_missing_store_exit_3_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nothing-here");
    let d = p(&dir);
    for args in [
        &["get", d, "k"][..],
        &["del", d, "k"],
        &["scan", d],
        &["dump", d],
        &["stats", d],
        &["check", d],
        &["compact", d],
        &["shell", d],
        &["keyspaces", d],
        &["drop-keyspace", d, "users"],
        &["scan", d, "--keyspace", "users"],
    ] {
        flexdb(args).fails(code::NO_STORE, &[d, "no FlexDB store here"]);
        assert!(!dir.exists(), "{args:?} created the directory");
    }
}

#[test]
fn a_file_is_not_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plain.txt");
    std::fs::write(&file, b"hello").unwrap();
    let f = p(&file);
    for args in [&["get", f, "k"][..], &["put", f, "k", "v"], &["check", f]] {
        flexdb(args).fails(code::NOT_A_STORE, &[f, "not a FlexDB store"]);
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"hello");
}

#[test]
fn bad_hex_and_base64_arguments_exit_8_before_touching_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = p(&dir);
    let line =
        flexdb(&["put", d, "abc", "00", "--hex"]).fails(code::BAD_INPUT, &["key", "invalid hex"]);
    assert!(line.contains("odd number of digits"), "{line}");
    flexdb(&["put", d, "00", "zz", "--hex"])
        .fails(code::BAD_INPUT, &["value \"zz\"", "invalid hex"]);
    flexdb(&["put", d, "a$b", "", "--base64"]).fails(code::BAD_INPUT, &["key", "invalid base64"]);
    flexdb(&["get", d, "xx", "--hex"]).fails(code::BAD_INPUT, &["invalid hex"]);
    flexdb(&["del", d, "!", "--base64"]).fails(code::BAD_INPUT, &["invalid base64"]);
    flexdb(&["scan", d, "--from", "q", "--hex"]).fails(code::BAD_INPUT, &["--from", "invalid hex"]);
    flexdb(&["scan", d, "--prefix", "*", "--base64"]).fails(code::BAD_INPUT, &["--prefix"]);
    assert!(!dir.exists(), "a failed put created the store");
}

#[test]
fn load_from_a_missing_file_or_a_directory_exits_7_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let input = tmp.path().join("missing.jsonl");
    flexdb(&["load", p(&dir), p(&input)]).fails(code::IO, &[p(&input)]);
    assert!(!dir.exists());
    flexdb(&["load", p(&dir), p(tmp.path())]).fails(code::IO, &[p(tmp.path()), "is a directory"]);
    assert!(!dir.exists());
}

#[test]
fn load_into_a_file_path_exits_4() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let run = flexdb_in(&["load", p(&file)], b"{\"key\":\"a\",\"value\":\"b\"}\n");
    run.fails(code::NOT_A_STORE, &["not a directory"]);
}
