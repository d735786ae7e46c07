//! `--ttl` through the built binary: `put --ttl` and `load --ttl` write
//! pairs that reads stop seeing once their time is up (also in another
//! keyspace), pairs without it stay, and bad durations are usage errors
//! that write nothing.

mod common;

use std::time::Duration;

use common::{code, flexdb, flexdb_in, p};

fn store() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = p(&tmp.path().join("db")).to_string();
    (tmp, dir)
}

#[test]
fn pairs_put_or_loaded_with_a_ttl_are_gone_once_it_passes() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "short", "s", "--ttl", "1500ms"]).ok();
    flexdb(&["put", &d, "plain", "p"]).ok();
    flexdb(&["put", &d, "long", "l", "--ttl", "1h"]).ok();
    flexdb(&["put", &d, "k", "in a", "--ttl", "1500ms", "--keyspace", "a"]).ok();
    flexdb_in(
        &["load", &d, "--format", "tsv", "--ttl", "1500ms", "-q"],
        b"x\t1\ny\t2\n",
    )
    .ok();
    assert_eq!(flexdb(&["get", &d, "short"]).ok(), "s\n");
    assert_eq!(
        flexdb(&["scan", &d]).ok(),
        "long\tl\nplain\tp\nshort\ts\nx\t1\ny\t2\n"
    );
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(
        flexdb(&["get", &d, "short"]).code,
        Some(code::NOT_FOUND_KEY)
    );
    assert_eq!(
        flexdb(&["get", &d, "k", "--keyspace", "a"]).code,
        Some(code::NOT_FOUND_KEY)
    );
    assert_eq!(flexdb(&["scan", &d]).ok(), "long\tl\nplain\tp\n");
}

#[test]
fn bad_durations_are_usage_errors_and_write_nothing() {
    let (_tmp, d) = store();
    flexdb(&["put", &d, "k", "v"]).ok();
    for bad in ["0", "0s", "10x", "-1", "1.5h", "99999999999999999999d"] {
        for run in [
            flexdb(&["put", &d, "k", "new", &format!("--ttl={bad}")]),
            flexdb_in(
                &["load", &d, "--format", "tsv", &format!("--ttl={bad}")],
                b"k\tnew\n",
            ),
        ] {
            assert_eq!(run.code, Some(code::USAGE), "{bad}: {}", run.stderr);
            assert!(run.stderr.contains("--ttl"), "{bad}: {}", run.stderr);
        }
    }
    assert_eq!(flexdb(&["scan", &d]).ok(), "k\tv\n");
}
