//! The server's settings: command-line flags, their defaults, and the
//! settings `CONFIG SET` may change while it runs.
//!
//! Invariants: every limit has a finite default, so a server started with
//! no flags has bounded memory per client and a bounded number of
//! clients; the listening address is loopback unless `--bind` says
//! otherwise.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// When acknowledged writes reach the disk (as Redis's AOF `appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AppendFsync {
    /// Every write is acknowledged after its log record is synced.
    Always,
    /// The log is synced once a second: a crash loses at most about a
    /// second of acknowledged writes.
    Everysec,
    /// Never synced explicitly: the operating system writes back when it
    /// will.
    No,
}

impl AppendFsync {
    /// The name `CONFIG GET` shows.
    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }
}

/// A yes-or-no setting (as Redis's configuration writes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum YesNo {
    /// On.
    Yes,
    /// Off.
    No,
}

impl YesNo {
    /// The name `CONFIG GET` shows.
    pub fn name(self) -> &'static str {
        match self {
            YesNo::Yes => "yes",
            YesNo::No => "no",
        }
    }
}

/// A Redis-protocol server over a FlexDB store.
#[derive(Debug, Clone, Parser)]
#[command(name = "flexdb-server", version, about, args_override_self = true)]
pub struct Config {
    /// A file of settings, one `name value` a line, with the flags' names
    /// (`port 6380`, `appendfsync always`; `#` starts a comment); flags
    /// given on the command line win over it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The store's directory (created if missing). Default:
    /// `$HOME/.local/share/flexdb-server`, or `./flexdb-data` without HOME.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// The TCP port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// A password clients must give with AUTH before other commands.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// When writes are synced to disk: always, everysec or no.
    #[arg(long, value_enum, default_value_t = AppendFsync::Everysec)]
    pub appendfsync: AppendFsync,
    /// The most clients connected at once.
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
    /// The store's read cache (rows and intervals), in MiB.
    #[arg(long, default_value_t = 256)]
    pub cache_mb: usize,
    /// The size of one of the store's memory tables, in MiB (up to
    /// `1 + --max-frozen-memtables` exist at once).
    #[arg(long, default_value_t = 64)]
    pub memtable_mb: usize,
    /// Full memory tables that may wait to be written into the store
    /// before writers are slowed (at least 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub max_frozen_memtables: u16,
    /// Whether reads copy data out of a memory mapping of the store's
    /// data file (`yes`) or read it with `pread` (`no`). Either way the
    /// data file's pages are the kernel's page cache, which it reclaims
    /// under pressure; mapped pages a read touched also count in the
    /// process's resident memory (`RssFile`).
    #[arg(long, value_enum, default_value_t = YesNo::Yes)]
    pub mmap_reads: YesNo,
    /// The longest bulk string a request may carry, in bytes.
    #[arg(long, default_value_t = 512 * 1024 * 1024)]
    pub proto_max_bulk_len: usize,
    /// The most elements of one request.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_multibulk_len: usize,
    /// The most bytes of requests one client may have buffered.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    pub client_query_buffer_limit: usize,
    /// Worker threads running connections and their commands (0: the
    /// number of CPUs, at least 4).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Where to write the bound address once listening (for scripts and
    /// tests using --port 0).
    #[arg(long)]
    pub port_file: Option<PathBuf>,
}

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line of the config file is not `name value`.
    #[error("{path}:{line}: expected `name value`")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line number (from 1).
        line: usize,
    },
}

/// The command line with the config file's settings (if `--config` names
/// one) put before the flags, so that flags win.
pub fn with_config_file(args: Vec<String>) -> Result<Vec<String>, ConfigError> {
    let mut path = None;
    for (i, a) in args.iter().enumerate() {
        if a == "--config" {
            path = args.get(i + 1).cloned();
        } else if let Some(p) = a.strip_prefix("--config=") {
            path = Some(p.to_string());
        }
    }
    let Some(path) = path.map(PathBuf::from) else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    let mut out: Vec<String> = args.iter().take(1).cloned().collect();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once(char::is_whitespace)
            .map(|(n, v)| (n, v.trim().trim_matches('"')))
            .ok_or(ConfigError::Line {
                path: path.clone(),
                line: n + 1,
            })?;
        out.push(format!("--{}", name.replace('_', "-")));
        out.push(value.to_string());
    }
    out.extend(args.into_iter().skip(1));
    Ok(out)
}

impl Config {
    /// The memory the flags bound for the store's own buffers, in bytes:
    /// the read cache and every memory table that may exist at once. The
    /// store's indexes (about 40 bytes per pair, see docs/SERVER.md) and
    /// the clients' buffers come on top.
    pub fn store_buffer_bytes(&self) -> u64 {
        let mib = 1u64 << 20;
        let tables = 1 + u64::from(self.max_frozen_memtables);
        (self.cache_mb as u64).saturating_mul(mib).saturating_add(
            (self.memtable_mb as u64)
                .saturating_mul(mib)
                .saturating_mul(tables),
        )
    }

    /// How many worker threads to run.
    pub fn worker_threads(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        std::thread::available_parallelism().map_or(4, |n| n.get().max(4))
    }

    /// The store's directory, the default when none was given.
    pub fn store_dir(&self) -> PathBuf {
        if let Some(dir) = &self.dir {
            return dir.clone();
        }
        match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".local/share/flexdb-server"),
            None => PathBuf::from("flexdb-data"),
        }
    }
}

/// The settings `CONFIG SET` may change while the server runs.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// As `--requirepass` (empty: none).
    pub requirepass: Option<String>,
    /// As `--maxclients`.
    pub maxclients: usize,
    /// The request limits for authenticated clients.
    pub limits: crate::resp::Limits,
}

impl Runtime {
    /// The runtime settings the flags give.
    pub fn from_config(c: &Config) -> Runtime {
        Runtime {
            requirepass: c.requirepass.clone().filter(|p| !p.is_empty()),
            maxclients: c.maxclients,
            limits: crate::resp::Limits {
                max_bulk_len: c.proto_max_bulk_len,
                max_multibulk_len: c.max_multibulk_len,
                max_query_buffer: c.client_query_buffer_limit,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_file_settings_come_before_flags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("flexdb.conf");
        std::fs::write(
            &path,
            "# comment\nport 7000\nappendfsync always\nmaxclients 5\n",
        )
        .expect("write");
        let args = vec![
            "flexdb-server".to_string(),
            "--config".into(),
            path.display().to_string(),
            "--port".into(),
            "7001".into(),
        ];
        let c = Config::parse_from(with_config_file(args).expect("read"));
        assert_eq!(c.port, 7001);
        assert_eq!(c.appendfsync, AppendFsync::Always);
        assert_eq!(c.maxclients, 5);
        std::fs::write(&path, "port\n").expect("write");
        let args = vec!["x".into(), "--config".into(), path.display().to_string()];
        assert!(matches!(
            with_config_file(args),
            Err(ConfigError::Line { line: 1, .. })
        ));
    }
}
