//! The public face of expiry: puts with a time to live, the time a pair
//! has left (alone or with its value), and setting or removing a live
//! pair's deadline, on `Db`, on `Keyspace` and in a `WriteBatch`.
//!
//! Invariants: every method encodes its key into its keyspace first (a
//! dropped keyspace's handle is refused); `expire` and `persist` change a
//! pair only if no write of its key came between their read and their
//! write (validated under the writer lock, retried otherwise), so they
//! never undo a concurrent write.

use std::sync::Arc;
use std::time::Duration;

use crate::batch::WriteBatch;
use crate::codec::check_sizes;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::keyspace::encoding::{encode, encode_read};
use crate::keyspace::{Keyspace, KsId};
use crate::options::WriteOptions;
use crate::read::snapshot::ReadPoint;
use crate::store::Store;

/// Sweeps `Db::remove_expired` runs at most.
const REMOVE_ATTEMPTS: usize = 16;

fn put_with_ttl(
    store: &Store,
    id: KsId,
    key: &[u8],
    value: &[u8],
    ttl: Duration,
    sync: bool,
) -> Result<()> {
    check_sizes(key, Some(value))?;
    // (The write refuses a TTL of zero: `Clock::deadline`.)
    store.write_one_expiring(&encode(id, key), value, ttl, sync)
}

fn ttl(store: &Store, id: KsId, key: &[u8]) -> Result<Option<Option<Duration>>> {
    let now = store.clock.now_ms();
    let entry = store.get_entry_with(&encode_read(id, key)?, |e| e.map(|(_, x)| x))?;
    Ok(entry.and_then(|x| time_left(x, now)))
}

/// The value of `key`'s live pair and the time it has left, from one read.
fn value_and_ttl(store: &Store, id: KsId, key: &[u8]) -> Result<Option<ValueAndTtl>> {
    let now = store.clock.now_ms();
    store.get_entry_with(&encode_read(id, key)?, |e| {
        e.and_then(|(v, x)| Some((v.to_vec(), time_left(x, now)?)))
    })
}

/// The time a pair with deadline `x` (0: none) has left at `now`: `None`
/// when it expired, `Some(None)` when it has no deadline.
fn time_left(x: u64, now: u64) -> Option<Option<Duration>> {
    match x {
        0 => Some(None),
        x if x <= now => None,
        x => Some(Some(Duration::from_millis(x - now))),
    }
}

/// A live pair's value and the time it has left (`None`: no deadline).
pub type ValueAndTtl = (Vec<u8>, Option<Duration>);

/// Gives the live pair of `key` the deadline `ttl` from now (`None`:
/// none); `false` when there is no live pair (or, with `None`, it has no
/// deadline).
fn set_expiry(
    store: &Arc<Store>,
    id: KsId,
    key: &[u8],
    ttl: Option<Duration>,
    sync: bool,
) -> Result<bool> {
    check_sizes(key, None)?;
    if let Some(t) = ttl {
        crate::batch::check_ttl(t)?;
    }
    let stored = encode(id, key).into_owned();
    loop {
        let point = ReadPoint::take(store, false);
        let now = store.clock.now_ms();
        let live = point.get_entry_with(&stored, |e| {
            e.filter(|&(_, x)| x == 0 || x > now)
                .map(|(v, x)| (v.to_vec(), x))
        })?;
        let Some((value, expires)) = live else {
            return Ok(false);
        };
        let mut batch = WriteBatch::new();
        match ttl {
            Some(t) => batch.put_with_ttl_stored(stored.clone(), value, t)?,
            None if expires == 0 => return Ok(false),
            None => batch.put_stored(stored.clone(), value)?,
        }
        let written = store.write_checked(&batch, sync, || {
            store.validate(&point, std::iter::once(&stored), &[])
        });
        match written {
            Ok(()) => return Ok(true),
            Err(Error::Conflict) => continue,
            Err(e) => return Err(e),
        }
    }
}

impl Db {
    /// Sets `key` to `value` for `ttl`: from the deadline on (the time of
    /// the write plus `ttl`, by the wall clock, in milliseconds) no read
    /// sees the pair, snapshots and iterators included (each read judges
    /// by its own time), and the store reclaims its space without a scan
    /// (an expiry queue sorted by deadline, walked every
    /// `Options::expiry_interval`). Deadlines are wall-clock instants, so
    /// they survive a reopen; a clock set back can make a pair whose
    /// deadline passed, not yet removed, visible again. A later `put`
    /// of the key replaces the pair and its deadline. A `ttl` of zero, or
    /// one too long to hold, is refused (`Error::InvalidArgument`).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let clock = flexdb::ManualClock::new();
    /// let opts = flexdb::Options::new().create_if_missing(true).clock(clock.clone());
    /// let db = flexdb::Db::open(dir.path(), opts).unwrap();
    /// db.put_with_ttl("session", "alice", Duration::from_secs(60)).unwrap();
    /// assert_eq!(db.ttl("session").unwrap(), Some(Some(Duration::from_secs(60))));
    /// clock.advance(Duration::from_secs(60));
    /// assert_eq!(db.get("session").unwrap(), None);
    /// ```
    pub fn put_with_ttl(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        let opts = WriteOptions {
            sync: self.store().opts.sync_writes,
        };
        self.put_with_ttl_opt(key, value, ttl, &opts)
    }

    /// [`Db::put_with_ttl`] with explicit write options.
    pub fn put_with_ttl_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
        opts: &WriteOptions,
    ) -> Result<()> {
        let (k, v) = (key.as_ref(), value.as_ref());
        put_with_ttl(&self.store(), KsId::DEFAULT, k, v, ttl, opts.sync)
    }

    /// The time `key`'s pair has left: `None` when there is no live pair,
    /// `Some(None)` when it has no deadline, else `Some(Some(left))`
    /// (rounded down to the millisecond).
    pub fn ttl(&self, key: impl AsRef<[u8]>) -> Result<Option<Option<Duration>>> {
        ttl(&self.store(), KsId::DEFAULT, key.as_ref())
    }

    /// The value of `key`'s live pair and the time it has left (`None`: no
    /// deadline), from one read: `None` when there is no live pair. Both
    /// come from the same version, which two calls (`get`, then `ttl`)
    /// do not promise when a write or the deadline comes between them.
    pub fn value_and_ttl(&self, key: impl AsRef<[u8]>) -> Result<Option<ValueAndTtl>> {
        value_and_ttl(&self.store(), KsId::DEFAULT, key.as_ref())
    }

    /// Gives `key`'s live pair the deadline `ttl` from now, keeping its
    /// value; `false` (nothing written) when there is no live pair. Atomic
    /// against other writes of the key.
    pub fn expire(&self, key: impl AsRef<[u8]>, ttl: Duration) -> Result<bool> {
        let store = self.store();
        set_expiry(
            &store,
            KsId::DEFAULT,
            key.as_ref(),
            Some(ttl),
            store.opts.sync_writes,
        )
    }

    /// Removes the deadline of `key`'s live pair, keeping its value;
    /// `false` (nothing written) when there is no live pair or it has no
    /// deadline.
    pub fn persist(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let store = self.store();
        set_expiry(
            &store,
            KsId::DEFAULT,
            key.as_ref(),
            None,
            store.opts.sync_writes,
        )
    }

    /// Removes every pair whose deadline passed now, rather than at the
    /// expiry thread's next run (reads never see them either way); returns
    /// how many pairs it removed (those the committer dropped first, as it
    /// rewrote their intervals, are not counted). Writes racing it on the
    /// same keys make it read their runs again; it gives up, having
    /// removed what it could, after `REMOVE_ATTEMPTS` sweeps stopped so.
    pub fn remove_expired(&self) -> Result<u64> {
        let mut removed = 0;
        for _ in 0..REMOVE_ATTEMPTS {
            let swept = self.store().sweep_expired()?;
            removed += swept.pairs;
            if !swept.stopped_early {
                break;
            }
        }
        Ok(removed)
    }
}

impl Keyspace {
    /// [`Db::put_with_ttl`] in this keyspace.
    pub fn put_with_ttl(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        let opts = WriteOptions {
            sync: self.store.opts.sync_writes,
        };
        self.put_with_ttl_opt(key, value, ttl, &opts)
    }

    /// [`Db::put_with_ttl_opt`] in this keyspace.
    pub fn put_with_ttl_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
        opts: &WriteOptions,
    ) -> Result<()> {
        let (k, v) = (key.as_ref(), value.as_ref());
        put_with_ttl(&self.store, self.live()?, k, v, ttl, opts.sync)
    }

    /// [`Db::ttl`] in this keyspace.
    pub fn ttl(&self, key: impl AsRef<[u8]>) -> Result<Option<Option<Duration>>> {
        ttl(&self.store, self.live()?, key.as_ref())
    }

    /// [`Db::value_and_ttl`] in this keyspace.
    pub fn value_and_ttl(&self, key: impl AsRef<[u8]>) -> Result<Option<ValueAndTtl>> {
        value_and_ttl(&self.store, self.live()?, key.as_ref())
    }

    /// [`Db::expire`] in this keyspace.
    pub fn expire(&self, key: impl AsRef<[u8]>, ttl: Duration) -> Result<bool> {
        let sync = self.store.opts.sync_writes;
        set_expiry(&self.store, self.live()?, key.as_ref(), Some(ttl), sync)
    }

    /// [`Db::persist`] in this keyspace.
    pub fn persist(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let sync = self.store.opts.sync_writes;
        set_expiry(&self.store, self.live()?, key.as_ref(), None, sync)
    }
}

impl WriteBatch {
    /// Adds a put with a time to live to keyspace `ks` (as
    /// [`WriteBatch::put_with_ttl`]).
    pub fn put_with_ttl_in(
        &mut self,
        ks: &Keyspace,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
    ) -> Result<&mut Self> {
        check_sizes(key, Some(value))?;
        let key = encode(self.bind(ks)?, key).into_owned();
        self.put_with_ttl_stored(key, value.to_vec(), ttl)?;
        Ok(self)
    }
}
