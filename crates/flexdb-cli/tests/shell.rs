//! `flexdb shell` driven through stdin (not a terminal): commands, quoting,
//! errors that do not stop it, and its exit status.

mod common;

use common::{code, flexdb, flexdb_in, p};

#[test]
fn a_script_runs_line_by_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = p(&tmp.path().join("db")).to_string();
    let script = "\
# comments and blank lines are skipped

put a 1
put 'my key' \"two\\nlines\"
put -dash- \"\"
get 'my key'
get nope
scan
del a
scan --keys-only --limit 2
encoding hex
encoding
get 6d79206b6579
put zz 00
encoding base64
get bXkga2V5
get 6d79206b6579 --hex
scan --prefix 6d79 --keys-only --hex
bogus
put 'unterminated
exit
put never reached
";
    let run = flexdb_in(&["shell", &d, "--create"], script.as_bytes());
    assert_eq!(
        String::from_utf8(run.stdout.clone()).unwrap(),
        "two\nlines\n\
         -dash-\t\na\t1\nmy key\ttwo\\nlines\n\
         -dash-\nmy key\n\
         hex\n\
         74776f0a6c696e6573\n\
         dHdvCmxpbmVz\n\
         74776f0a6c696e6573\n\
         6d79206b6579\n"
    );
    let errors: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(errors.len(), 4, "{}", run.stderr);
    assert_eq!(errors[0], "error: (not found)");
    assert!(
        errors[1].starts_with("error: key \"zz\": invalid hex"),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].starts_with("error: unrecognized subcommand 'bogus'"),
        "{}",
        errors[2]
    );
    assert_eq!(errors[3], "error: unterminated single quote");
    // The status of the last command before `exit` (a usage error).
    assert_eq!(run.code, Some(code::USAGE));
    assert_eq!(
        flexdb(&["get", &d, "never"]).code,
        Some(code::NOT_FOUND_KEY)
    );
    assert_eq!(flexdb(&["get", &d, "my key"]).ok(), "two\nlines\n");
}

#[test]
fn status_is_that_of_the_last_command() {
    let tmp = tempfile::tempdir().unwrap();
    let d = p(&tmp.path().join("db")).to_string();
    let run = flexdb_in(&["shell", &d, "--create"], b"put a 1\nget b\n");
    assert_eq!(run.code, Some(code::NOT_FOUND_KEY));
    let run = flexdb_in(&["shell", &d], b"get b\nget a\n");
    assert_eq!((run.code, run.stdout.as_slice()), (Some(0), &b"1\n"[..]));
    // End of input without `exit` closes the store cleanly.
    let run = flexdb_in(&["shell", &d, "--hex"], b"put 00 ff\n");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(flexdb(&["get", &d, "00", "--hex"]).ok(), "ff\n");
}

#[test]
fn help_stats_check_and_flush() {
    let tmp = tempfile::tempdir().unwrap();
    let d = p(&tmp.path().join("db")).to_string();
    let run = flexdb_in(
        &["shell", &d, "--create"],
        b"help\nput k v\nflush\nstats --json\ncheck\nhelp scan\n",
    );
    let out = run.ok();
    assert!(out.contains("Commands"), "{out}");
    assert!(out.contains("\"pairs\":1"), "{out}");
    assert!(out.contains("status          ok"), "{out}");
    assert!(out.contains("--reverse"), "{out}");
}

#[test]
fn the_shell_needs_a_store_unless_told_to_create_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    flexdb_in(&["shell", p(&dir)], b"put a 1\n").fails(code::NO_STORE, &[p(&dir)]);
    assert!(!dir.exists());
}

#[test]
fn use_switches_the_keyspace_of_put_get_del_and_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let d = p(&tmp.path().join("db")).to_string();
    let script = "\
put k default
use
use users
use
get k
put k u1
put j u2
scan
del j
keyspace
scan --keys-only
use ghost
get k
scan
use ''
use
use default
get k
keyspaces
keyspaces --json
";
    let run = flexdb_in(&["shell", &d, "--create"], script.as_bytes());
    assert_eq!(
        String::from_utf8(run.stdout.clone()).unwrap(),
        "default\n\
         users\n\
         j\tu2\nk\tu1\n\
         users\n\
         k\n\
         ghost\n\
         default\n\
         default\t1\nusers\t1\n\
         [{\"name\":\"default\",\"pairs\":1},{\"name\":\"users\",\"pairs\":1}]\n"
    );
    let errors: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(errors.len(), 4, "{}", run.stderr);
    // `get k` in "users" before the first `put` made it.
    assert_eq!(
        errors[0],
        format!("error: {d}: no keyspace \"users\" in this store")
    );
    for e in &errors[1..3] {
        assert_eq!(
            *e,
            format!("error: {d}: no keyspace \"ghost\" in this store")
        );
    }
    assert!(
        errors[3].starts_with("error: keyspace name \"\": empty"),
        "{}",
        errors[3]
    );
    assert_eq!(run.code, Some(0), "the last command succeeded");
    // `use ghost` made nothing; `put` made "users".
    assert_eq!(flexdb(&["keyspaces", &d]).ok(), "default\t1\nusers\t1\n");
    // The shell can start in a keyspace.
    let run = flexdb_in(&["shell", &d, "--keyspace", "users"], b"use\nget k\n");
    assert_eq!(run.ok(), "users\nu1\n");
    let run = flexdb_in(&["shell", &d, "--keyspace", "ghost"], b"scan\n");
    assert_eq!(run.code, Some(code::NO_STORE), "{}", run.stderr);
}
