//! Opening a store of format 1 (before keyspaces) as format 2.
//!
//! Format 1 stored every key as it is. Format 2 reserves the keys that
//! start with `0xFF` for keyspace prefixes (`encoding`), so the default
//! keyspace's keys that start with `0xFF` move behind the prefix
//! `FF 00 00 00 00`. A format-1 store with no such key (nearly every
//! one) needs nothing but its manifest rewritten. One with such keys gets
//! them moved in one synced batch that also writes a marker, then the new
//! manifest.
//!
//! Invariants: the manifest says format 2 only once the moved keys are
//! durable; a crash between the two leaves a format-1 manifest over moved
//! keys and the marker, so the move is not repeated. The marker is a
//! catalog key longer than any key format 1 could hold
//! (`catalog::upgrade_marker`), so no format-1 store is taken for an
//! upgraded one. The move is one batch: a format-1 store whose keys
//! starting with `0xFF` exceed a batch's limit cannot be opened by this
//! build (back it up with the older one, as `flexdb dump`/`load`).

use std::ops::Bound;
use std::sync::Arc;

use super::encoding::{encode, KsId, TAG};
use crate::batch::WriteBatch;
use crate::error::Result;
use crate::read::iter::Iter;
use crate::read::snapshot::ReadPoint;
use crate::recovery::manifest;
use crate::store::Store;

/// Brings a format-1 store (open, its logs replayed) to format 2; returns
/// how many keys moved.
pub(crate) fn to_format_2(store: &Arc<Store>) -> Result<u64> {
    let marker = super::catalog::upgrade_marker();
    let point = ReadPoint::take(store, false);
    let moved_before = point.get(&marker)?.is_some();
    let mut moved = 0;
    if !moved_before {
        // Every key from `FF` on goes, then comes back behind its prefix
        // (a moved key may equal a key that was there: the delete first).
        let mut batch = WriteBatch::new();
        batch.push_range(&[TAG], None)?;
        let mut it = Iter::new_stored(point, Bound::Included(vec![TAG]), Bound::Unbounded, None);
        while let Some(pair) = it.next_ref() {
            let (k, v) = pair?;
            batch.put_stored(encode(KsId::DEFAULT, k).into_owned(), v.to_vec())?;
            moved += 1;
        }
        if moved > 0 {
            batch.put_stored(marker, Vec::new())?;
            store.write(&batch, true)?;
        }
    }
    manifest::write_manifest(store.storage.as_ref())?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flexspace::FaultStorage;

    use super::*;
    use crate::recovery::manifest::{inspect, write_manifest_version, DirContents};
    use crate::{Db, Options};

    fn opts() -> Options {
        Options::new().create_if_missing(true)
    }

    fn version(st: &FaultStorage) -> u32 {
        match inspect(st).unwrap() {
            DirContents::Store(v) => v,
            _ => panic!("no store"),
        }
    }

    /// A store as format 1 left it: `pairs` written with their keys as
    /// they are, and a format-1 manifest.
    fn format_1_store(pairs: &[(&[u8], &[u8])]) -> Arc<FaultStorage> {
        let st = Arc::new(FaultStorage::new());
        let db = Db::open_with_storage(st.clone(), "v1", opts()).unwrap();
        let mut batch = WriteBatch::new();
        for (k, v) in pairs {
            batch.put_stored(k.to_vec(), v.to_vec()).unwrap();
        }
        db.shared().write(&batch, true).unwrap();
        if pairs.len() > 2 {
            db.flush().unwrap(); // some in the space, the rest in the log
        }
        db.put(b"plain", b"p").unwrap();
        db.close().unwrap();
        write_manifest_version(st.as_ref(), 1).unwrap();
        st
    }

    #[test]
    fn a_format_1_store_opens_with_every_key_where_it_was() {
        // A key that looks like a moved key, and the key it would move to.
        let k1: &[u8] = &[0xFF, 0, 0, 0, 0, 0xFF, b'b'];
        let k2: &[u8] = &[0xFF, b'b'];
        let k3: &[u8] = &[0xFF];
        let st = format_1_store(&[(k1, b"one"), (k2, b"two"), (k3, b"three"), (b"a", b"four")]);
        assert_eq!(version(&st), 1);
        let db = Db::open_with_storage(st.clone(), "v1", opts()).unwrap();
        assert_eq!(version(&st), manifest::FORMAT_VERSION);
        for (k, v) in [
            (k1, &b"one"[..]),
            (k2, b"two"),
            (k3, b"three"),
            (b"a", b"four"),
        ] {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(v), "{k:?}");
        }
        let keys: Vec<Vec<u8>> = db.iter().map(|kv| kv.unwrap().0).collect();
        assert_eq!(keys, [&b"a"[..], b"plain", k3, k1, k2]);
        // Keyspaces work, and the default keyspace stays apart.
        let ks = db.keyspace("new").unwrap();
        ks.put(b"x", b"y").unwrap();
        assert_eq!(db.iter().count(), 5);
        db.close().unwrap();
        // Opening again moves nothing more.
        let db = Db::open_with_storage(st, "v1", opts()).unwrap();
        assert_eq!(db.iter().count(), 5);
        assert_eq!(db.keyspace("new").unwrap().iter().count(), 1);
    }

    #[test]
    fn format_1_keys_that_look_like_catalog_or_keyspace_keys_are_moved_too() {
        let k1: &[u8] = &[0xFF; 5];
        let k2: &[u8] = b"\xff\x00\x00\x00\x07abc";
        let st = format_1_store(&[(k1, b"1234"), (k2, b"v1 data"), (b"x", b"y")]);
        let db = Db::open_with_storage(st, "v1", opts()).unwrap();
        assert_eq!(db.get(k1).unwrap().as_deref(), Some(&b"1234"[..]));
        assert_eq!(db.get(k2).unwrap().as_deref(), Some(&b"v1 data"[..]));
        assert_eq!(db.keyspaces(), ["default"]);
        assert_eq!(db.iter().count(), 4);
    }

    #[test]
    fn a_format_2_store_keeps_its_keys_and_gets_the_new_manifest() {
        let st = Arc::new(FaultStorage::new());
        let db = Db::open_with_storage(st.clone(), "v2", opts()).unwrap();
        let ks = db.keyspace("named").unwrap();
        ks.put(b"k", b"in named").unwrap();
        db.put([0xFF, b'x'], b"tagged default").unwrap();
        db.close().unwrap();
        write_manifest_version(st.as_ref(), 2).unwrap();
        let db = Db::open_with_storage(st.clone(), "v2", opts()).unwrap();
        assert_eq!(version(&st), manifest::FORMAT_VERSION);
        let ks = db.existing_keyspace("named").unwrap().unwrap();
        assert_eq!(ks.get(b"k").unwrap().as_deref(), Some(&b"in named"[..]));
        assert_eq!(
            db.get([0xFF, b'x']).unwrap().as_deref(),
            Some(&b"tagged default"[..])
        );
        assert_eq!(db.iter().count(), 1);
    }

    #[test]
    fn a_store_without_tagged_keys_only_gets_a_new_manifest() {
        let st = format_1_store(&[(b"a", b"1")]);
        let db = Db::open_with_storage(st.clone(), "v1", opts()).unwrap();
        assert_eq!(version(&st), manifest::FORMAT_VERSION);
        assert_eq!(db.iter().count(), 2);
        // No marker was written.
        let marker = super::super::catalog::upgrade_marker();
        assert_eq!(db.shared().get(&marker).unwrap(), None);
    }

    #[test]
    fn an_upgrade_cut_before_its_manifest_is_not_repeated() {
        // As a crash between the moved keys and the new manifest leaves
        // it: keys moved, the catalog pair written, the old manifest.
        let moved = encode(KsId::DEFAULT, &[0xFF, b'z']).into_owned();
        let marker = super::super::catalog::upgrade_marker();
        let st = format_1_store(&[(&moved, b"v"), (&marker, b"")]);
        let db = Db::open_with_storage(st.clone(), "v1", opts()).unwrap();
        assert_eq!(version(&st), manifest::FORMAT_VERSION);
        assert_eq!(db.get([0xFF, b'z']).unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(db.iter().count(), 2);
    }
}
