//! Server commands: INFO, SAVE, BGSAVE, LASTSAVE, SHUTDOWN, TIME (CONFIG,
//! CLIENT and COMMAND have files of their own).
//!
//! Invariants: SAVE returns only once the store has written its memory
//! tables and synced its log; SHUTDOWN only starts the shutdown, which
//! the server carries out (see `crate::server`).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::args::{is, syntax, CmdResult};
use super::Cx;
use crate::resp::Reply;
use crate::state::{unix_now, DATABASES};

/// INFO [section ...].
pub fn info(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let all = args.len() == 1
        || args[1..]
            .iter()
            .any(|a| is(a, "all") || is(a, "everything") || is(a, "default"));
    let want = |s: &str| all || args[1..].iter().any(|a| is(a, s));
    let sh = cx.shared;
    let mut out = String::new();
    if want("server") {
        let _ = write!(
            out,
            "# Server\r\nredis_version:{}\r\nflexdb_server_version:{}\r\nredis_mode:standalone\r\n\
             os:{}\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\n\
             executable:flexdb-server\r\n\r\n",
            crate::REDIS_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            sh.local_addr.port(),
            sh.started.elapsed().as_secs(),
        );
    }
    if want("clients") {
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n\r\n",
            sh.clients.lock().len(),
            sh.runtime.read().maxclients
        );
    }
    if want("memory") {
        let st = sh.db.stats();
        let rss = process_memory();
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{}\r\nused_memory_rss:{}\r\nmaxmemory:0\r\n\
             flexdb_rss_anon:{}\r\nflexdb_rss_file:{}\r\n\
             flexdb_buffer_budget:{}\r\n\
             flexdb_cache_capacity:{}\r\nflexdb_cache_bytes:{}\r\nflexdb_row_cache_bytes:{}\r\n\
             flexdb_memtable_bytes:{}\r\nflexdb_backlog_bytes:{}\r\n\
             flexdb_memtable_pool_bytes:{}\r\nflexdb_memtable_pool_lazy_bytes:{}\r\n\
             flexdb_sparse_index_bytes:{}\r\nflexdb_intervals:{}\r\n\
             flexdb_extent_index_bytes:{}\r\nflexdb_extents:{}\r\n\
             flexdb_snapshot_held_bytes:{}\r\n\
             flexdb_space_bytes:{}\r\nflexdb_pairs:{}\r\n\r\n",
            rss.anon,
            rss.resident,
            rss.anon,
            rss.file,
            sh.config.store_buffer_bytes(),
            st.cache_capacity,
            st.cache_bytes,
            st.row_cache_bytes,
            st.memtable_bytes,
            st.backlog_bytes,
            st.memtable_pool_bytes,
            st.memtable_pool_lazy_bytes,
            st.sparse_index_bytes,
            st.intervals,
            st.extent_index_bytes,
            st.extents,
            st.snapshot_held_bytes,
            st.space_bytes,
            st.pairs,
        );
    }
    if want("persistence") {
        let _ = write!(
            out,
            "# Persistence\r\nloading:0\r\nrdb_last_save_time:{}\r\naof_enabled:1\r\n\
             appendfsync:{}\r\n\r\n",
            sh.last_save.load(Ordering::Relaxed),
            sh.config.appendfsync.name()
        );
    }
    if want("stats") {
        let st = &sh.stats;
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n\
             total_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\n\
             flexdb_write_pace_waits:{}\r\nflexdb_write_pace_wait_us:{}\r\n\r\n",
            st.connections.load(Ordering::Relaxed),
            st.commands.load(Ordering::Relaxed),
            st.rejected.load(Ordering::Relaxed),
            st.hits.load(Ordering::Relaxed),
            st.misses.load(Ordering::Relaxed),
            st.net_in.load(Ordering::Relaxed),
            st.net_out.load(Ordering::Relaxed),
            st.pace_waits.load(Ordering::Relaxed),
            st.pace_wait_us.load(Ordering::Relaxed),
        );
    }
    if want("keyspace") {
        out.push_str("# Keyspace\r\n");
        for db in 0..DATABASES {
            let n = super::keys::count_keys(cx.ks_of(db))?;
            if n > 0 {
                let _ = write!(out, "db{db}:keys={n},expires=0,avg_ttl=0\r\n");
            }
        }
        out.push_str("\r\n");
    }
    Ok(Reply::Bulk(out.into_bytes()))
}

/// The process's memory as `/proc/self/status` gives it, in bytes (0
/// where unknown).
#[derive(Debug, Default, Clone, Copy)]
struct ProcessMemory {
    /// `VmRSS`: every resident page.
    resident: u64,
    /// `RssAnon`: the heap and stacks.
    anon: u64,
    /// `RssFile`: mapped file pages (the binary, the store's data file
    /// under `--mmap-reads yes`).
    file: u64,
}

fn process_memory() -> ProcessMemory {
    let mut m = ProcessMemory::default();
    let Ok(text) = std::fs::read_to_string("/proc/self/status") else {
        return m;
    };
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let kb = rest
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .unwrap_or(0);
        match name {
            "VmRSS" => m.resident = kb * 1024,
            "RssAnon" => m.anon = kb * 1024,
            "RssFile" => m.file = kb * 1024,
            _ => {}
        }
    }
    m
}

/// Writes the store's memory tables and syncs its log.
fn save_now(cx: &Cx<'_>) -> Result<(), Reply> {
    cx.shared.db.flush()?;
    cx.shared.db.sync()?;
    cx.shared.last_save.store(unix_now(), Ordering::Relaxed);
    Ok(())
}

/// SAVE.
pub fn save(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    save_now(cx)?;
    Ok(Reply::ok())
}

/// BGSAVE [SCHEDULE]: done in the foreground (it is a flush).
pub fn bgsave(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    save_now(cx)?;
    Ok(Reply::Simple("Background saving started".into()))
}

/// LASTSAVE.
pub fn lastsave(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(
        cx.shared.last_save.load(Ordering::Relaxed) as i64
    ))
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: starts the shutdown; the
/// connection closes without a reply, as Redis's does.
pub fn shutdown(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    for a in &args[1..] {
        if is(a, "abort") {
            return Err(Reply::err("No shutdown in progress."));
        }
        if !["nosave", "save", "now", "force"].iter().any(|o| is(a, o)) {
            return Err(syntax());
        }
    }
    cx.shared.begin_shutdown();
    cx.s.quit = true;
    Ok(Reply::Raw(Vec::new()))
}

/// TIME: seconds and microseconds.
pub fn time(_: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    let us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    Ok(Reply::Array(vec![
        Reply::bulk((us / 1_000_000).to_string()),
        Reply::bulk((us % 1_000_000).to_string()),
    ]))
}
