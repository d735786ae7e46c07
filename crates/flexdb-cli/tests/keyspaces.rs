//! Keyspaces through the built binary: `--keyspace` on the commands on
//! pairs (isolation between keyspaces and from the default one),
//! `keyspaces`, `drop-keyspace`, reads of a missing keyspace that create
//! nothing, bad names, and the whole-store commands that refuse the flag.

mod common;

use common::{code, flexdb, flexdb_in, p};

fn store() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = p(&tmp.path().join("db")).to_string();
    (tmp, dir)
}

/// `flexdb ARGS --keyspace KS`.
fn in_ks(ks: &str, args: &[&str]) -> common::Run {
    let mut all = args.to_vec();
    all.extend(["--keyspace", ks]);
    flexdb(&all)
}

/// The `keyspaces` listing as (name, pairs).
fn listed(d: &str) -> Vec<(String, u64)> {
    flexdb(&["keyspaces", d])
        .ok()
        .lines()
        .map(|l| {
            let (name, pairs) = l.split_once('\t').expect("NAME<TAB>PAIRS");
            (name.to_string(), pairs.parse().expect("a count"))
        })
        .collect()
}

fn names(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[test]
fn put_get_del_and_scan_are_isolated_by_keyspace() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "k", "default"]).ok();
    in_ks("a", &["put", &d, "k", "in a"]).ok();
    in_ks("b", &["put", &d, "k", "in b"]).ok();
    in_ks("a", &["put", &d, "only-a", "1"]).ok();
    assert_eq!(flexdb(&["get", &d, "k"]).ok(), "default\n");
    assert_eq!(in_ks("default", &["get", &d, "k"]).ok(), "default\n");
    assert_eq!(in_ks("a", &["get", &d, "k"]).ok(), "in a\n");
    assert_eq!(in_ks("b", &["get", &d, "k"]).ok(), "in b\n");
    // A key of one keyspace is absent from the others (status 1).
    assert_eq!(
        in_ks("b", &["get", &d, "only-a"]).code,
        Some(code::NOT_FOUND_KEY)
    );
    assert_eq!(
        flexdb(&["get", &d, "only-a"]).code,
        Some(code::NOT_FOUND_KEY)
    );
    assert_eq!(flexdb(&["scan", &d]).ok(), "k\tdefault\n");
    assert_eq!(in_ks("a", &["scan", &d]).ok(), "k\tin a\nonly-a\t1\n");
    assert_eq!(in_ks("b", &["scan", &d, "--keys-only"]).ok(), "k\n");
    assert_eq!(
        in_ks("a", &["scan", &d, "--reverse", "--limit", "1"]).ok(),
        "only-a\t1\n"
    );
    // del in one keyspace leaves the same key of the others.
    in_ks("a", &["del", &d, "k"]).ok();
    assert_eq!(
        in_ks("a", &["get", &d, "k"]).code,
        Some(code::NOT_FOUND_KEY)
    );
    assert_eq!(in_ks("b", &["get", &d, "k"]).ok(), "in b\n");
    assert_eq!(flexdb(&["get", &d, "k"]).ok(), "default\n");
    flexdb(&["del", &d, "k"]).ok();
    assert_eq!(in_ks("b", &["get", &d, "k"]).ok(), "in b\n");
    assert_eq!(in_ks("a", &["get", &d, "only-a"]).ok(), "1\n");
    // Encodings work within a keyspace as without.
    in_ks("b", &["put", &d, "00ff", "c0ffee", "--hex"]).ok();
    assert_eq!(
        in_ks("b", &["scan", &d, "--hex"]).ok(),
        "00ff\tc0ffee\n6b\t696e2062\n"
    );
}

#[test]
fn delete_range_removes_only_from_its_keyspace() {
    let (_tmp, d) = store();
    let input: String = (0..20).map(|i| format!("k{i:02}\tv{i}\n")).collect();
    for ks in ["default", "a", "b"] {
        flexdb_in(
            &["load", &d, "--format", "tsv", "-q", "--keyspace", ks],
            input.as_bytes(),
        )
        .ok();
    }
    let out = in_ks(
        "a",
        &["delete-range", &d, "--from", "k05", "--to", "k15", "--json"],
    )
    .ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["pairs"].as_u64(), &v["removed"]),
        (Some(10), &true.into())
    );
    let dry = in_ks("b", &["delete-range", &d, "--all", "--dry-run"]).ok();
    assert!(dry.contains("\npairs   20\n"), "{dry}");
    let all = in_ks("b", &["delete-range", &d, "--all"]).ok();
    assert!(all.contains("\npairs   20\nstatus  removed\n"), "{all}");
    // The emptied keyspace stays, and the others keep their pairs.
    assert_eq!(listed(&d), names(&[("default", 20), ("a", 10), ("b", 0)]));
    assert_eq!(flexdb(&["get", &d, "k10"]).ok(), "v10\n");
    assert_eq!(in_ks("a", &["get", &d, "k04"]).ok(), "v4\n");
    assert_eq!(
        in_ks("a", &["get", &d, "k10"]).code,
        Some(code::NOT_FOUND_KEY)
    );
    // Without --keyspace it is the default keyspace's range.
    flexdb(&["delete-range", &d, "--prefix", "k1"]).ok();
    assert_eq!(listed(&d), names(&[("default", 10), ("a", 10), ("b", 0)]));
    flexdb(&["check", &d]).ok();
}

#[test]
fn load_and_dump_work_on_one_keyspace() {
    let (tmp, d) = store();
    let a_pairs = "{\"key\":\"x\",\"value\":\"1\"}\n{\"key\":\"y\",\"value\":\"2\"}\n";
    let file = tmp.path().join("a.jsonl");
    std::fs::write(&file, a_pairs).unwrap();
    flexdb(&["load", &d, p(&file), "-q", "--keyspace", "a"]).ok();
    flexdb_in(
        &["load", &d, "-q"],
        b"{\"key\":\"x\",\"value\":\"default\"}\n",
    )
    .ok();
    // dump without --keyspace: the default keyspace only.
    assert_eq!(
        flexdb(&["dump", &d]).ok(),
        "{\"key\":\"x\",\"value\":\"default\"}\n"
    );
    assert_eq!(in_ks("a", &["dump", &d]).ok(), a_pairs);
    // A dump of one keyspace loads into another as the same pairs.
    let out = tmp.path().join("a.csv");
    in_ks("a", &["dump", &d, p(&out), "--format", "csv", "-q"]).ok();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "x,1\ny,2\n");
    in_ks("copy", &["load", &d, p(&out), "--format", "csv", "-q"]).ok();
    assert_eq!(in_ks("copy", &["dump", &d]).ok(), a_pairs);
    assert_eq!(listed(&d), names(&[("default", 1), ("a", 2), ("copy", 2)]));
    // A malformed line: the pairs before it are in the keyspace, none
    // elsewhere.
    let run = flexdb_in(
        &["load", &d, "-q", "--keyspace", "bad"],
        b"{\"key\":\"z\",\"value\":\"1\"}\nnot json\n",
    );
    run.fails(
        code::BAD_INPUT,
        &["line 2", "the 1 pairs before it were loaded"],
    );
    assert_eq!(in_ks("bad", &["get", &d, "z"]).ok(), "1\n");
    assert_eq!(flexdb(&["get", &d, "z"]).code, Some(code::NOT_FOUND_KEY));
}

#[test]
fn keyspaces_lists_names_with_their_pairs() {
    let (_tmp, d) = store();
    // A fresh store: the default keyspace alone.
    flexdb(&["put", &d, "k", "v"]).ok();
    assert_eq!(flexdb(&["keyspaces", &d]).ok(), "default\t1\n");
    for (ks, n) in [("zeta", 3), ("alpha", 2), ("tab\tname", 1)] {
        for i in 0..n {
            in_ks(ks, &["put", &d, &format!("k{i}"), "v"]).ok();
        }
    }
    // "default" first, then by name; names escaped as in scan output.
    assert_eq!(
        flexdb(&["keyspaces", &d]).ok(),
        "default\t1\nalpha\t2\ntab\\tname\t1\nzeta\t3\n"
    );
    let out = flexdb(&["keyspaces", &d, "--json"]).ok();
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        serde_json::json!([
            {"name": "default", "pairs": 1},
            {"name": "alpha", "pairs": 2},
            {"name": "tab\tname", "pairs": 1},
            {"name": "zeta", "pairs": 3},
        ])
    );
    // No store: status 3, nothing created.
    let missing = format!("{d}-missing");
    flexdb(&["keyspaces", &missing]).fails(code::NO_STORE, &[&missing, "no FlexDB store here"]);
    assert!(!std::path::Path::new(&missing).exists());
}

#[test]
fn drop_keyspace_removes_one_and_the_others_keep_their_pairs() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "k", "default"]).ok();
    for ks in ["a", "b", "c"] {
        for i in 0..3 {
            in_ks(ks, &["put", &d, &format!("k{i}"), ks]).ok();
        }
    }
    in_ks("a", &["put", &d, "k9", "a"]).ok();
    let out = flexdb(&["drop-keyspace", &d, "a"]).ok();
    assert_eq!(out, "keyspace  a\npairs     4\nstatus    dropped\n");
    let out = flexdb(&["drop-keyspace", &d, "b", "--json", "-q"]).ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"keyspace": "b", "pairs": 3, "dropped": true})
    );
    assert_eq!(listed(&d), names(&[("default", 1), ("c", 3)]));
    assert_eq!(
        in_ks("c", &["scan", &d, "--keys-only"]).ok(),
        "k0\nk1\nk2\n"
    );
    assert_eq!(flexdb(&["get", &d, "k"]).ok(), "default\n");
    // The dropped keyspace is gone: reads fail, a drop again fails.
    in_ks("a", &["get", &d, "k0"]).fails(code::NO_STORE, &[&d, "no keyspace \"a\""]);
    flexdb(&["drop-keyspace", &d, "a"]).fails(code::NO_STORE, &[&d, "no keyspace \"a\""]);
    flexdb(&["drop-keyspace", &d, "never", "--json"])
        .fails(code::NO_STORE, &["no keyspace \"never\""]);
    // The default keyspace cannot be dropped (usage, nothing changes).
    flexdb(&["drop-keyspace", &d, "default"])
        .fails(code::USAGE, &[&d, "default keyspace cannot be dropped"]);
    assert_eq!(flexdb(&["get", &d, "k"]).ok(), "default\n");
    // A keyspace made again under a dropped name starts empty.
    in_ks("a", &["put", &d, "new", "1"]).ok();
    assert_eq!(in_ks("a", &["scan", &d]).ok(), "new\t1\n");
    assert_eq!(listed(&d), names(&[("default", 1), ("a", 1), ("c", 3)]));
    flexdb(&["check", &d]).ok();
    // No store: nothing created.
    let missing = format!("{d}-missing");
    flexdb(&["drop-keyspace", &missing, "a"]).fails(code::NO_STORE, &["no FlexDB store here"]);
    assert!(!std::path::Path::new(&missing).exists());
}

#[test]
fn reads_and_deletes_of_a_missing_keyspace_fail_and_create_nothing() {
    let (tmp, d) = store();
    flexdb(&["put", &d, "k", "v"]).ok();
    in_ks("real", &["put", &d, "k", "v"]).ok();
    let out = tmp.path().join("out.jsonl");
    let cases: [&[&str]; 7] = [
        &["get", &d, "k"],
        &["scan", &d],
        &["dump", &d],
        &["dump", &d, p(&out)],
        &["del", &d, "k"],
        &["delete-range", &d, "--all"],
        &["delete-range", &d, "--prefix", "k", "--dry-run"],
    ];
    for args in cases {
        let run = in_ks("ghost", args);
        run.fails(code::NO_STORE, &[&d, "no keyspace \"ghost\" in this store"]);
        assert!(run.stdout.is_empty(), "{args:?}");
    }
    assert!(!out.exists(), "dump made its output file");
    assert_eq!(listed(&d), names(&[("default", 1), ("real", 1)]));
    // A missing store stays missing whatever the keyspace.
    let missing = tmp.path().join("none");
    in_ks("ghost", &["get", p(&missing), "k"]).fails(code::NO_STORE, &["no FlexDB store here"]);
    assert!(!missing.exists());
}

#[test]
fn bad_keyspace_names_exit_8_and_change_nothing() {
    let (_tmp, d) = store();
    let long = "n".repeat(flexdb::MAX_KEYSPACE_NAME_LEN + 1);
    // Before the store exists: a bad name creates nothing.
    for name in ["", long.as_str()] {
        in_ks(name, &["put", &d, "k", "v"]).fails(code::BAD_INPUT, &["keyspace name"]);
        flexdb_in(
            &["load", &d, "-q", "--keyspace", name],
            b"{\"key\":\"k\",\"value\":\"v\"}\n",
        )
        .fails(code::BAD_INPUT, &["keyspace name"]);
        assert!(
            !std::path::Path::new(&d).exists(),
            "{name:?} made the store"
        );
    }
    flexdb(&["put", &d, "k", "v"]).ok();
    in_ks("", &["get", &d, "k"]).fails(code::BAD_INPUT, &["keyspace name \"\": empty"]);
    in_ks(&long, &["scan", &d]).fails(code::BAD_INPUT, &["256 bytes, over the limit of 255"]);
    for args in [
        &["del", d.as_str(), "k"][..],
        &["dump", &d],
        &["delete-range", &d, "--all"],
    ] {
        in_ks("", args).fails(code::BAD_INPUT, &["keyspace name"]);
    }
    flexdb(&["drop-keyspace", &d, ""]).fails(code::BAD_INPUT, &["keyspace name"]);
    flexdb(&["drop-keyspace", &d, &long]).fails(code::BAD_INPUT, &["keyspace name"]);
    flexdb_in(&["shell", &d, "--keyspace", ""], b"get k\n")
        .fails(code::BAD_INPUT, &["keyspace name"]);
    assert_eq!(listed(&d), names(&[("default", 1)]));
    // The longest name is fine.
    let max = "n".repeat(flexdb::MAX_KEYSPACE_NAME_LEN);
    in_ks(&max, &["put", &d, "k", "max"]).ok();
    assert_eq!(in_ks(&max, &["get", &d, "k"]).ok(), "max\n");
    assert_eq!(flexdb(&["get", &d, "k"]).ok(), "v\n");
}

#[test]
fn whole_store_commands_refuse_keyspace() {
    let (tmp, d) = store();
    flexdb(&["put", &d, "k", "v"]).ok();
    let backup = tmp.path().join("b");
    for args in [
        &["stats", d.as_str()][..],
        &["check", &d],
        &["compact", &d],
        &["backup", &d, p(&backup)],
        &["repair", &d],
        &["keyspaces", &d],
    ] {
        let run = in_ks("default", args);
        assert_eq!(run.code, Some(code::USAGE), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("'--keyspace'"), "{}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
    }
    assert!(!backup.exists());
    assert_eq!(flexdb(&["get", &d, "k"]).ok(), "v\n");
}

#[test]
fn backup_copies_every_keyspace() {
    let (tmp, d) = store();
    flexdb(&["put", &d, "k", "default"]).ok();
    in_ks("a", &["put", &d, "k", "a"]).ok();
    let dest = tmp.path().join("b");
    flexdb(&["backup", &d, p(&dest), "-q"]).ok();
    let b = p(&dest);
    assert_eq!(listed(b), names(&[("default", 1), ("a", 1)]));
    assert_eq!(in_ks("a", &["get", b, "k"]).ok(), "a\n");
    assert_eq!(flexdb(&["get", b, "k"]).ok(), "default\n");
}
