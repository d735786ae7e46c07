//! Server commands: INFO, CONFIG GET/SET, CLIENT, COMMAND, SAVE, BGSAVE,
//! LASTSAVE, SHUTDOWN, TIME.
//!
//! Invariants: CONFIG SET changes only the settings in
//! `config::Runtime` (the others need a restart and are refused); SAVE
//! returns only once the store has written its memory tables and synced
//! its log; SHUTDOWN only starts the shutdown, which the server carries
//! out (see `crate::server`).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::args::{int, is, show, syntax, CmdResult};
use super::{Cx, COMMANDS};
use crate::glob;
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
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{}\r\nused_memory_rss:{}\r\nmaxmemory:0\r\n\
             flexdb_cache_capacity:{}\r\nflexdb_cache_bytes:{}\r\nflexdb_memtable_bytes:{}\r\n\
             flexdb_memtable_pool_bytes:{}\r\nflexdb_space_bytes:{}\r\nflexdb_pairs:{}\r\n\r\n",
            resident_bytes(),
            resident_bytes(),
            st.cache_capacity,
            st.cache_bytes,
            st.memtable_bytes,
            st.memtable_pool_bytes,
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
             total_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\n\r\n",
            st.connections.load(Ordering::Relaxed),
            st.commands.load(Ordering::Relaxed),
            st.rejected.load(Ordering::Relaxed),
            st.hits.load(Ordering::Relaxed),
            st.misses.load(Ordering::Relaxed),
            st.net_in.load(Ordering::Relaxed),
            st.net_out.load(Ordering::Relaxed),
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

/// The process's resident memory in bytes (0 where unknown).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The parameters CONFIG GET shows, with their values.
fn parameters(cx: &Cx<'_>) -> Vec<(&'static str, String)> {
    let c = &cx.shared.config;
    let r = cx.shared.runtime.read();
    vec![
        ("bind", c.bind.clone()),
        ("port", cx.shared.local_addr.port().to_string()),
        ("dir", c.store_dir().display().to_string()),
        ("requirepass", r.requirepass.clone().unwrap_or_default()),
        ("appendonly", "yes".into()),
        ("appendfsync", c.appendfsync.name().into()),
        ("maxclients", r.maxclients.to_string()),
        ("cache-mb", c.cache_mb.to_string()),
        ("memtable-mb", c.memtable_mb.to_string()),
        ("databases", DATABASES.to_string()),
        ("proto-max-bulk-len", r.limits.max_bulk_len.to_string()),
        (
            "client-query-buffer-limit",
            r.limits.max_query_buffer.to_string(),
        ),
        ("save", String::new()),
    ]
}

/// CONFIG GET pattern... | SET name value... | RESETSTAT | REWRITE.
pub fn config(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let sub = &args[1];
    if is(sub, "get") && args.len() >= 3 {
        let params = parameters(cx);
        let mut out = Vec::new();
        for (name, value) in params {
            if args[2..]
                .iter()
                .any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
            {
                out.push((Reply::bulk(name), Reply::bulk(value)));
            }
        }
        return Ok(Reply::Map(out));
    }
    if is(sub, "set") && args.len() >= 4 && args.len().is_multiple_of(2) {
        let mut next = cx.shared.runtime.read().clone();
        for pair in args[2..].chunks(2) {
            let (name, value) = (pair[0].to_ascii_lowercase(), &pair[1]);
            let num = || {
                int(value)
                    .ok()
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        Reply::err(format!(
                            "CONFIG SET failed (possibly related to argument '{}') - argument couldn't be parsed into an integer",
                            show(&name)
                        ))
                    })
            };
            match name.as_slice() {
                b"requirepass" => {
                    next.requirepass = Some(show(value)).filter(|p| !p.is_empty());
                }
                b"maxclients" => next.maxclients = num()?,
                b"proto-max-bulk-len" => next.limits.max_bulk_len = num()?,
                b"client-query-buffer-limit" => next.limits.max_query_buffer = num()?,
                other if parameters(cx).iter().any(|(n, _)| n.as_bytes() == other) => {
                    return Err(Reply::err(format!(
                        "CONFIG SET failed (possibly related to argument '{}') - can't set immutable config",
                        show(other)
                    )));
                }
                other => {
                    return Err(Reply::err(format!(
                        "Unknown option or number of arguments for CONFIG SET - '{}'",
                        show(other)
                    )));
                }
            }
        }
        *cx.shared.runtime.write() = next;
        return Ok(Reply::ok());
    }
    if (is(sub, "resetstat") || is(sub, "rewrite")) && args.len() == 2 {
        return Ok(Reply::ok());
    }
    Err(Reply::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
        show(sub)
    )))
}

/// CLIENT ID | SETNAME name | GETNAME | LIST | KILL ...| INFO.
pub fn client(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let sub = &args[1];
    let n = args.len();
    if is(sub, "id") && n == 2 {
        return Ok(Reply::Int(cx.s.id as i64));
    }
    if is(sub, "setname") && n == 3 {
        if args[2].iter().any(|&b| b <= b' ' || b > b'~') {
            return Err(Reply::err(
                "Client names cannot contain spaces, newlines or special characters.",
            ));
        }
        *cx.s.info.name.lock() = args[2].clone();
        return Ok(Reply::ok());
    }
    if is(sub, "getname") && n == 2 {
        let name = cx.s.info.name.lock().clone();
        return Ok(if name.is_empty() {
            Reply::Nil
        } else {
            Reply::Bulk(name)
        });
    }
    if (is(sub, "list") || is(sub, "info")) && n == 2 {
        let mut out = String::new();
        for (id, c) in cx.shared.clients.lock().iter() {
            if is(sub, "info") && *id != cx.s.id {
                continue;
            }
            let _ = writeln!(
                out,
                "id={id} addr={} laddr={} fd=0 name={} age={} idle=0 flags=N db={} sub=0 psub=0 \
                 multi=-1 qbuf=0 qbuf-free=0 obl=0 oll=0 omem=0 events=r cmd={} user=default resp={}",
                c.addr,
                cx.shared.local_addr,
                show(&c.name.lock()),
                c.since.elapsed().as_secs(),
                c.db.load(Ordering::Relaxed),
                c.last_cmd.lock(),
                if *id == cx.s.id { cx.s.proto } else { 2 },
            );
        }
        return Ok(Reply::Bulk(out.into_bytes()));
    }
    if is(sub, "kill") && n >= 3 {
        let clients = cx.shared.clients.lock();
        let kill = |c: &crate::state::ClientInfo| {
            c.killed.store(true, Ordering::SeqCst);
            c.wake.notify_one();
        };
        if n == 3 {
            let addr = show(&args[2]);
            let Some(c) = clients.values().find(|c| c.addr.to_string() == addr) else {
                return Err(Reply::err("No such client"));
            };
            kill(c);
            return Ok(Reply::ok());
        }
        let mut killed = 0;
        for pair in args[2..].chunks(2) {
            let [filter, value] = pair else {
                return Err(syntax());
            };
            for (id, c) in clients.iter() {
                let hit = if is(filter, "id") {
                    int(value)? == *id as i64
                } else if is(filter, "addr") {
                    c.addr.to_string() == show(value)
                } else {
                    return Err(syntax());
                };
                if hit {
                    kill(c);
                    killed += 1;
                }
            }
        }
        return Ok(Reply::Int(killed));
    }
    Err(Reply::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
        show(sub)
    )))
}

fn command_info(spec: &super::Spec) -> Reply {
    let mut flags = Vec::new();
    if spec.flags & super::WRITE != 0 {
        flags.push(Reply::Simple("write".into()));
    }
    if spec.flags & super::READONLY != 0 {
        flags.push(Reply::Simple("readonly".into()));
    }
    if spec.flags & super::NOAUTH != 0 {
        flags.push(Reply::Simple("no_auth".into()));
    }
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Int(spec.arity.into()),
        Reply::Array(flags),
        Reply::Int(spec.first.into()),
        Reply::Int(spec.last.into()),
        Reply::Int(spec.step.into()),
    ])
}

/// COMMAND [COUNT | INFO name... | DOCS [name...] | LIST].
pub fn command(_: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_info).collect()));
    };
    if is(sub, "count") && args.len() == 2 {
        return Ok(Reply::Int(COMMANDS.len() as i64));
    }
    if is(sub, "list") && args.len() == 2 {
        return Ok(Reply::Array(
            COMMANDS.iter().map(|c| Reply::bulk(c.name)).collect(),
        ));
    }
    if is(sub, "info") {
        if args.len() == 2 {
            return Ok(Reply::Array(COMMANDS.iter().map(command_info).collect()));
        }
        let out = args[2..]
            .iter()
            .map(|n| super::lookup(n).map_or(Reply::NilArray, command_info))
            .collect();
        return Ok(Reply::Array(out));
    }
    if is(sub, "docs") {
        // No documentation is served: clients then show no hints.
        return Ok(Reply::Map(Vec::new()));
    }
    Err(Reply::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try COMMAND HELP.",
        show(sub)
    )))
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
