//! CLIENT ID, SETNAME, GETNAME, LIST, INFO and KILL.
//!
//! Invariants: a client's name never holds a blank or a control byte
//! (CLIENT LIST stays parseable); KILL only marks and wakes a connection,
//! which closes itself once its requests in flight are answered.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::args::{int, is, show, syntax, CmdResult};
use super::Cx;
use crate::resp::Reply;

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
