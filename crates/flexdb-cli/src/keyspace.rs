//! Choosing the keyspace a command works on (`--keyspace NAME`, the
//! shell's `use NAME`).
//!
//! Invariants: a name is checked by [`check_name`] before the store is
//! opened, so a bad name (empty, over `flexdb::MAX_KEYSPACE_NAME_LEN`
//! bytes, holding a NUL) is bad input (status 8) and never creates the
//! store or a keyspace. `default` names the default keyspace. With
//! [`Mode::Existing`] a missing keyspace is "no keyspace here" (status 3,
//! as a missing store) and nothing is created: `Db::existing_keyspace`
//! creates nothing; only [`Mode::Create`] (the
//! commands that put pairs) calls `Db::keyspace` on a missing name.

use std::path::Path;

use flexdb::{Db, Keyspace, MAX_KEYSPACE_NAME_LEN};

use crate::commands::shown_arg;
use crate::exit::{CliError, Code};
use crate::store::Mode;

/// Checks `name` by the rules of `Db::keyspace` (which the library
/// does not export on their own): before the store is opened, so a bad
/// name never creates one.
pub fn check_name(name: &str) -> Result<(), CliError> {
    let problem = if name.is_empty() {
        format!("empty (a name has 1 to {MAX_KEYSPACE_NAME_LEN} bytes)")
    } else if name.len() > MAX_KEYSPACE_NAME_LEN {
        format!(
            "{} bytes, over the limit of {MAX_KEYSPACE_NAME_LEN}",
            name.len()
        )
    } else if name.contains('\0') {
        "holds a NUL byte".to_string()
    } else {
        return Ok(());
    };
    Err(CliError::bad_input(format!(
        "keyspace name {:?}: {problem}",
        shown_arg(name)
    )))
}

/// The error for a keyspace that is not in the store at `dir`.
pub fn missing(dir: &Path, name: &str) -> CliError {
    CliError::new(
        Code::NoStore,
        format!(
            "{}: no keyspace {:?} in this store",
            dir.display(),
            shown_arg(name)
        ),
    )
}

/// The keyspace `name` of `db` (the store in `dir`): with
/// [`Mode::Existing`] or [`Mode::ReadOnly`] it must exist, with
/// [`Mode::Create`] it is created if missing.
pub fn open(db: &Db, dir: &Path, name: &str, mode: Mode) -> Result<Keyspace, CliError> {
    check_name(name)?;
    if mode != Mode::Create {
        return db
            .existing_keyspace(name)
            .map_err(|e| CliError::db(dir, e))?
            .ok_or_else(|| missing(dir, name));
    }
    db.keyspace(name).map_err(|e| CliError::db(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexdb::DEFAULT_KEYSPACE;

    #[test]
    fn names_are_checked_as_the_library_checks_them() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Db::open(tmp.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
        let long = "n".repeat(MAX_KEYSPACE_NAME_LEN);
        let too_long = "n".repeat(MAX_KEYSPACE_NAME_LEN + 1);
        for name in ["a", "default", "with space", "日本", "-x", &long] {
            check_name(name).unwrap();
            db.keyspace(name).unwrap();
        }
        for name in ["", "a\0b", &too_long] {
            let e = check_name(name).unwrap_err();
            assert_eq!(e.code, Code::BadInput, "{name:?}");
            assert!(
                matches!(db.keyspace(name), Err(flexdb::Error::InvalidArgument(_))),
                "{name:?}"
            );
        }
        let msg = check_name(&too_long).unwrap_err().message.unwrap();
        assert!(
            msg.ends_with("…\": 256 bytes, over the limit of 255"),
            "{msg}"
        );
        assert_eq!(
            check_name("").unwrap_err().message.unwrap(),
            "keyspace name \"\": empty (a name has 1 to 255 bytes)"
        );
        assert_eq!(
            check_name("a\0b").unwrap_err().message.unwrap(),
            "keyspace name \"a\\0b\": holds a NUL byte"
        );
        db.close().unwrap();
    }

    #[test]
    fn reading_a_missing_keyspace_creates_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Db::open(tmp.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
        let e = open(&db, Path::new("/db"), "users", Mode::Existing).unwrap_err();
        assert_eq!(e.code, Code::NoStore);
        assert_eq!(
            e.message.unwrap(),
            "/db: no keyspace \"users\" in this store"
        );
        assert_eq!(db.keyspaces(), ["default"]);
        // The default keyspace always exists.
        open(&db, Path::new("/db"), DEFAULT_KEYSPACE, Mode::Existing).unwrap();
        let e = open(&db, Path::new("/db"), "", Mode::Create).unwrap_err();
        assert_eq!(e.code, Code::BadInput);
        let ks = open(&db, Path::new("/db"), "users", Mode::Create).unwrap();
        ks.put("k", "v").unwrap();
        assert_eq!(db.keyspaces(), ["default", "users"]);
        let again = open(&db, Path::new("/db"), "users", Mode::Existing).unwrap();
        assert_eq!(again.get("k").unwrap().as_deref(), Some(&b"v"[..]));
        db.close().unwrap();
    }
}
