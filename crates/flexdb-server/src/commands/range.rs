//! The ordered-store extensions Redis lacks: `FLEXDB.RANGE start end
//! [LIMIT n] [REV] [WITHVALUES]` and `FLEXDB.DELRANGE start end`.
//!
//! Bounds are written as ZRANGEBYLEX's: `[key` includes the key, `(key`
//! excludes it, `-` is before every key and `+` after every key.
//!
//! Invariants: RANGE reads one snapshot (its keys are those of one
//! instant) and returns keys in byte order (reverse with REV); DELRANGE
//! is one range delete, atomic and durable as any write, that marks the
//! watchers of every watched key inside the range.

use std::ops::Bound;

use super::args::{int, is, syntax, CmdResult};
use super::Cx;
use crate::resp::Reply;

type Bounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// One bound as written.
fn bound(arg: &[u8], low: bool) -> Result<Bound<Vec<u8>>, Reply> {
    let bad = || Reply::err("min or max not valid string range item");
    match arg.split_first() {
        Some((b'-', [])) if low => Ok(Bound::Unbounded),
        Some((b'+', [])) if !low => Ok(Bound::Unbounded),
        Some((b'[', k)) => Ok(Bound::Included(k.to_vec())),
        Some((b'(', k)) => Ok(Bound::Excluded(k.to_vec())),
        _ => Err(bad()),
    }
}

fn bounds(args: &[Vec<u8>]) -> Result<Bounds, Reply> {
    Ok((bound(&args[1], true)?, bound(&args[2], false)?))
}

/// Whether the bounds admit no key (start past the end).
fn empty(b: &Bounds) -> bool {
    match (&b.0, &b.1) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
        _ => false,
    }
}

fn inside(b: &Bounds, k: &[u8]) -> bool {
    let lo = match &b.0 {
        Bound::Included(s) => k >= s.as_slice(),
        Bound::Excluded(s) => k > s.as_slice(),
        Bound::Unbounded => true,
    };
    let hi = match &b.1 {
        Bound::Included(e) => k <= e.as_slice(),
        Bound::Excluded(e) => k < e.as_slice(),
        Bound::Unbounded => true,
    };
    lo && hi
}

/// FLEXDB.RANGE start end [LIMIT n] [REV] [WITHVALUES].
pub fn range(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let b = bounds(args)?;
    let (mut limit, mut rev, mut values) = (usize::MAX, false, false);
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "limit") && i + 1 < args.len() {
            limit = usize::try_from(int(&args[i + 1])?).map_err(|_| syntax())?;
            i += 1;
        } else if is(&args[i], "rev") {
            rev = true;
        } else if is(&args[i], "withvalues") {
            values = true;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let mut out = Vec::new();
    if empty(&b) || limit == 0 {
        return Ok(Reply::Array(out));
    }
    let mut it = cx.ks().range(b).limit(limit);
    let mut n = 0;
    while n < limit {
        let next = if rev {
            it.next_back_ref()
        } else {
            it.next_ref()
        };
        let Some(kv) = next else {
            break;
        };
        let (k, v) = kv?;
        out.push(Reply::bulk(k));
        if values {
            out.push(Reply::bulk(v));
        }
        n += 1;
    }
    Ok(Reply::Array(out))
}

/// FLEXDB.DELRANGE start end: removes every key in the range; `OK`.
pub fn delrange(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let b = bounds(args)?;
    if empty(&b) {
        return Ok(Reply::ok());
    }
    cx.ks().delete_range(b.clone())?;
    cx.shared
        .watches
        .touch_where(Some(cx.s.db), |k| inside(&b, k));
    Ok(Reply::ok())
}
