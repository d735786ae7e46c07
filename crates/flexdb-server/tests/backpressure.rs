//! The server under writes faster than its store merges them, driven as
//! clients drive it: the store slows the writes, the server awaits that
//! wait per connection (`INFO stats` counts it in
//! `flexdb_write_pace_waits`), another client on its one worker is
//! answered throughout, and every acknowledged write reads back. (That the
//! other client is not held up while a writer waits is a matter of
//! latency, which benchmarks measure, not this test.)

mod common;

use common::Server;
use redis::Connection;

/// One `INFO stats` field.
fn info_stat(con: &mut Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("{name} missing from {info}"))
        .trim()
        .parse()
        .unwrap()
}

fn value(writer: usize, i: usize) -> Vec<u8> {
    format!("{writer}:{i}:").into_bytes().repeat(800)
}

#[test]
fn writes_the_store_slows_are_awaited_per_connection_and_kept() {
    // 1 MiB MemTables (one frozen, the default): pipelined writes of a few
    // connections fill them far faster than the committer merges them.
    let server = Server::start(&["--memtable-mb", "1", "--threads", "1"]);
    let mut watcher = server.conn();
    assert_eq!(info_stat(&mut watcher, "flexdb_write_pace_waits"), 0);
    let _: () = redis::cmd("SET")
        .arg("probe")
        .arg("here")
        .query(&mut watcher)
        .unwrap();
    const WRITERS: usize = 3;
    const PIPELINE: usize = 16;
    // At most 3 × 16 × 400 values of ~5 KiB (about 100 MiB) before the
    // test gives up on seeing the store slow the writes.
    const MAX_ROUNDS: usize = 400;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let written: Vec<usize> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (server, stop) = (&server, &stop);
                s.spawn(move || {
                    let mut con = server.conn();
                    let mut n = 0;
                    for _ in 0..MAX_ROUNDS {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let mut pipe = redis::pipe();
                        for i in n..n + PIPELINE {
                            pipe.cmd("SET").arg(format!("w{w}:{i}")).arg(value(w, i));
                        }
                        let _: () = pipe.query(&mut con).unwrap();
                        n += PIPELINE;
                    }
                    n
                })
            })
            .collect();
        // Meanwhile another client on the same worker keeps being served.
        let mut reads = 0;
        while !writers.iter().all(|h| h.is_finished()) {
            let got: Option<String> = redis::cmd("GET").arg("probe").query(&mut watcher).unwrap();
            assert_eq!(got.as_deref(), Some("here"));
            reads += 1;
            if info_stat(&mut watcher, "flexdb_write_pace_waits") > 0 {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        assert!(reads > 0);
        writers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let waits = info_stat(&mut watcher, "flexdb_write_pace_waits");
    assert!(
        waits > 0,
        "no write was slowed after {written:?} values a writer"
    );
    assert!(info_stat(&mut watcher, "flexdb_write_pace_wait_us") > 0);
    // Every acknowledged write is there.
    for (w, &n) in written.iter().enumerate() {
        for start in (0..n).step_by(256) {
            let keys: Vec<String> = (start..n.min(start + 256))
                .map(|i| format!("w{w}:{i}"))
                .collect();
            let got: Vec<Option<Vec<u8>>> =
                redis::cmd("MGET").arg(&keys).query(&mut watcher).unwrap();
            for (i, v) in (start..).zip(got) {
                assert_eq!(v, Some(value(w, i)), "w{w}:{i}");
            }
        }
    }
}
