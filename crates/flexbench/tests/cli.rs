//! Runs the built `flexbench` binary: JSON output shape and argument errors
//! (never speed).

use std::process::Command;

fn flexbench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flexbench"))
        .args(args)
        .output()
        .expect("run flexbench")
}

/// Runs flexbench, which must succeed, and returns its standard output.
fn flexbench_ok(args: &[&str]) -> String {
    let out = flexbench(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
fn tree_json_lines_have_the_documented_keys() {
    let text = flexbench_ok(&[
        "tree",
        "--extents",
        "2000",
        "--json",
        "--phase-seconds",
        "0.2",
    ]);
    let mut ops = std::collections::BTreeSet::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("one JSON object per line");
        let structure = v["structure"].as_str().unwrap();
        assert!(["flextree", "btree", "array"].contains(&structure));
        assert_eq!(v["extents"].as_u64(), Some(2000));
        let op = v["op"].as_str().unwrap().to_string();
        if op == "memory" {
            assert!(v["bytes_per_extent"].as_f64().unwrap() > 0.0);
        } else {
            let mops = v["mops"].as_f64().unwrap();
            assert!(mops > 0.0);
            // The median of the default five runs, between the extremes.
            assert_eq!(v["repeats"].as_u64(), Some(5), "{line}");
            assert!(v["mops_min"].as_f64().unwrap() <= mops, "{line}");
            assert!(v["mops_max"].as_f64().unwrap() >= mops, "{line}");
            assert!(v["ops"].as_u64().unwrap() > 0, "{line}");
        }
        ops.insert((structure.to_string(), op));
    }
    // 3 structures x (insert, append, lookup, range, memory).
    assert_eq!(ops.len(), 15);
}

#[test]
fn tree_repeat_sets_the_number_of_runs() {
    let text = flexbench_ok(&[
        "tree",
        "--extents",
        "2000",
        "--structures",
        "flextree",
        "--repeat",
        "2",
        "--json",
    ]);
    let mut phases = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["op"] != "memory" {
            assert_eq!(v["repeats"].as_u64(), Some(2), "{line}");
            phases += 1;
        }
    }
    assert_eq!(phases, 4);
    let out = flexbench(&["tree", "--extents", "2000", "--repeat", "3"]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("min") && table.contains("max"), "{table}");
    assert!(table.contains("median of 3 runs"), "{table}");
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let out = flexbench(&["tree", "--structures", "nonsense"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown structure"));
    let out = flexbench(&["tree", "--extents", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = flexbench(&["tree", "--repeat", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--repeat"));
    let out = flexbench(&["no-such-command"]);
    assert!(!out.status.success());
}

#[test]
fn space_json_lines_have_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let text = flexbench_ok(&[
        "space",
        "--pattern",
        "rand-insert",
        "--total",
        "8M",
        "--read-seconds",
        "0.2",
        "--dir",
        d,
        "--json",
    ]);
    let phases: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["target"], "flexspace");
            assert_eq!(v["data_bytes"].as_u64(), Some(8 << 20));
            assert!(v["mbps"].as_f64().unwrap() > 0.0);
            v["phase"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        phases,
        [
            "write",
            "seq-read-cold",
            "seq-read-warm",
            "rand-read-cold",
            "rand-read-warm"
        ]
    );
    let text = flexbench_ok(&[
        "space",
        "--pattern",
        "seq-write",
        "--total",
        "8M",
        "--reader-latency",
        "--dir",
        d,
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["phase"], "read-during-write");
    for k in [
        "plan_p50_us",
        "plan_max_us",
        "read_p99_us",
        "write_lock_max_us",
    ] {
        assert!(v[k].as_f64().unwrap() >= 0.0, "{k}");
    }
}

/// Every diagnostic runs to the end on a tiny size and prints its figures.
#[test]
fn diagnostics_run_on_tiny_sizes() {
    let out = flexbench_ok(&["diag", "tree-insert", "--extents", "2000", "--trials", "1"]);
    assert!(out.contains("2000 extents"), "{out}");
    assert!(out.contains("trial 0: insert"), "{out}");
    let out = flexbench_ok(&[
        "diag",
        "scattered-copy",
        "--mib",
        "1",
        "--reads",
        "100",
        "--rounds",
        "1",
    ]);
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(out.contains("pread"), "{out}");
    let out = flexbench_ok(&["diag", "commit", "--pairs", "2000", "--memtable-mb", "1"]);
    assert!(out.contains("load 2000:"), "{out}");
    assert!(out.contains("update 500:"), "{out}");
    assert!(out.contains("pairs: 2000"), "{out}");
    let out = flexbench_ok(&[
        "diag",
        "log-replay",
        "--extents",
        "2000",
        "--levels-mib",
        "1",
    ]);
    assert!(out.contains("built 2000 extents"), "{out}");
    assert_eq!(out.lines().count(), 3, "{out}");
    let out = flexbench_ok(&[
        "diag", "snapshot", "--pairs", "2000", "--ops", "1000", "--rounds", "1",
    ]);
    assert!(out.contains("snapshot taken and dropped"), "{out}");
    assert!(out.contains("(1000 live)"), "{out}");
    let out = flexbench_ok(&["diag", "sparse-index", "--pairs", "5000"]);
    assert!(!out.is_empty());
    let out = flexbench_ok(&["diag", "memtable-walk", "--pairs", "5000"]);
    assert!(!out.is_empty());
}

/// `--trace` sends the engines' diagnostic events to stderr, and nothing
/// is printed there without it.
#[test]
fn trace_flag_prints_engine_events_on_stderr() {
    let run = |trace: bool| {
        let mut args = vec!["diag", "commit", "--pairs", "2000", "--memtable-mb", "1"];
        if trace {
            args.insert(0, "--trace");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_flexbench"))
            .args(&args)
            .env_remove("RUST_LOG")
            .env_remove("FLEXDB_TRACE")
            .output()
            .expect("run flexbench");
        assert!(out.status.success());
        String::from_utf8(out.stderr).expect("UTF-8")
    };
    assert_eq!(run(false), "");
    let traced = run(true);
    assert!(traced.contains("flexdb"), "{traced}");
}
