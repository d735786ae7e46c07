//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Invariants: EXEC runs its queued commands holding the gate
//! exclusively, so no other command (read or write) runs between them;
//! it runs none of them when a watched key was written since WATCH (a
//! mark set by the writer, see `crate::watch`), a key live at WATCH has
//! expired since, or a command was refused while queueing; every exit from MULTI (EXEC, DISCARD) drops the
//! client's watches.

use super::args::CmdResult;
use super::{check, run, Cx};
use crate::resp::Reply;
use std::sync::atomic::Ordering;

/// MULTI.
pub fn multi(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    if cx.s.multi.is_some() {
        return Err(Reply::err("MULTI calls can not be nested"));
    }
    cx.s.multi = Some(Vec::new());
    cx.s.multi_failed = false;
    Ok(Reply::ok())
}

/// EXEC.
pub fn exec(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    let Some(queue) = cx.s.multi.take() else {
        return Err(Reply::err("EXEC without MULTI"));
    };
    let shared = cx.shared;
    if std::mem::take(&mut cx.s.multi_failed) {
        cx.s.unwatch(shared);
        return Err(Reply::Error(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    let gate = shared.locks.exclusive();
    let mut expired = false;
    for (db, k) in &cx.s.watched_live {
        expired |= !cx.ks_of(*db).contains(k)?;
    }
    if expired || cx.s.dirty.load(Ordering::SeqCst) {
        drop(gate);
        cx.s.unwatch(shared);
        return Ok(Reply::NilArray);
    }
    let mut replies = Vec::with_capacity(queue.len());
    for args in &queue {
        let reply = match check(cx.s, args) {
            Ok(spec) => run(cx, spec, args, true),
            Err(e) => e,
        };
        replies.push(reply);
    }
    drop(gate);
    cx.s.unwatch(shared);
    Ok(Reply::Array(replies))
}

/// DISCARD.
pub fn discard(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    if cx.s.multi.take().is_none() {
        return Err(Reply::err("DISCARD without MULTI"));
    }
    cx.s.multi_failed = false;
    let shared = cx.shared;
    cx.s.unwatch(shared);
    Ok(Reply::ok())
}

/// WATCH key [key ...].
pub fn watch(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    if cx.s.multi.is_some() {
        return Err(Reply::err("WATCH inside MULTI is not allowed"));
    }
    let db = cx.s.db;
    for k in &args[1..] {
        if !cx.s.watched.iter().any(|(d, w)| *d == db && w == k) {
            cx.shared.watches.watch(db, k, cx.s.id, &cx.s.dirty);
            cx.s.watched.push((db, k.clone()));
            if cx.ks().contains(k)? {
                cx.s.watched_live.push((db, k.clone()));
            }
        }
    }
    Ok(Reply::ok())
}

/// UNWATCH.
pub fn unwatch(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    let shared = cx.shared;
    cx.s.unwatch(shared);
    Ok(Reply::ok())
}
