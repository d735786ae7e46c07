//! What `ycsb` and `range-delete` share to run each engine in a process of
//! its own: the directory the stores go in, the child's JSON lines on its
//! standard output, and the parent reading them back.
//!
//! Invariants: a child prints exactly one JSON object per line per record
//! and nothing else on stdout that parses as a record (an engine that
//! prints there costs a logged line, never a figure); a temporary work
//! directory lives as long as its `WorkDir`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::engine::Result;
use super::log;

/// Where a run's stores go: `--dir`, or a new temporary directory in the
/// current one, removed when this drops.
pub struct WorkDir {
    path: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl WorkDir {
    /// `dir`, or a temporary directory named from `prefix`; created if
    /// missing. On failure, the message to print (`command: ...`).
    pub fn new(
        dir: Option<&Path>,
        prefix: &str,
        command: &str,
    ) -> std::result::Result<Self, String> {
        let (path, tmp) = match dir {
            Some(d) => (d.to_path_buf(), None),
            None => match tempfile::Builder::new().prefix(prefix).tempdir_in(".") {
                Ok(t) => (t.path().to_path_buf(), Some(t)),
                Err(e) => {
                    return Err(format!(
                        "{command}: cannot create a temporary directory: {e}"
                    ))
                }
            },
        };
        std::fs::create_dir_all(&path)
            .map_err(|e| format!("{command}: {}: {e}", path.display()))?;
        Ok(WorkDir { path, _tmp: tmp })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Prints `record` as the child's JSON line for the parent, flushed.
pub fn emit_line(record: &impl Serialize) {
    println!("{}", serde_json::to_string(record).unwrap_or_default());
    let _ = std::io::stdout().flush();
}

/// Runs this executable again with `args` (a child running one engine);
/// returns the records it printed and whether it succeeded.
pub fn run_child<T: DeserializeOwned>(args: Vec<String>, name: &str) -> Result<(Vec<T>, bool)> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find flexbench itself: {e}"))?;
    let out = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start the child: {e}"))?;
    let mut records = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        match serde_json::from_str::<T>(line) {
            Ok(r) => records.push(r),
            // An engine printing to stdout must not cost the figures.
            Err(_) => log(name, &format!("ignored a line of output: {line}")),
        }
    }
    Ok((records, out.status.success()))
}
