//! Connection commands: PING, ECHO, QUIT, HELLO, AUTH, SELECT.
//!
//! Invariants: a session becomes authenticated only by a password equal
//! to the configured one; SELECT changes only the session's database;
//! HELLO changes the protocol only to a version it supports (2 or 3).

use std::sync::atomic::Ordering;

use super::args::{int, is, show, syntax, CmdResult};
use super::keys::db_index;
use super::Cx;
use crate::resp::Reply;

/// PING [message].
pub fn ping(_: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    match &args[1..] {
        [] => Ok(Reply::Simple("PONG".into())),
        [m] => Ok(Reply::Bulk(m.clone())),
        _ => Err(super::wrong_arity("ping")),
    }
}

/// ECHO message.
pub fn echo(_: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Bulk(args[1].clone()))
}

/// QUIT: OK, then the connection closes.
pub fn quit(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    cx.s.quit = true;
    Ok(Reply::ok())
}

/// Checks a password (and user: only `default` exists).
fn check_password(cx: &mut Cx<'_>, user: Option<&[u8]>, pass: &[u8]) -> Result<(), Reply> {
    let required = cx.shared.runtime.read().requirepass.clone();
    let Some(required) = required else {
        if user.is_none() {
            return Err(Reply::err(
                "AUTH <password> called without any password configured for the default user. \
                 Are you sure your configuration is correct?",
            ));
        }
        // With no password, `default` accepts any.
        return match user {
            Some(u) if u == b"default" => Ok(()),
            _ => Err(wrongpass()),
        };
    };
    if user.is_some_and(|u| u != b"default") || pass != required.as_bytes() {
        return Err(wrongpass());
    }
    cx.s.authed = true;
    Ok(())
}

fn wrongpass() -> Reply {
    Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
}

/// AUTH [username] password.
pub fn auth(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    match &args[1..] {
        [pass] => check_password(cx, None, pass)?,
        [user, pass] => check_password(cx, Some(user), pass)?,
        _ => return Err(syntax()),
    }
    Ok(Reply::ok())
}

/// HELLO [protover [AUTH username password] [SETNAME name]].
pub fn hello(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let mut proto = cx.s.proto;
    if let Some(v) = args.get(1) {
        proto = match int(v) {
            Ok(2) => 2,
            Ok(3) => 3,
            Ok(_) => return Err(Reply::Error("NOPROTO unsupported protocol version".into())),
            Err(_) => {
                return Err(Reply::err(
                    "Protocol version is not an integer or out of range",
                ))
            }
        };
    }
    let mut name = None;
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "auth") && i + 2 < args.len() {
            check_password(cx, Some(&args[i + 1]), &args[i + 2])?;
            i += 3;
        } else if is(&args[i], "setname") && i + 1 < args.len() {
            name = Some(args[i + 1].clone());
            i += 2;
        } else {
            return Err(Reply::err(format!(
                "Syntax error in HELLO option '{}'",
                show(&args[i])
            )));
        }
    }
    if !cx.s.authed {
        return Err(Reply::Error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time"
                .into(),
        ));
    }
    if let Some(n) = name {
        *cx.s.info.name.lock() = n;
    }
    cx.s.proto = proto;
    let s = |v: &str| Reply::bulk(v);
    Ok(Reply::Map(vec![
        (s("server"), s("redis")),
        (s("version"), s(crate::REDIS_VERSION)),
        (s("proto"), Reply::Int(i64::from(proto))),
        (s("id"), Reply::Int(cx.s.id as i64)),
        (s("mode"), s("standalone")),
        (s("role"), s("master")),
        (s("modules"), Reply::Array(Vec::new())),
    ]))
}

/// SELECT index.
pub fn select(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let db = db_index(&args[1])?;
    cx.s.db = db;
    cx.s.info.db.store(db as u64, Ordering::Relaxed);
    Ok(Reply::ok())
}
