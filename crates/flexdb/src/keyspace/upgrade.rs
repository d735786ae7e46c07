//! Opening a store of format 1 (before keyspaces) as format 2.
//!
//! Format 1 stored every key as it is. Format 2 reserves the keys that
//! start with `0xFF` for keyspace prefixes (`encoding`), so the default
//! keyspace's keys that start with `0xFF` move behind the prefix
//! `FF 00 00 00 00`. A format-1 store with no such key (nearly every
//! one) needs nothing but its manifest rewritten. One with such keys gets
//! them moved in one synced batch that also writes the catalog's
//! next-number pair, then the new manifest.
//!
//! Invariants: the manifest says format 2 only once the moved keys are
//! durable; a crash between the two leaves a format-1 manifest over moved
//! keys, which the catalog pair marks (format 1 never wrote it: a
//! format-1 key of exactly `FF FF FF FF FF` would be taken for it, the
//! one case this cannot tell apart), so the move is not repeated.

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
    let marker = encode(KsId::CATALOG, b"").into_owned();
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
            batch.put_stored(marker, KsId::FIRST.to_le_bytes().to_vec())?;
            store.write(&batch, true)?;
        }
    }
    manifest::write_manifest(store.storage.as_ref())?;
    Ok(moved)
}
