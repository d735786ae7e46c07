//! The Python exceptions of the `flexdb` package and the mapping of the
//! engine's `flexdb::Error` onto them.
//!
//! Invariants: every exception the package raises for the store's own
//! reasons derives from `flexdb.Error`; each engine error variant maps to
//! exactly one class, and the exception's message is the engine's message
//! (its `Display`) unchanged. Argument type mistakes stay `TypeError`, and
//! a missing key stays `KeyError`, as the mapping protocol expects.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    flexdb,
    Error,
    PyException,
    "Base class of every error FlexDB raises for the store's own reasons."
);
create_exception!(
    flexdb,
    ClosedError,
    Error,
    "The store (or the snapshot, batch or transaction) was closed; open it again."
);
create_exception!(
    flexdb,
    CorruptionError,
    Error,
    "A file of the store is corrupt (the message names it)."
);
create_exception!(
    flexdb,
    IoError,
    Error,
    "An I/O error on a file of the store (the message names it)."
);
create_exception!(
    flexdb,
    NoSpaceError,
    Error,
    "No room to write: the device or the space's data file is full. Reads go on; writes succeed again once room is made."
);
create_exception!(
    flexdb,
    StoppedError,
    Error,
    "An earlier I/O error stopped the store's background work; reopen the store."
);
create_exception!(
    flexdb,
    LockedError,
    Error,
    "Another process or handle has the store open for writing."
);
create_exception!(
    flexdb,
    ConflictError,
    Error,
    "A transaction could not commit without breaking its isolation; nothing was written: run it again."
);
create_exception!(
    flexdb,
    InvalidArgumentError,
    Error,
    "An argument is out of range: a key, value or batch too large, a bad option, a dropped keyspace, a bad range."
);
create_exception!(
    flexdb,
    NotFoundError,
    Error,
    "No store at the path, and create=False."
);
create_exception!(
    flexdb,
    AlreadyExistsError,
    Error,
    "A store already exists at the path and error_if_exists=True."
);
create_exception!(
    flexdb,
    NotAStoreError,
    Error,
    "The path holds something that is not a FlexDB store."
);
create_exception!(
    flexdb,
    ReadOnlyError,
    Error,
    "A write to a store opened with read_only=True."
);
create_exception!(
    flexdb,
    NeedsUpgradeError,
    Error,
    "A store of an older format opened read-only: open it writable once to upgrade it."
);
create_exception!(
    flexdb,
    UnstableError,
    Error,
    "A read-only open found no consistent state: a writer kept changing what it read, or a file is damaged."
);

/// The Python exception for an engine error, with the engine's message.
pub fn to_py(e: flexdb::Error) -> PyErr {
    use flexdb::Error as E;
    let msg = e.to_string();
    match e {
        E::KeyTooLarge { .. }
        | E::ValueTooLarge { .. }
        | E::BatchTooLarge { .. }
        | E::InvalidArgument(_) => InvalidArgumentError::new_err(msg),
        E::NotFound(_) => NotFoundError::new_err(msg),
        E::AlreadyExists(_) => AlreadyExistsError::new_err(msg),
        E::NotAStore(..) => NotAStoreError::new_err(msg),
        E::Locked(_) => LockedError::new_err(msg),
        E::Corrupt { .. } => CorruptionError::new_err(msg),
        E::Io { .. } => IoError::new_err(msg),
        E::NoSpace(_) => NoSpaceError::new_err(msg),
        E::Stopped(_) => StoppedError::new_err(msg),
        E::Conflict => ConflictError::new_err(msg),
        E::ReadOnly => ReadOnlyError::new_err(msg),
        E::NeedsUpgrade { .. } => NeedsUpgradeError::new_err(msg),
        E::Unstable { .. } => UnstableError::new_err(msg),
        // The engine's enum may grow: an unknown variant is still an Error.
        #[allow(unreachable_patterns)]
        _ => Error::new_err(msg),
    }
}

/// `to_py` for results.
pub trait OrPy<T> {
    /// The result with an engine error turned into its Python exception.
    fn py_err(self) -> PyResult<T>;
}

impl<T> OrPy<T> for flexdb::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// The error of a use after `close()`; `what` names the closed object.
pub fn closed(what: &str) -> PyErr {
    ClosedError::new_err(format!("the {what} is closed"))
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("NoSpaceError", py.get_type::<NoSpaceError>())?;
    m.add("StoppedError", py.get_type::<StoppedError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("AlreadyExistsError", py.get_type::<AlreadyExistsError>())?;
    m.add("NotAStoreError", py.get_type::<NotAStoreError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    m.add("NeedsUpgradeError", py.get_type::<NeedsUpgradeError>())?;
    m.add("UnstableError", py.get_type::<UnstableError>())?;
    Ok(())
}
