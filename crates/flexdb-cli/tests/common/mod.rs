//! Helpers for the tests that drive the built `flexdb` binary.
//!
//! Invariant: every failing run is checked to print exactly one line on
//! stderr, starting with `flexdb: ` (see [`Run::fails`]).

#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The outcome of one run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    /// Asserts success and returns stdout as text.
    #[track_caller]
    pub fn ok(&self) -> String {
        assert_eq!(
            self.code,
            Some(0),
            "expected success; stderr: {}",
            self.stderr
        );
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    /// Asserts failure with `code`, one line `flexdb: ...` on stderr that
    /// contains every needle, and returns that line.
    #[track_caller]
    pub fn fails(&self, code: i32, needles: &[&str]) -> String {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}; stdout: {:?}; stderr: {}",
            String::from_utf8_lossy(&self.stdout),
            self.stderr
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line on stderr: {:?}", self.stderr);
        assert!(lines[0].starts_with("flexdb: "), "{:?}", lines[0]);
        for n in needles {
            assert!(lines[0].contains(n), "{:?} lacks {n:?}", lines[0]);
        }
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        lines[0].to_string()
    }
}

/// Runs `flexdb ARGS` with `stdin` as input.
pub fn flexdb_in<S: AsRef<OsStr>>(args: &[S], stdin: &[u8]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flexdb"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env("FLEXDB_HISTORY", "/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run flexdb");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for flexdb");
    writer.join().expect("stdin writer");
    Run {
        code: out.status.code(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `flexdb ARGS` with empty stdin.
pub fn flexdb<S: AsRef<OsStr>>(args: &[S]) -> Run {
    flexdb_in(args, b"")
}

/// `path` as an argument.
pub fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}

/// The exit statuses of docs/CLI.md.
pub mod code {
    pub const NOT_FOUND_KEY: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const NO_STORE: i32 = 3;
    pub const NOT_A_STORE: i32 = 4;
    pub const LOCKED: i32 = 5;
    pub const CORRUPT: i32 = 6;
    pub const IO: i32 = 7;
    pub const BAD_INPUT: i32 = 8;
}
