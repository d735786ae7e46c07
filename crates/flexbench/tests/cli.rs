//! Runs the built `flexbench` binary: JSON output shape and argument errors
//! (never speed).

use std::process::Command;

fn flexbench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flexbench"))
        .args(args)
        .output()
        .expect("run flexbench")
}

#[test]
fn tree_json_lines_have_the_documented_keys() {
    let out = flexbench(&[
        "tree",
        "--extents",
        "2000",
        "--json",
        "--phase-seconds",
        "0.2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
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
            assert!(v["mops"].as_f64().unwrap() > 0.0);
        }
        ops.insert((structure.to_string(), op));
    }
    // 3 structures x (insert, append, lookup, range, memory).
    assert_eq!(ops.len(), 15);
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let out = flexbench(&["tree", "--structures", "nonsense"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown structure"));
    let out = flexbench(&["tree", "--extents", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = flexbench(&["no-such-command"]);
    assert!(!out.status.success());
}
