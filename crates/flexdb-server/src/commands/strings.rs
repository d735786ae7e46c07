//! String commands: GET, SET and its variants, counters, APPEND and the
//! range reads and writes.
//!
//! Invariants: a command that reads a key and writes it back runs holding
//! that key's lock (the dispatcher takes it: these commands are `WRITE`),
//! so no other write of the key falls between its read and its write; a
//! write that replaces a value keeps the key's deadline exactly when
//! Redis does (APPEND, INCR*, SETRANGE, SET KEEPTTL), and drops it
//! otherwise (SET, GETSET, MSET).

use std::time::Duration;

use flexdb::WriteBatch;

use super::args::{int, is, not_int, parse_f64, parse_i64, syntax, CmdResult};
use super::Cx;
use crate::resp::write::format_double;
use crate::resp::Reply;
use crate::state::unix_now_ms;

/// The longest string SETRANGE and APPEND may build: the store's largest
/// value (checked before anything is allocated, so a small request cannot
/// make the server allocate more).
const MAX_STRING: u64 = flexdb::MAX_VALUE_LEN as u64;

/// A deadline option as given: milliseconds left (0 or less: already
/// past).
pub fn expire_arg(unit_ms: bool, absolute: bool, arg: &[u8], cmd: &str) -> Result<i64, Reply> {
    let n = int(arg)?;
    let invalid = || Reply::err(format!("invalid expire time in '{cmd}' command"));
    if n <= 0 {
        return Err(invalid());
    }
    let ms = if unit_ms {
        n
    } else {
        n.checked_mul(1000).ok_or_else(invalid)?
    };
    let now = unix_now_ms() as i64;
    if absolute {
        Ok(ms.saturating_sub(now))
    } else {
        // As Redis: a deadline past the largest time is refused.
        ms.checked_add(now).ok_or_else(invalid)?;
        Ok(ms)
    }
}

/// Milliseconds left as a TTL for a write: `Some(0)` when already past.
pub fn ttl_of(ms: i64) -> Option<Duration> {
    Some(Duration::from_millis(ms.max(0) as u64))
}

/// GET key.
pub fn get(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::opt_bulk(cx.get(&args[1])?))
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL].
pub fn set(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (key, value) = (&args[1], &args[2]);
    let (mut nx, mut xx, mut want_old, mut keep) = (false, false, false, false);
    let mut ttl_ms: Option<i64> = None;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        let timed = ["ex", "px", "exat", "pxat"].iter().position(|o| is(a, o));
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "get") {
            want_old = true;
        } else if is(a, "keepttl") && ttl_ms.is_none() {
            keep = true;
        } else if let (Some(which), Some(n), false, None) = (timed, next, keep, ttl_ms) {
            ttl_ms = Some(expire_arg(which % 2 == 1, which >= 2, n, "set")?);
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let old = if want_old || keep || nx || xx {
        cx.entry(key)?
    } else {
        None
    };
    if (nx && old.is_some()) || (xx && old.is_none()) {
        // Not set: nil, or with GET the value kept.
        return Ok(match (want_old, old) {
            (true, Some((v, _))) => Reply::Bulk(v),
            _ => Reply::Nil,
        });
    }
    let ttl = match (ttl_ms, keep) {
        (Some(ms), _) => ttl_of(ms),
        (None, true) => old.as_ref().and_then(|(_, t)| *t),
        (None, false) => None,
    };
    cx.put(key, value, ttl)?;
    Ok(match (want_old, old) {
        (true, old) => Reply::opt_bulk(old.map(|(v, _)| v)),
        (false, _) => Reply::ok(),
    })
}

/// SETNX key value.
pub fn setnx(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    if cx.ks().contains(&args[1])? {
        return Ok(Reply::Int(0));
    }
    cx.put(&args[1], &args[2], None)?;
    Ok(Reply::Int(1))
}

fn setex_with(cx: &mut Cx<'_>, args: &[Vec<u8>], unit_ms: bool, cmd: &str) -> CmdResult {
    let ms = expire_arg(unit_ms, false, &args[2], cmd)?;
    cx.put(&args[1], &args[3], ttl_of(ms))?;
    Ok(Reply::ok())
}

/// SETEX key seconds value.
pub fn setex(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    setex_with(cx, args, false, "setex")
}

/// PSETEX key milliseconds value.
pub fn psetex(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    setex_with(cx, args, true, "psetex")
}

/// GETSET key value.
pub fn getset(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let old = cx.get(&args[1])?;
    cx.put(&args[1], &args[2], None)?;
    Ok(Reply::opt_bulk(old))
}

/// GETDEL key.
pub fn getdel(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let old = cx.get(&args[1])?;
    if old.is_some() {
        cx.del(&args[1])?;
    }
    Ok(Reply::opt_bulk(old))
}

/// GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST].
pub fn getex(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    enum Change {
        Keep,
        Persist,
        Ttl(i64),
    }
    let change = match &args[2..] {
        [] => Change::Keep,
        [p] if is(p, "persist") => Change::Persist,
        [o, n] => match ["ex", "px", "exat", "pxat"].iter().position(|x| is(o, x)) {
            Some(w) => Change::Ttl(expire_arg(w % 2 == 1, w >= 2, n, "getex")?),
            None => return Err(syntax()),
        },
        _ => return Err(syntax()),
    };
    let Some(v) = cx.get(key)? else {
        return Ok(Reply::Nil);
    };
    match change {
        Change::Keep => {}
        Change::Persist => {
            if cx.ks().persist(key)? {
                cx.shared.watches.touch(cx.s.db, key);
            }
        }
        Change::Ttl(ms) if ms <= 0 => {
            cx.del(key)?;
        }
        Change::Ttl(ms) => {
            if cx.ks().expire(key, Duration::from_millis(ms as u64))? {
                cx.shared.watches.touch(cx.s.db, key);
            }
        }
    }
    Ok(Reply::Bulk(v))
}

/// MGET key [key ...].
pub fn mget(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    // One snapshot: the values are those of one instant.
    let snap = cx.ks().snapshot()?;
    let mut out = Vec::with_capacity(args.len() - 1);
    for k in &args[1..] {
        out.push(Reply::opt_bulk(snap.get(k)?));
    }
    Ok(Reply::Array(out))
}

fn mset_batch(cx: &Cx<'_>, args: &[Vec<u8>]) -> Result<WriteBatch, Reply> {
    let mut batch = WriteBatch::new();
    for pair in args[1..].chunks(2) {
        batch.put_in(cx.ks(), &pair[0], &pair[1])?;
    }
    Ok(batch)
}

/// MSET key value [key value ...].
pub fn mset(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(super::wrong_arity("mset"));
    }
    let batch = mset_batch(cx, args)?;
    cx.write(batch, args[1..].iter().step_by(2).map(Vec::as_slice))?;
    Ok(Reply::ok())
}

/// MSETNX key value [key value ...].
pub fn msetnx(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(super::wrong_arity("msetnx"));
    }
    for k in args[1..].iter().step_by(2) {
        if cx.ks().contains(k)? {
            return Ok(Reply::Int(0));
        }
    }
    let batch = mset_batch(cx, args)?;
    cx.write(batch, args[1..].iter().step_by(2).map(Vec::as_slice))?;
    Ok(Reply::Int(1))
}

fn incr_by(cx: &mut Cx<'_>, key: &[u8], by: i64) -> CmdResult {
    let old = cx.entry(key)?;
    let (n, ttl) = match &old {
        Some((v, ttl)) => (parse_i64(v).ok_or_else(not_int)?, *ttl),
        None => (0, None),
    };
    let n = n
        .checked_add(by)
        .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
    cx.put(key, n.to_string().as_bytes(), ttl)?;
    Ok(Reply::Int(n))
}

/// INCR key.
pub fn incr(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    incr_by(cx, &args[1], 1)
}

/// DECR key.
pub fn decr(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    incr_by(cx, &args[1], -1)
}

/// INCRBY key increment.
pub fn incrby(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let by = int(&args[2])?;
    incr_by(cx, &args[1], by)
}

/// DECRBY key decrement.
pub fn decrby(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let by = int(&args[2])?;
    let by = by
        .checked_neg()
        .ok_or_else(|| Reply::err("decrement would overflow"))?;
    incr_by(cx, &args[1], by)
}

/// INCRBYFLOAT key increment.
pub fn incrbyfloat(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let not_float = || Reply::err("value is not a valid float");
    let by = parse_f64(&args[2]).ok_or_else(not_float)?;
    let old = cx.entry(&args[1])?;
    let (n, ttl) = match &old {
        Some((v, ttl)) => (parse_f64(v).ok_or_else(not_float)?, *ttl),
        None => (0.0, None),
    };
    let n = n + by;
    if !n.is_finite() {
        return Err(Reply::err("increment would produce NaN or Infinity"));
    }
    let text = format_double(n);
    cx.put(&args[1], text.as_bytes(), ttl)?;
    Ok(Reply::Bulk(text.into_bytes()))
}

/// APPEND key value.
pub fn append(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (mut v, ttl) = cx.entry(&args[1])?.unwrap_or_default();
    if v.len() as u64 + args[2].len() as u64 > MAX_STRING {
        return Err(Reply::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    v.extend_from_slice(&args[2]);
    cx.put(&args[1], &v, ttl)?;
    Ok(Reply::Int(v.len() as i64))
}

/// STRLEN key.
pub fn strlen(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let n = cx.ks().get_with(&args[1], |v| v.map_or(0, <[u8]>::len))?;
    Ok(Reply::Int(n as i64))
}

/// GETRANGE key start end (and SUBSTR).
pub fn getrange(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (start, end) = (int(&args[2])?, int(&args[3])?);
    let v = cx.get(&args[1])?.unwrap_or_default();
    let len = v.len() as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return Ok(Reply::bulk(""));
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    if start > end || start >= len {
        return Ok(Reply::bulk(""));
    }
    Ok(Reply::bulk(&v[start as usize..=end as usize]))
}

/// SETRANGE key offset value.
pub fn setrange(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let offset = int(&args[2])?;
    if offset < 0 {
        return Err(Reply::err("offset is out of range"));
    }
    let value = &args[3];
    let old = cx.entry(&args[1])?;
    if value.is_empty() {
        return Ok(Reply::Int(old.map_or(0, |(v, _)| v.len() as i64)));
    }
    if offset as u64 + value.len() as u64 > MAX_STRING {
        return Err(Reply::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    let (mut v, ttl) = old.unwrap_or_default();
    let (offset, end) = (offset as usize, offset as usize + value.len());
    if v.len() < end {
        v.resize(end, 0);
    }
    v[offset..end].copy_from_slice(value);
    cx.put(&args[1], &v, ttl)?;
    Ok(Reply::Int(v.len() as i64))
}
