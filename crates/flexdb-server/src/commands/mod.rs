//! The command table and dispatch: finding a command, checking its
//! arity and the client's authentication, queueing it inside MULTI, and
//! running it under the locks it needs (see `crate::locks`).
//!
//! Invariants: a command runs only with the locks its flags call for,
//! taken here and nowhere else; every reply of a failed check is one of
//! Redis's error strings; no handler sees fewer arguments than its arity
//! allows.

pub mod args;
pub mod client;
pub mod command;
pub mod config_cmd;
pub mod connection;
pub mod expiry;
pub mod keys;
pub mod range;
pub mod server;
pub mod strings;
pub mod txn;

use std::sync::atomic::Ordering;
use std::time::Duration;

use flexdb::{Keyspace, WriteBatch};

use crate::locks::Held;
use crate::resp::Reply;
use crate::state::{Session, Shared};
use args::{show, CmdResult};

/// The command writes keys (its key stripes are locked).
pub const WRITE: u32 = 1;
/// The command needs the gate exclusively.
pub const EXCLUSIVE: u32 = 2;
/// The command runs without authentication.
pub const NOAUTH: u32 = 4;
/// The command touches no key (connection and server commands): no lock.
pub const NOLOCK: u32 = 8;
/// The command reads keys only.
pub const READONLY: u32 = 16;
/// The command is not queued by MULTI but runs at once.
pub const NOQUEUE: u32 = 32;

/// A command's handler.
pub type Handler = fn(&mut Cx<'_>, &[Vec<u8>]) -> CmdResult;

/// A command: its name, arity (negative: at least that many arguments,
/// the name included), flags, key positions (first, last, step as
/// COMMAND reports them) and handler.
pub struct Spec {
    /// Lowercase name.
    pub name: &'static str,
    /// Arity as COMMAND reports it.
    pub arity: i32,
    /// Flags (`WRITE`, ...).
    pub flags: u32,
    /// The first key's position (0: none).
    pub first: i32,
    /// The last key's position (negative: from the end).
    pub last: i32,
    /// The step between keys.
    pub step: i32,
    /// The handler.
    pub run: Handler,
}

macro_rules! spec {
    ($name:literal, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $run:path) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first: $first,
            last: $last,
            step: $step,
            run: $run,
        }
    };
}

/// Every command, in no particular order.
pub static COMMANDS: &[Spec] = &[
    spec!("ping", -1, NOLOCK, 0, 0, 0, connection::ping),
    spec!("echo", 2, NOLOCK, 0, 0, 0, connection::echo),
    spec!(
        "quit",
        -1,
        NOLOCK | NOAUTH | NOQUEUE,
        0,
        0,
        0,
        connection::quit
    ),
    spec!(
        "hello",
        -1,
        NOLOCK | NOAUTH | NOQUEUE,
        0,
        0,
        0,
        connection::hello
    ),
    spec!(
        "auth",
        -2,
        NOLOCK | NOAUTH | NOQUEUE,
        0,
        0,
        0,
        connection::auth
    ),
    spec!("select", 2, NOLOCK, 0, 0, 0, connection::select),
    spec!("get", 2, READONLY, 1, 1, 1, strings::get),
    spec!("set", -3, WRITE, 1, 1, 1, strings::set),
    spec!("setnx", 3, WRITE, 1, 1, 1, strings::setnx),
    spec!("setex", 4, WRITE, 1, 1, 1, strings::setex),
    spec!("psetex", 4, WRITE, 1, 1, 1, strings::psetex),
    spec!("getset", 3, WRITE, 1, 1, 1, strings::getset),
    spec!("getdel", 2, WRITE, 1, 1, 1, strings::getdel),
    spec!("getex", -2, WRITE, 1, 1, 1, strings::getex),
    spec!("mget", -2, READONLY, 1, -1, 1, strings::mget),
    spec!("mset", -3, WRITE, 1, -1, 2, strings::mset),
    spec!("msetnx", -3, WRITE, 1, -1, 2, strings::msetnx),
    spec!("incr", 2, WRITE, 1, 1, 1, strings::incr),
    spec!("decr", 2, WRITE, 1, 1, 1, strings::decr),
    spec!("incrby", 3, WRITE, 1, 1, 1, strings::incrby),
    spec!("decrby", 3, WRITE, 1, 1, 1, strings::decrby),
    spec!("incrbyfloat", 3, WRITE, 1, 1, 1, strings::incrbyfloat),
    spec!("append", 3, WRITE, 1, 1, 1, strings::append),
    spec!("strlen", 2, READONLY, 1, 1, 1, strings::strlen),
    spec!("getrange", 4, READONLY, 1, 1, 1, strings::getrange),
    spec!("substr", 4, READONLY, 1, 1, 1, strings::getrange),
    spec!("setrange", 4, WRITE, 1, 1, 1, strings::setrange),
    spec!("del", -2, WRITE, 1, -1, 1, keys::del),
    spec!("unlink", -2, WRITE, 1, -1, 1, keys::del),
    spec!("exists", -2, READONLY, 1, -1, 1, keys::exists),
    spec!("type", 2, READONLY, 1, 1, 1, keys::type_),
    spec!("keys", 2, READONLY, 0, 0, 0, keys::keys),
    spec!("scan", -2, READONLY, 0, 0, 0, keys::scan),
    spec!("dbsize", 1, READONLY, 0, 0, 0, keys::dbsize),
    spec!("randomkey", 1, READONLY, 0, 0, 0, keys::randomkey),
    spec!("rename", 3, WRITE, 1, 2, 1, keys::rename),
    spec!("renamenx", 3, WRITE, 1, 2, 1, keys::renamenx),
    spec!("copy", -3, WRITE | EXCLUSIVE, 1, 2, 1, keys::copy),
    spec!("flushdb", -1, WRITE | EXCLUSIVE, 0, 0, 0, keys::flushdb),
    spec!("flushall", -1, WRITE | EXCLUSIVE, 0, 0, 0, keys::flushall),
    spec!("expire", -3, WRITE, 1, 1, 1, expiry::expire),
    spec!("pexpire", -3, WRITE, 1, 1, 1, expiry::pexpire),
    spec!("expireat", -3, WRITE, 1, 1, 1, expiry::expireat),
    spec!("pexpireat", -3, WRITE, 1, 1, 1, expiry::pexpireat),
    spec!("ttl", 2, READONLY, 1, 1, 1, expiry::ttl),
    spec!("pttl", 2, READONLY, 1, 1, 1, expiry::pttl),
    spec!("expiretime", 2, READONLY, 1, 1, 1, expiry::expiretime),
    spec!("pexpiretime", 2, READONLY, 1, 1, 1, expiry::pexpiretime),
    spec!("persist", 2, WRITE, 1, 1, 1, expiry::persist),
    spec!("multi", 1, NOLOCK | NOQUEUE, 0, 0, 0, txn::multi),
    spec!("exec", 1, NOLOCK | NOQUEUE, 0, 0, 0, txn::exec),
    spec!("discard", 1, NOLOCK | NOQUEUE, 0, 0, 0, txn::discard),
    spec!("watch", -2, NOLOCK | NOQUEUE, 1, -1, 1, txn::watch),
    spec!("unwatch", 1, NOLOCK, 0, 0, 0, txn::unwatch),
    spec!("info", -1, NOLOCK, 0, 0, 0, server::info),
    spec!("config", -2, NOLOCK, 0, 0, 0, config_cmd::config),
    spec!("client", -2, NOLOCK, 0, 0, 0, client::client),
    spec!("command", -1, NOLOCK, 0, 0, 0, command::command),
    spec!("save", 1, NOLOCK, 0, 0, 0, server::save),
    spec!("bgsave", -1, NOLOCK, 0, 0, 0, server::bgsave),
    spec!("lastsave", 1, NOLOCK, 0, 0, 0, server::lastsave),
    spec!("shutdown", -1, NOLOCK, 0, 0, 0, server::shutdown),
    spec!("time", 1, NOLOCK, 0, 0, 0, server::time),
    spec!("flexdb.range", -3, READONLY, 0, 0, 0, range::range),
    spec!(
        "flexdb.delrange",
        3,
        WRITE | EXCLUSIVE,
        0,
        0,
        0,
        range::delrange
    ),
];

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
}

/// A live pair: its value and the time it has left (`None`: no deadline).
pub type Entry = flexdb::ValueAndTtl;

/// A running command's view: the shared state and the client's session.
pub struct Cx<'a> {
    /// The shared state.
    pub shared: &'a Shared,
    /// The client's session.
    pub s: &'a mut Session,
}

impl From<flexdb::Error> for Reply {
    fn from(e: flexdb::Error) -> Reply {
        match e {
            flexdb::Error::KeyTooLarge { .. } | flexdb::Error::ValueTooLarge { .. } => {
                Reply::err(format!("string exceeds maximum allowed size ({e})"))
            }
            e => Reply::err(e),
        }
    }
}

impl Cx<'_> {
    /// The selected database's keyspace.
    pub fn ks(&self) -> &Keyspace {
        self.ks_of(self.s.db)
    }

    /// Database `db`'s keyspace.
    pub fn ks_of(&self, db: usize) -> &Keyspace {
        &self.shared.dbs[db]
    }

    /// The value of `key` in database `db`.
    pub fn get_in(&self, db: usize, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
        let v = self.ks_of(db).get(key)?;
        self.count_lookup(v.is_some());
        Ok(v)
    }

    /// The value of `key` in the selected database.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
        self.get_in(self.s.db, key)
    }

    /// The value of `key` in `db` and the time it has left (`None`: no
    /// deadline); `None` when there is no live pair.
    pub fn entry_in(&self, db: usize, key: &[u8]) -> Result<Option<Entry>, Reply> {
        let e = self.ks_of(db).value_and_ttl(key)?;
        self.count_lookup(e.is_some());
        Ok(e)
    }

    /// Counts a key lookup for `INFO stats`.
    fn count_lookup(&self, hit: bool) {
        let counter = if hit {
            &self.shared.stats.hits
        } else {
            &self.shared.stats.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// [`Cx::entry_in`] in the selected database.
    pub fn entry(&self, key: &[u8]) -> Result<Option<Entry>, Reply> {
        self.entry_in(self.s.db, key)
    }

    /// Sets `key` in `db` to `value`, with `ttl` left when given (zero:
    /// the pair is deleted at once, as a deadline already past).
    pub fn put_in(
        &self,
        db: usize,
        key: &[u8],
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<(), Reply> {
        let ks = self.ks_of(db);
        match ttl {
            None => ks.put(key, value)?,
            Some(t) if t.is_zero() => ks.delete(key)?,
            Some(t) => ks.put_with_ttl(key, value, t)?,
        }
        self.shared.watches.touch(db, key);
        Ok(())
    }

    /// [`Cx::put_in`] in the selected database.
    pub fn put(&self, key: &[u8], value: &[u8], ttl: Option<Duration>) -> Result<(), Reply> {
        self.put_in(self.s.db, key, value, ttl)
    }

    /// Deletes `key` from the selected database; whether it was there.
    pub fn del(&self, key: &[u8]) -> Result<bool, Reply> {
        let ks = self.ks();
        if !ks.contains(key)? {
            return Ok(false);
        }
        ks.delete(key)?;
        self.shared.watches.touch(self.s.db, key);
        Ok(true)
    }

    /// Writes `batch` (built for the selected database) and marks the
    /// watchers of `keys`.
    pub fn write<'k>(
        &self,
        batch: WriteBatch,
        keys: impl Iterator<Item = &'k [u8]>,
    ) -> Result<(), Reply> {
        if batch.is_empty() {
            return Ok(());
        }
        self.shared.db.write(batch)?;
        for k in keys {
            self.shared.watches.touch(self.s.db, k);
        }
        Ok(())
    }
}

/// `ERR wrong number of arguments for 'name' command`.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::err(format!("wrong number of arguments for '{name}' command"))
}

/// The keys of `args` per `spec`'s key positions.
fn key_args<'a>(spec: &Spec, args: &'a [Vec<u8>]) -> impl Iterator<Item = &'a [u8]> {
    let n = args.len() as i32;
    let (first, step) = (spec.first, spec.step.max(1));
    let last = if spec.last < 0 {
        n + spec.last
    } else {
        spec.last.min(n - 1)
    };
    let mut out = Vec::new();
    if first > 0 {
        let mut i = first;
        while i <= last && i < n {
            out.push(args[i as usize].as_slice());
            i += step;
        }
    }
    out.into_iter()
}

/// Checks a command before it runs or is queued: known, right arity,
/// allowed before AUTH.
pub fn check(s: &Session, args: &[Vec<u8>]) -> Result<&'static Spec, Reply> {
    let name = &args[0];
    let Some(spec) = lookup(name) else {
        let mut msg = format!(
            "unknown command '{}', with args beginning with: ",
            show(&name[..name.len().min(128)])
        );
        for a in args.iter().skip(1).take(16) {
            msg.push_str(&format!("'{}' ", show(&a[..a.len().min(128)])));
        }
        return Err(Reply::err(msg));
    };
    let n = args.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || n < -spec.arity {
        return Err(wrong_arity(spec.name));
    }
    if !s.authed && spec.flags & NOAUTH == 0 {
        return Err(Reply::Error("NOAUTH Authentication required.".into()));
    }
    Ok(spec)
}

/// Runs `spec` holding the locks it needs (none when `in_exec`: EXEC holds
/// the gate exclusively).
pub fn run(cx: &mut Cx<'_>, spec: &Spec, args: &[Vec<u8>], in_exec: bool) -> Reply {
    let shared = cx.shared;
    let db = cx.s.db;
    let _held = if in_exec || spec.flags & NOLOCK != 0 {
        Held::Nothing
    } else if spec.flags & EXCLUSIVE != 0 {
        shared.locks.exclusive()
    } else if spec.flags & WRITE != 0 {
        shared.locks.shared(key_args(spec, args).map(|k| (db, k)))
    } else {
        shared.locks.shared(std::iter::empty())
    };
    *cx.s.info.last_cmd.lock() = spec.name;
    shared.stats.commands.fetch_add(1, Ordering::Relaxed);
    match (spec.run)(cx, args) {
        Ok(r) | Err(r) => r,
    }
}

/// Runs one request from a client: checks it, queues it when in MULTI,
/// runs it otherwise; `None` for an empty request.
pub fn dispatch(shared: &Shared, s: &mut Session, args: &[Vec<u8>]) -> Option<Reply> {
    if args.is_empty() {
        return None;
    }
    let spec = match check(s, args) {
        Ok(spec) => spec,
        Err(e) => {
            if s.multi.is_some() {
                s.multi_failed = true;
            }
            return Some(e);
        }
    };
    if let Some(queue) = &mut s.multi {
        if spec.flags & NOQUEUE == 0 {
            queue.push(args.to_vec());
            return Some(Reply::Simple("QUEUED".into()));
        }
    }
    let mut cx = Cx { shared, s };
    Some(run(&mut cx, spec, args, false))
}
