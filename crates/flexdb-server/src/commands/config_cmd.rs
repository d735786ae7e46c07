//! CONFIG GET, SET, RESETSTAT and REWRITE.
//!
//! Invariants: CONFIG SET changes only the settings in `config::Runtime`
//! (the others need a restart and are refused), all of a call's settings
//! or none; CONFIG GET shows the values in force.

use super::args::{int, is, show, CmdResult};
use super::Cx;
use crate::glob;
use crate::resp::Reply;
use crate::state::DATABASES;

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
        ("max-frozen-memtables", c.max_frozen_memtables.to_string()),
        ("mmap-reads", c.mmap_reads.name().into()),
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
    if is(sub, "resetstat") && args.len() == 2 {
        cx.shared.stats.reset();
        return Ok(Reply::ok());
    }
    if is(sub, "rewrite") && args.len() == 2 {
        return Ok(Reply::ok());
    }
    Err(Reply::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
        show(sub)
    )))
}
