//! The catalog of named keyspaces: which name has which number.
//!
//! Kept in the store itself, in the catalog keyspace (`encoding`): one
//! pair per keyspace, its name to its number (4 bytes, little-endian), and
//! the next number to give out under the empty name. So a keyspace's
//! creation and drop are ordinary atomic batches (a drop is its catalog
//! pair's delete and one range delete of the whole keyspace), logged,
//! recovered and backed up like any other write.
//!
//! Invariants: numbers are given out once, in increasing order, never
//! reused (a handle kept across a drop can never reach a later keyspace);
//! the in-memory map equals the catalog pairs after every create and drop
//! (both under the catalog's lock, which orders them); a dropped entry is
//! marked so its handles refuse further use. A write through a handle
//! racing the drop of its keyspace can leave pairs under a number no name
//! has: the next open finds and deletes them (`sweep_orphans`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::encoding::{bounds, encode, keyspace_of, KsId};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::read::iter::Iter;
use crate::read::snapshot::ReadPoint;
use crate::store::Store;

/// The catalog key that marks a store upgraded from format 1
/// (`upgrade`): longer than any key format 1 could hold, so no format-1
/// key is ever taken for it.
pub(crate) fn upgrade_marker() -> Vec<u8> {
    let mut k = KsId::CATALOG.prefix().to_vec();
    k.resize(crate::codec::MAX_STORED_KEY_LEN, 0);
    k
}

/// The longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME_LEN: usize = 255;

/// The name that stands for the default keyspace.
pub const DEFAULT_KEYSPACE: &str = "default";

/// One keyspace of the catalog.
#[derive(Debug)]
pub(crate) struct Entry {
    pub id: KsId,
    pub name: String,
    dropped: AtomicBool,
}

impl Entry {
    pub fn new(id: KsId, name: String) -> Entry {
        Entry {
            id,
            name,
            dropped: AtomicBool::new(false),
        }
    }

    /// Refuses a handle whose keyspace was dropped.
    pub fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "keyspace {:?} was dropped",
                self.name
            )));
        }
        Ok(())
    }
}

#[derive(Default)]
struct Inner {
    by_name: BTreeMap<String, Arc<Entry>>,
    /// The next number to give out.
    next: u32,
    /// Why the catalog could not be read (a damaged interval): named
    /// keyspaces are then refused, the default one works.
    damaged: Option<String>,
}

/// The named keyspaces of an open store.
#[derive(Default)]
pub(crate) struct Catalog {
    inner: Mutex<Inner>,
}

/// Checks a keyspace name: not empty, at most `MAX_KEYSPACE_NAME_LEN`
/// bytes, no NUL.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("a keyspace name is empty".into()));
    }
    if name.len() > MAX_KEYSPACE_NAME_LEN {
        return Err(Error::InvalidArgument(format!(
            "a keyspace name of {} bytes (at most {MAX_KEYSPACE_NAME_LEN})",
            name.len()
        )));
    }
    if name.contains('\0') {
        return Err(Error::InvalidArgument(format!(
            "keyspace name {name:?} holds a NUL"
        )));
    }
    Ok(())
}

fn corrupt(detail: String) -> Error {
    Error::Corrupt {
        file: "catalog of keyspaces".into(),
        detail,
    }
}

fn number(value: &[u8], what: &str) -> Result<u32> {
    let bytes: [u8; 4] = value
        .try_into()
        .map_err(|_| corrupt(format!("{what}: a value of {} bytes, not 4", value.len())))?;
    Ok(u32::from_le_bytes(bytes))
}

/// Every pair of keyspace `id` as of now, keys as stored.
fn stored_pairs(store: &Arc<Store>, id: KsId) -> Iter<'static> {
    let (start, end) = bounds(id);
    let hi = end.map_or(Bound::Unbounded, Bound::Excluded);
    Iter::new_stored(
        ReadPoint::take(store, false),
        Bound::Included(start),
        hi,
        None,
    )
}

impl Catalog {
    /// Reads the catalog's pairs (at open). A damaged interval in the
    /// catalog's range does not fail the open: the default keyspace still
    /// works, named ones are refused (`Error::Corrupt`) until a repair.
    pub fn load(&self, store: &Arc<Store>) -> Result<()> {
        match self.read(store) {
            Ok(inner) => *self.inner.lock() = inner,
            Err(Error::Corrupt { file, detail }) => {
                let why = format!("{}: {detail}", file.display());
                tracing::warn!(target: "flexdb::keyspace", "keyspaces unreadable: {why}");
                *self.inner.lock() = Inner {
                    damaged: Some(why),
                    ..Inner::default()
                };
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Refuses named keyspaces when the catalog could not be read.
    fn check_readable(inner: &Inner) -> Result<()> {
        match &inner.damaged {
            Some(why) => Err(corrupt(format!("unreadable ({why}); repair the store"))),
            None => Ok(()),
        }
    }

    fn read(&self, store: &Arc<Store>) -> Result<Inner> {
        let mut inner = Inner {
            by_name: BTreeMap::new(),
            next: KsId::FIRST,
            damaged: None,
        };
        let mut max = 0;
        for pair in stored_pairs(store, KsId::CATALOG) {
            let (k, v) = pair?;
            let name = super::encoding::decode(&k);
            if k == upgrade_marker() {
                continue;
            }
            if name.is_empty() {
                inner.next = inner.next.max(number(&v, "the next number")?);
                continue;
            }
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| corrupt("a keyspace name that is not UTF-8".into()))?;
            let id = number(&v, &name)?;
            if !(KsId::FIRST..KsId::END).contains(&id) {
                return Err(corrupt(format!("keyspace {name:?} has number {id}")));
            }
            max = max.max(id);
            inner
                .by_name
                .insert(name.clone(), Arc::new(Entry::new(KsId(id), name)));
        }
        inner.next = inner.next.max(max + 1);
        Ok(inner)
    }

    /// The keyspace named `name`, created (durably with the store's
    /// default sync setting) if it does not exist.
    pub fn open(&self, store: &Arc<Store>, name: &str) -> Result<Arc<Entry>> {
        check_name(name)?;
        let mut inner = self.inner.lock();
        Self::check_readable(&inner)?;
        if let Some(e) = inner.by_name.get(name) {
            return Ok(e.clone());
        }
        let id = inner.next;
        if id == KsId::END {
            return Err(Error::InvalidArgument(
                "every keyspace number was given out".into(),
            ));
        }
        let mut batch = WriteBatch::new();
        batch.put_stored(
            encode(KsId::CATALOG, name.as_bytes()).into_owned(),
            id.to_le_bytes().to_vec(),
        )?;
        batch.put_stored(
            encode(KsId::CATALOG, b"").into_owned(),
            (id + 1).to_le_bytes().to_vec(),
        )?;
        // The number is spent whatever the write's outcome (a failed
        // write may still reach the log: a second number for the name
        // then wins, never one number for two names).
        inner.next = id + 1;
        store.write(&batch, store.opts.sync_writes)?;
        let entry = Arc::new(Entry::new(KsId(id), name.to_string()));
        inner.by_name.insert(name.to_string(), entry.clone());
        Ok(entry)
    }

    /// The keyspace named `name`, if it exists.
    pub fn find(&self, name: &str) -> Option<Arc<Entry>> {
        self.inner.lock().by_name.get(name).cloned()
    }

    /// The names of the named keyspaces, in order.
    pub fn names(&self) -> Vec<String> {
        self.inner.lock().by_name.keys().cloned().collect()
    }

    /// Drops keyspace `name` and every pair in it, atomically: one batch
    /// of the catalog pair's delete and a range delete of the keyspace.
    /// Returns whether it existed.
    pub fn drop_keyspace(&self, store: &Arc<Store>, name: &str, sync: bool) -> Result<bool> {
        check_name(name)?;
        let mut inner = self.inner.lock();
        Self::check_readable(&inner)?;
        let Some(entry) = inner.by_name.get(name).cloned() else {
            return Ok(false);
        };
        let mut batch = WriteBatch::new();
        let (start, end) = bounds(entry.id);
        batch.push_range(&start, end.as_deref())?;
        batch.delete_stored(encode(KsId::CATALOG, name.as_bytes()).into_owned())?;
        let written = store.write(&batch, sync);
        // Gone whatever the write's outcome: a failed write may still reach
        // the log, and writes after it would then be lost to the sweep.
        // (If it does not, the keyspace is back, whole, at the next open.)
        entry.dropped.store(true, Ordering::Release);
        inner.by_name.remove(name);
        written.map(|()| true)
    }

    /// Deletes the pairs of numbers no keyspace has (left by writes that
    /// raced the drop of their keyspace); one seek per keyspace.
    pub fn sweep_orphans(&self, store: &Arc<Store>) -> Result<u32> {
        let live: std::collections::HashSet<KsId> = {
            let inner = self.inner.lock();
            if inner.damaged.is_some() {
                // Which numbers are live is not known: sweep nothing.
                return Ok(0);
            }
            inner.by_name.values().map(|e| e.id).collect()
        };
        let lo = KsId(KsId::FIRST).prefix().to_vec();
        let hi = KsId::EXPIRY.prefix().to_vec();
        let mut it = Iter::new_stored(
            ReadPoint::take(store, false),
            Bound::Included(lo),
            Bound::Excluded(hi),
            None,
        );
        let mut batch = WriteBatch::new();
        let mut swept = 0;
        loop {
            let id = match it.next_ref() {
                None => break,
                Some(Ok(pair)) => keyspace_of(pair.0),
                // A damaged interval: leave the rest for a later open (or
                // a repair) rather than fail this one.
                Some(Err(Error::Corrupt { .. })) => break,
                Some(Err(e)) => return Err(e),
            };
            if id == KsId::DEFAULT {
                // A key too short for a prefix: never written as such
                // (encoding adds five bytes); not this sweep's to judge.
                continue;
            }
            if !live.contains(&id) {
                let (start, end) = bounds(id);
                batch.push_range(&start, end.as_deref())?;
                swept += 1;
            }
            it.seek(KsId(id.0 + 1).prefix());
        }
        if swept > 0 {
            store.write(&batch, true)?;
        }
        Ok(swept)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flexspace::FaultStorage;

    use super::*;
    use crate::{Db, Options};

    fn opts() -> Options {
        Options::new().create_if_missing(true)
    }

    #[test]
    fn pairs_under_numbers_no_keyspace_has_are_swept_at_open() {
        let st = Arc::new(FaultStorage::new());
        let db = Db::open_with_storage(st.clone(), "sweep", opts()).unwrap();
        let a = db.keyspace("a").unwrap();
        let b = db.keyspace("b").unwrap();
        for i in 0..50u32 {
            a.put(i.to_be_bytes(), "a").unwrap();
            b.put(i.to_be_bytes(), "b").unwrap();
            db.put(i.to_be_bytes(), "d").unwrap();
        }
        // As a write racing a drop leaves them: pairs under numbers
        // between and after the live ones, and a drop of `b` whose
        // handle writes on.
        let mut batch = WriteBatch::new();
        for id in [KsId(7), KsId(40), KsId(KsId::END - 1)] {
            for i in 0..20u32 {
                batch
                    .put_stored(encode(id, &i.to_be_bytes()).into_owned(), b"x".to_vec())
                    .unwrap();
            }
        }
        db.shared().write(&batch, false).unwrap();
        let b_id = b.entry.id;
        assert!(db.drop_keyspace("b").unwrap());
        db.shared()
            .write_one(&encode(b_id, b"late"), Some(b"x"), false)
            .unwrap();
        let stored = |db: &Db| {
            Iter::new_stored(
                ReadPoint::take(db.shared(), false),
                Bound::Unbounded,
                Bound::Unbounded,
                None,
            )
            .count()
        };
        // 150 pairs, the catalog's 3, 60 strays and the late one.
        assert_eq!(stored(&db), 150 - 50 + 3 - 1 + 60 + 1);
        drop((a, b));
        db.close().unwrap();
        let db = Db::open_with_storage(st, "sweep", opts()).unwrap();
        assert_eq!(stored(&db), 100 + 2);
        assert_eq!(db.keyspace("a").unwrap().iter().count(), 50);
        assert_eq!(db.iter().count(), 50);
        assert_eq!(db.keyspaces(), ["default", "a"]);
    }
}
