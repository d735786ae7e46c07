//! Generic key commands: DEL, EXISTS, TYPE, KEYS, SCAN, DBSIZE,
//! RANDOMKEY, RENAME, RENAMENX, COPY, FLUSHDB, FLUSHALL.
//!
//! Invariants: multi-key writes are one write batch (all or nothing,
//! also across a crash); a moved or copied key keeps its deadline; SCAN
//! resumes at the key after the last one it looked at (see
//! `crate::cursor`), so it returns every key present for the whole scan
//! at least once, and never loops.

use std::ops::Bound;
use std::time::Duration;

use flexdb::{Keyspace, WriteBatch};

use super::args::{int, is, syntax, CmdResult};
use super::Cx;
use crate::glob;
use crate::resp::Reply;
use crate::state::DATABASES;

/// DEL key [key ...] (and UNLINK).
pub fn del(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let mut keys: Vec<&[u8]> = args[1..].iter().map(Vec::as_slice).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut batch = WriteBatch::new();
    let mut gone = Vec::new();
    for k in keys {
        if cx.ks().contains(k)? {
            batch.delete_in(cx.ks(), k)?;
            gone.push(k);
        }
    }
    cx.write(batch, gone.iter().copied())?;
    Ok(Reply::Int(gone.len() as i64))
}

/// EXISTS key [key ...]: repeated keys count each time.
pub fn exists(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in &args[1..] {
        n += i64::from(cx.ks().contains(k)?);
    }
    Ok(Reply::Int(n))
}

/// TYPE key: every value is a string.
pub fn type_(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let t = if cx.ks().contains(&args[1])? {
        "string"
    } else {
        "none"
    };
    Ok(Reply::Simple(t.into()))
}

/// Keys found, and where to go on (`None`: the keyspace ended).
type Walked = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// Every key of `ks` from `start` matching `pattern`, at most `budget`
/// looked at; the keys and whether the keyspace ended.
fn walk(
    ks: &Keyspace,
    start: &[u8],
    pattern: Option<&[u8]>,
    budget: usize,
) -> Result<Walked, Reply> {
    let prefix = pattern.map(glob::literal_prefix).unwrap_or_default();
    // No key before the pattern's literal prefix can match.
    let start = start.max(prefix.as_slice());
    let mut it = ks
        .range((Bound::Included(start.to_vec()), Bound::Unbounded))
        .limit(budget);
    let mut out = Vec::new();
    let mut seen = 0;
    while let Some(kv) = it.next_ref() {
        let (k, _) = kv?;
        if !k.starts_with(&prefix) && k > prefix.as_slice() {
            return Ok((out, None));
        }
        if pattern.is_none_or(|p| glob::matches(p, k)) {
            out.push(k.to_vec());
        }
        seen += 1;
        if seen >= budget {
            let mut next = k.to_vec();
            next.push(0);
            return Ok((out, Some(next)));
        }
    }
    Ok((out, None))
}

/// KEYS pattern.
pub fn keys(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let pattern = &args[1];
    let start = glob::literal_prefix(pattern);
    let (found, _) = walk(cx.ks(), &start, Some(pattern), usize::MAX)?;
    Ok(Reply::Array(found.into_iter().map(Reply::Bulk).collect()))
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE t].
pub fn scan(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let invalid = || Reply::err("invalid cursor");
    let cursor: u64 = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(invalid)?;
    let (mut pattern, mut count, mut type_ok) = (None, 10usize, true);
    let mut i = 2;
    while i < args.len() {
        let Some(v) = args.get(i + 1) else {
            return Err(syntax());
        };
        if is(&args[i], "match") {
            pattern = Some(v.as_slice());
        } else if is(&args[i], "count") {
            count = match int(v)? {
                n if n >= 1 => n as usize,
                _ => return Err(syntax()),
            };
        } else if is(&args[i], "type") {
            type_ok = is(v, "string");
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    let db = cx.s.db;
    let start = match cursor {
        0 => Vec::new(),
        c => cx.shared.cursors.resume(db, c).ok_or_else(invalid)?,
    };
    let (found, next) = walk(cx.ks(), &start, pattern, count)?;
    let next = next.map_or(0, |k| cx.shared.cursors.make(db, k));
    let found = if type_ok { found } else { Vec::new() };
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(found.into_iter().map(Reply::Bulk).collect()),
    ]))
}

/// How many keys `ks` holds (by counting: the store keeps no count).
pub fn count_keys(ks: &Keyspace) -> Result<i64, Reply> {
    let mut it = ks.iter();
    let mut n = 0;
    while let Some(kv) = it.next_ref() {
        kv?;
        n += 1;
    }
    Ok(n)
}

/// DBSIZE.
pub fn dbsize(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(count_keys(cx.ks())?))
}

/// RANDOMKEY: the first key at or after a random point (keys after a
/// long gap are likelier than others).
pub fn randomkey(cx: &mut Cx<'_>, _: &[Vec<u8>]) -> CmdResult {
    let point = rand::random::<[u8; 8]>().to_vec();
    for range in [
        (Bound::Included(point), Bound::Unbounded),
        (Bound::Unbounded, Bound::Unbounded),
    ] {
        let mut it = cx.ks().range(range);
        if let Some(kv) = it.next_ref() {
            return Ok(Reply::bulk(kv?.0));
        }
    }
    Ok(Reply::Nil)
}

/// A deadline as a TTL to write again: at least a millisecond (a pair read
/// live is written live).
fn keep_ttl(ttl: Option<Duration>) -> Option<Duration> {
    ttl.map(|t| t.max(Duration::from_millis(1)))
}

fn rename_with(cx: &mut Cx<'_>, args: &[Vec<u8>], nx: bool) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    let Some((v, ttl)) = cx.entry(src)? else {
        return Err(Reply::err("no such key"));
    };
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
    }
    if nx && cx.ks().contains(dst)? {
        return Ok(Reply::Int(0));
    }
    let mut batch = WriteBatch::new();
    match keep_ttl(ttl) {
        Some(t) => batch.put_with_ttl_in(cx.ks(), dst, &v, t)?,
        None => batch.put_in(cx.ks(), dst, &v)?,
    };
    batch.delete_in(cx.ks(), src)?;
    cx.write(batch, [src.as_slice(), dst.as_slice()].into_iter())?;
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

/// RENAME key newkey.
pub fn rename(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    rename_with(cx, args, false)
}

/// RENAMENX key newkey.
pub fn renamenx(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    rename_with(cx, args, true)
}

/// COPY source destination [DB n] [REPLACE].
pub fn copy(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    let (mut to_db, mut replace) = (cx.s.db, false);
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "db") && i + 1 < args.len() {
            to_db = db_index(&args[i + 1])?;
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if src == dst && to_db == cx.s.db {
        return Err(Reply::err("source and destination objects are the same"));
    }
    let Some((v, ttl)) = cx.entry(src)? else {
        return Ok(Reply::Int(0));
    };
    if !replace && cx.ks_of(to_db).contains(dst)? {
        return Ok(Reply::Int(0));
    }
    cx.put_in(to_db, dst, &v, keep_ttl(ttl))?;
    Ok(Reply::Int(1))
}

/// A database number given to SELECT, COPY... (`ERR DB index is out of
/// range` unless 0–15).
pub fn db_index(arg: &[u8]) -> Result<usize, Reply> {
    let n = int(arg)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n < DATABASES)
        .ok_or_else(|| Reply::err("DB index is out of range"))
}

fn flush_mode(args: &[Vec<u8>]) -> Result<(), Reply> {
    match &args[1..] {
        [] => Ok(()),
        [m] if is(m, "async") || is(m, "sync") => Ok(()),
        _ => Err(syntax()),
    }
}

/// Empties database `db`: one range delete.
pub fn flush_db(cx: &Cx<'_>, db: usize) -> Result<(), Reply> {
    cx.ks_of(db).delete_range::<[u8], _>(..)?;
    cx.shared.watches.touch_where(Some(db), |_| true);
    Ok(())
}

/// FLUSHDB [ASYNC|SYNC].
pub fn flushdb(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    flush_mode(args)?;
    flush_db(cx, cx.s.db)?;
    Ok(Reply::ok())
}

/// FLUSHALL [ASYNC|SYNC].
pub fn flushall(cx: &mut Cx<'_>, args: &[Vec<u8>]) -> CmdResult {
    flush_mode(args)?;
    for db in 0..DATABASES {
        flush_db(cx, db)?;
    }
    Ok(Reply::ok())
}
