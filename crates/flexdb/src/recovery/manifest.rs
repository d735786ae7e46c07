//! The files of a store directory besides the space's own (`data`, `tree`,
//! `log`, `lock`): the manifest and the write-ahead logs.
//!
//! Invariants: a store exists exactly when its `MANIFEST` verifies; the
//! manifest is written last at creation, through a temporary file renamed
//! into place and a directory sync, so a crash during creation leaves no
//! manifest (and the next open may create the store afresh). Write-ahead
//! logs are named by `wal::log_files`, in generation order. A log, too, is
//! created under a temporary name and renamed once its header is durable:
//! a file named as a log always had a whole header, and a log with a torn
//! one was damaged, never merely cut short by a crash.

use std::sync::Arc;

use flexspace::Storage;

use crate::error::{Error, Result};
use crate::wal::log_files::{is_wal_tmp_name, parse_wal_name};

/// The manifest's name.
pub const MANIFEST: &str = "MANIFEST";
const MANIFEST_TMP: &str = "MANIFEST.tmp";
const MAGIC: &[u8; 8] = b"FLEXDB\0\0";
/// The store's on-disk format version: 2 since keyspaces (keys that start
/// with `0xFF` are keyspace prefixes; see `keyspace::encoding`), 3 since
/// expiry (pair records and log payloads may carry deadlines; a format-2
/// store is a valid format-3 store and only gets the new manifest).
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format this build opens (and brings to `FORMAT_VERSION`:
/// `keyspace::upgrade`).
pub const OLDEST_FORMAT_VERSION: u32 = 1;
const MANIFEST_LEN: usize = 20;

/// Names the space and this module may leave in a directory; a directory
/// holding only these (and no manifest) is a store whose creation did not
/// finish.
const OWN_FILES: &[&str] = &["data", "tree", "log", "lock", MANIFEST_TMP];

fn io(name: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        file: name.into(),
        source,
    }
}

/// Writes the manifest (atomically: temporary file, rename, directory sync).
pub fn write_manifest(storage: &dyn Storage) -> Result<()> {
    write_manifest_version(storage, FORMAT_VERSION)
}

/// Writes a manifest naming format `version` (tests make older stores).
pub(crate) fn write_manifest_version(storage: &dyn Storage, version: u32) -> Result<()> {
    let mut b = Vec::with_capacity(MANIFEST_LEN);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    replace_file(storage, MANIFEST_TMP, MANIFEST, &b)
}

/// Makes `name` hold `bytes`, atomically across a crash: writes and syncs
/// `tmp`, renames it over `name`, syncs the directory.
pub fn replace_file(storage: &dyn Storage, tmp: &str, name: &str, bytes: &[u8]) -> Result<()> {
    let f = storage.open_file(tmp, true).map_err(io(tmp))?;
    f.set_len(0).map_err(io(tmp))?;
    f.write_all_at(0, bytes).map_err(io(tmp))?;
    f.sync().map_err(io(tmp))?;
    drop(f);
    storage.rename(tmp, name).map_err(io(name))?;
    storage.sync_dir().map_err(io(name))
}

/// What the directory holds.
pub enum DirContents {
    /// A store (its manifest verified) of this format version.
    Store(u32),
    /// Nothing, or only the leftovers of a creation that did not finish.
    Nothing,
    /// Something else; the string says what.
    Foreign(String),
}

/// Looks at the directory: a verified manifest, nothing of ours, or
/// something that is not a store. A manifest that exists but does not
/// verify is corruption.
pub fn inspect(storage: &dyn Storage) -> Result<DirContents> {
    let names = storage.list_files().map_err(io("directory"))?;
    if names.iter().any(|n| n == MANIFEST) {
        let f = storage.open_file(MANIFEST, false).map_err(io(MANIFEST))?;
        let len = f.len().map_err(io(MANIFEST))?;
        let corrupt = |detail: &str| Error::Corrupt {
            file: MANIFEST.into(),
            detail: detail.into(),
        };
        if len != MANIFEST_LEN as u64 {
            return Err(corrupt("wrong length"));
        }
        let mut b = [0u8; MANIFEST_LEN];
        f.read_exact_at(0, &mut b).map_err(io(MANIFEST))?;
        if &b[..8] != MAGIC {
            return Err(corrupt("not a FlexDB manifest"));
        }
        if u32::from_le_bytes([b[16], b[17], b[18], b[19]]) != crc32c::crc32c(&b[..16]) {
            return Err(corrupt("checksum mismatch"));
        }
        let version = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(corrupt(&format!(
                "format version {version}, this build reads {OLDEST_FORMAT_VERSION} to \
                 {FORMAT_VERSION}"
            )));
        }
        return Ok(DirContents::Store(version));
    }
    match names.iter().find(|n| {
        !OWN_FILES.contains(&n.as_str()) && parse_wal_name(n).is_none() && !is_wal_tmp_name(n)
    }) {
        Some(other) => Ok(DirContents::Foreign(format!(
            "it holds {other:?} and no MANIFEST"
        ))),
        None => Ok(DirContents::Nothing),
    }
}

/// Removes the leftovers of a creation that did not finish.
pub fn remove_leftovers(storage: &Arc<dyn Storage>) -> Result<()> {
    for n in storage.list_files().map_err(io("directory"))? {
        if n != "lock"
            && (OWN_FILES.contains(&n.as_str())
                || parse_wal_name(&n).is_some()
                || is_wal_tmp_name(&n))
        {
            storage.remove_file(&n).map_err(io(&n))?;
        }
    }
    storage.sync_dir().map_err(io("directory"))
}

/// Removes logs whose creation a crash interrupted (they hold no write).
pub fn remove_unfinished_wals(storage: &dyn Storage) -> Result<()> {
    let names = storage.list_files().map_err(io("directory"))?;
    let mut removed = false;
    for n in names.iter().filter(|n| is_wal_tmp_name(n)) {
        storage.remove_file(n).map_err(io(n))?;
        removed = true;
    }
    if removed {
        storage.sync_dir().map_err(io("directory"))?;
    }
    Ok(())
}

/// The write-ahead logs in the directory: (generation, name), oldest first.
pub fn list_wals(storage: &dyn Storage) -> Result<Vec<(u64, String)>> {
    let mut out: Vec<(u64, String)> = storage
        .list_files()
        .map_err(io("directory"))?
        .into_iter()
        .filter_map(|n| parse_wal_name(&n).map(|g| (g, n)))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::log_files::{wal_name, wal_tmp_name};
    use flexspace::FaultStorage;

    #[test]
    fn wal_names_round_trip_and_sort() {
        assert_eq!(parse_wal_name(&wal_name(42)), Some(42));
        assert_eq!(parse_wal_name("wal-1.log"), None);
        assert_eq!(parse_wal_name("wal-00000000000x.log"), None);
        assert!(wal_name(9) < wal_name(10));
    }

    #[test]
    fn manifest_round_trip_and_damage() {
        let st: Arc<dyn Storage> = Arc::new(FaultStorage::new());
        assert!(matches!(
            inspect(st.as_ref()).unwrap(),
            DirContents::Nothing
        ));
        st.open_file("data", true).unwrap();
        st.open_file(&wal_name(1), true).unwrap();
        assert!(matches!(
            inspect(st.as_ref()).unwrap(),
            DirContents::Nothing
        ));
        write_manifest(st.as_ref()).unwrap();
        assert!(matches!(
            inspect(st.as_ref()).unwrap(),
            DirContents::Store(FORMAT_VERSION)
        ));
        let f = st.open_file(MANIFEST, false).unwrap();
        f.write_all_at(9, &[7]).unwrap();
        assert!(matches!(inspect(st.as_ref()), Err(Error::Corrupt { .. })));
        let other: Arc<dyn Storage> = Arc::new(FaultStorage::new());
        other.open_file("notes.txt", true).unwrap();
        assert!(matches!(
            inspect(other.as_ref()).unwrap(),
            DirContents::Foreign(_)
        ));
        remove_leftovers(&st).unwrap();
        assert_eq!(st.list_files().unwrap(), vec![MANIFEST.to_string()]);
    }

    #[test]
    fn a_log_left_under_its_temporary_name_is_ours_and_goes() {
        let st: Arc<dyn Storage> = Arc::new(FaultStorage::new());
        assert_eq!(parse_wal_name(&wal_tmp_name(7)), None);
        st.open_file(&wal_tmp_name(7), true).unwrap();
        assert!(matches!(
            inspect(st.as_ref()).unwrap(),
            DirContents::Nothing
        ));
        st.open_file(&wal_name(6), true).unwrap();
        remove_unfinished_wals(st.as_ref()).unwrap();
        assert_eq!(st.list_files().unwrap(), vec![wal_name(6)]);
        st.open_file(&wal_tmp_name(8), true).unwrap();
        remove_leftovers(&st).unwrap();
        assert!(st.list_files().unwrap().is_empty());
    }
}
