//! `flexdb.Snapshot`: reads of the store as of one moment.
//!
//! Invariants: every read through it (and through iterators made from
//! it) sees exactly the writes acknowledged before it was taken, for as
//! long as it is open; `close()` (or the end of its `with` block)
//! releases what it pins, after which it raises `ClosedError`. The engine
//! snapshot is cloned out of the lock before a read, so no lock is held
//! while the GIL is released.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{arg, bounds, Bounds};
use crate::errors::{closed, OrPy};
use crate::handle::{lock, Handle, Release};
use crate::iter::{Mode, PyIter};
use crate::keyspace::{range_args, Keyspace};

/// A consistent, read-only view of the store as of its creation
/// (``db.snapshot()``): writes made after it are not seen. Use it as
/// ``with db.snapshot() as s:`` to release it at the end of the block.
#[pyclass(module = "flexdb", name = "Snapshot", frozen)]
pub struct Snapshot {
    handle: Arc<Handle>,
    /// Registered with the handle: dropped at the store's close.
    snap: Arc<Mutex<Option<flexdb::Snapshot>>>,
}

impl Snapshot {
    /// A Python snapshot of `snap`.
    pub fn new(handle: Arc<Handle>, snap: flexdb::Snapshot) -> Snapshot {
        let slot = Arc::new(Mutex::new(Some(snap)));
        handle.register(Arc::downgrade(&slot) as Weak<dyn Release>);
        Snapshot { handle, snap: slot }
    }

    fn current(&self, py: Python<'_>) -> PyResult<flexdb::Snapshot> {
        lock(py, &self.snap)
            .clone()
            .ok_or_else(|| closed("snapshot"))
    }

    fn get_bytes(&self, py: Python<'_>, key: &[u8]) -> PyResult<Option<Py<PyBytes>>> {
        let s = self.current(py)?;
        let _open = self.handle.db()?;
        let v = py.detach(|| s.get(key)).py_err()?;
        Ok(v.map(|v| PyBytes::new(py, &v).unbind()))
    }

    fn iter(
        &self,
        py: Python<'_>,
        r: Bounds,
        mode: Mode,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        let s = self.current(py)?;
        let _open = self.handle.db()?;
        Ok(PyIter::new(
            self.handle.clone(),
            s.range(r),
            mode,
            reverse,
            limit,
        ))
    }
}

#[pymethods]
impl Snapshot {
    /// ``s[key]``: the value of ``key`` as of the snapshot; ``KeyError`` when absent.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
        let k = arg(key, "key")?;
        self.get_bytes(py, k.as_slice())?
            .ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
    }

    /// The value of ``key`` as of the snapshot, or ``default``.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let k = arg(key, "key")?;
        Ok(match self.get_bytes(py, k.as_slice())? {
            Some(v) => v.into_any(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// ``key in s``: whether ``key`` was present.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        let s = self.current(py)?;
        let _open = self.handle.db()?;
        py.detach(|| s.contains(k)).py_err()
    }

    /// ``iter(s)``: the keys in order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.iter(py, bounds(None, None, None), Mode::Keys, false, None)
    }

    /// The keys (``start <= key < stop``, starting with ``prefix``), in order.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, limit=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        self.iter(
            py,
            range_args(start, stop, prefix)?,
            Mode::Keys,
            reverse,
            limit,
        )
    }

    /// The values, in key order (arguments as ``keys``).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, limit=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        self.iter(
            py,
            range_args(start, stop, prefix)?,
            Mode::Values,
            reverse,
            limit,
        )
    }

    /// The ``(key, value)`` pairs, in key order (arguments as ``keys``).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, limit=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        self.iter(
            py,
            range_args(start, stop, prefix)?,
            Mode::Items,
            reverse,
            limit,
        )
    }

    /// The ``(key, value)`` pairs of a range, in key order (as ``items``).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, limit=None))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        self.items(py, start, stop, prefix, reverse, limit)
    }

    /// The same moment's view of another keyspace of the store.
    fn keyspace(&self, py: Python<'_>, keyspace: PyRef<'_, Keyspace>) -> PyResult<Snapshot> {
        let s = self.current(py)?;
        let db = self.handle.db()?;
        let ks = keyspace.space.engine(&db)?;
        Ok(Snapshot::new(
            self.handle.clone(),
            s.keyspace(&ks).py_err()?,
        ))
    }

    /// Releases the snapshot (idempotent); reads then raise ``ClosedError``.
    fn close(&self, py: Python<'_>) {
        lock(py, &self.snap).take();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match lock(py, &self.snap).is_some() {
            true => "<flexdb.Snapshot>".to_string(),
            false => "<flexdb.Snapshot (closed)>".to_string(),
        }
    }
}
