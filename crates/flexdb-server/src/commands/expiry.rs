//! Expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (with NX, XX,
//! GT, LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST, on the store's
//! own deadlines.
//!
//! Invariants: a deadline at or before now deletes the key (as Redis);
//! a key without a deadline counts as an infinite one for GT and LT; the
//! key's lock is held (these are `WRITE` commands), so its deadline read
//! for NX/XX/GT/LT is the one replaced.

use std::time::Duration;

use super::args::{int, is, CmdResult};
use super::Cx;
use crate::resp::Reply;
use crate::state::unix_now_ms;

fn expire_with(
    cx: &mut Cx<'_>,
    args: &[Vec<u8>],
    unit_ms: bool,
    absolute: bool,
    cmd: &str,
) -> CmdResult {
    let key = &args[1];
    let n = int(&args[2])?;
    let invalid = || Reply::err(format!("invalid expire time in '{cmd}' command"));
    let ms = if unit_ms {
        Some(n)
    } else {
        n.checked_mul(1000)
    };
    let ms = ms.ok_or_else(invalid)?;
    let now = unix_now_ms() as i64;
    let left = if absolute {
        ms.saturating_sub(now)
    } else {
        ms.checked_add(now).ok_or_else(invalid)?;
        ms
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            return Err(Reply::err(format!(
                "Unsupported option {}",
                super::args::show(a)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Reply::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(Reply::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    let Some(current) = cx.ks().ttl(key)? else {
        return Ok(Reply::Int(0));
    };
    let current_ms = current.map(|d| d.as_millis() as i64);
    let allowed = match current_ms {
        None => !xx && !gt,
        Some(c) => !nx && (!gt || left > c) && (!lt || left < c),
    };
    if !allowed {
        return Ok(Reply::Int(0));
    }
    if left <= 0 {
        cx.del(key)?;
        return Ok(Reply::Int(1));
    }
    let done = cx.ks().expire(key, Duration::from_millis(left as u64))?;
    if done {
        cx.shared.watches.touch(cx.s.db, key);
    }
    Ok(Reply::Int(i64::from(done)))
}

/// EXPIRE key seconds [NX|XX|GT|LT].
pub fn expire(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    expire_with(cx, args, false, false, "expire")
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT].
pub fn pexpire(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    expire_with(cx, args, true, false, "pexpire")
}

/// EXPIREAT key unix-seconds [NX|XX|GT|LT].
pub fn expireat(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    expire_with(cx, args, false, true, "expireat")
}

/// PEXPIREAT key unix-milliseconds [NX|XX|GT|LT].
pub fn pexpireat(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    expire_with(cx, args, true, true, "pexpireat")
}

/// The time `key` has left in ms: -2 no key, -1 no deadline.
fn left_ms(cx: &Cx<'_>, key: &[u8]) -> Result<i64, Reply> {
    Ok(match cx.ks().ttl(key)? {
        None => -2,
        Some(None) => -1,
        Some(Some(d)) => d.as_millis() as i64,
    })
}

/// TTL key: seconds left, rounded to the nearest.
pub fn ttl(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let ms = left_ms(cx, &args[1])?;
    Ok(Reply::Int(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

/// PTTL key.
pub fn pttl(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(left_ms(cx, &args[1])?))
}

/// EXPIRETIME key: the deadline in Unix seconds.
pub fn expiretime(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let ms = left_ms(cx, &args[1])?;
    Ok(Reply::Int(if ms < 0 {
        ms
    } else {
        (unix_now_ms() as i64 + ms) / 1000
    }))
}

/// PEXPIRETIME key: the deadline in Unix milliseconds.
pub fn pexpiretime(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let ms = left_ms(cx, &args[1])?;
    Ok(Reply::Int(if ms < 0 {
        ms
    } else {
        unix_now_ms() as i64 + ms
    }))
}

/// PERSIST key.
pub fn persist(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let done = cx.ks().persist(&args[1])?;
    if done {
        cx.shared.watches.touch(cx.s.db, &args[1]);
    }
    Ok(Reply::Int(i64::from(done)))
}
