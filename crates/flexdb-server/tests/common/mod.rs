//! Test support: start the real `flexdb-server` binary on a free loopback
//! port with a store in a temporary directory, and talk to it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server; killed (SIGKILL) when dropped unless stopped first.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    args: Vec<String>,
}

impl Server {
    /// A server on a new store, with extra flags.
    pub fn start(args: &[&str]) -> Server {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("store");
        let mut s = Server::start_in(&dir, args);
        s._tmp = Some(tmp);
        s
    }

    /// A server on the store in `dir`.
    pub fn start_in(dir: &Path, args: &[&str]) -> Server {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut s = Server {
            child: None,
            port: 0,
            dir: dir.to_path_buf(),
            _tmp: None,
            args,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let port_file = self.dir.with_extension(format!("port{}", rand_suffix()));
        let _ = std::fs::remove_file(&port_file);
        let child = Command::new(env!("CARGO_BIN_EXE_flexdb-server"))
            .arg("--dir")
            .arg(&self.dir)
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .args(&self.args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start flexdb-server");
        self.child = Some(child);
        let start = Instant::now();
        loop {
            if let Ok(s) = std::fs::read_to_string(&port_file) {
                if let Ok(p) = s.trim().parse() {
                    self.port = p;
                    break;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "server did not start"
            );
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("server exited at start: {status}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server with SIGKILL and starts it again on the same store.
    pub fn kill_and_restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, and waits for the process to exit; its exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        let sent = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success());
        wait_exit(&mut c, Duration::from_secs(20))
    }

    /// Waits for the process to exit by itself (after SHUTDOWN).
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        wait_exit(&mut c, Duration::from_secs(20))
    }

    /// Starts the server again on the same store (after it stopped).
    pub fn restart(&mut self) {
        assert!(self.child.is_none());
        self.spawn();
    }

    /// The server's resident memory in KiB (Linux), 0 where unknown.
    pub fn rss_kib(&self) -> u64 {
        let Some(c) = &self.child else { return 0 };
        std::fs::read_to_string(format!("/proc/{}/status", c.id()))
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_string();
                line.split_whitespace().nth(1)?.parse().ok()
            })
            .unwrap_or(0)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A connection of the `redis` crate.
    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("client");
        let c = client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        c
    }

    /// A raw TCP connection.
    pub fn raw(&self) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Raw {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        }
    }
}

fn wait_exit(c: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = c.try_wait().expect("wait") {
            return st;
        }
        assert!(start.elapsed() < limit, "server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn rand_suffix() -> u64 {
    rand::random()
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A raw protocol connection: send bytes, read replies as text.
pub struct Raw {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

impl Raw {
    pub fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).expect("write");
    }

    /// Sends a command as a multibulk frame.
    pub fn cmd(&mut self, args: &[&[u8]]) -> String {
        self.send(&frame(args));
        self.reply()
    }

    /// One reply, flattened to text: `+OK`, `-ERR ...`, `:1`, `$-1`,
    /// `bulk`, arrays as `[a, b]`. Panics on a closed connection.
    pub fn reply(&mut self) -> String {
        self.try_reply().expect("a reply")
    }

    /// One reply, or `None` when the connection closed.
    pub fn try_reply(&mut self) -> Option<String> {
        let mut line = String::new();
        if self.r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches("\r\n").to_string();
        let (kind, rest) = line.split_at(1);
        match kind {
            "$" => {
                let n: i64 = rest.parse().ok()?;
                if n < 0 {
                    return Some("(nil)".into());
                }
                let mut buf = vec![0; n as usize + 2];
                self.r.read_exact(&mut buf).ok()?;
                buf.truncate(n as usize);
                Some(String::from_utf8_lossy(&buf).into_owned())
            }
            "*" | "%" => {
                let n: i64 = rest.parse().ok()?;
                if n < 0 {
                    return Some("(nil array)".into());
                }
                let n = if kind == "%" { n * 2 } else { n };
                let items: Option<Vec<String>> = (0..n).map(|_| self.try_reply()).collect();
                Some(format!("[{}]", items?.join(", ")))
            }
            "_" => Some("(null)".into()),
            _ => Some(line),
        }
    }

    /// Whether the server closed the connection (reads EOF or an error
    /// within the timeout).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        loop {
            match self.r.read(&mut b) {
                Ok(0) | Err(_) => return true,
                Ok(_) => continue,
            }
        }
    }
}

/// A multibulk frame of `args`.
pub fn frame(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Runs a command and returns its error as `CODE detail`.
pub fn err_of(con: &mut redis::Connection, cmd: &mut redis::Cmd) -> String {
    match cmd.query::<redis::Value>(con) {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// A command from its words.
pub fn c(args: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd
}

/// Runs a command, panicking with it on an error reply.
pub fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    c(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}
