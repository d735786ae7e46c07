//! `flexdb.Batch`: writes gathered in memory and applied atomically.
//!
//! Invariants: nothing reaches the store before `write()` (or the exit of
//! a `with` block that raised nothing), which applies every operation at
//! once or none (also across a crash); a block that raises discards the
//! batch. After the `with` block the batch is closed (`ClosedError`);
//! after a plain `write()` it is empty and may be filled again.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::convert::arg;
use crate::errors::{closed, OrPy};
use crate::handle::{lock, Handle};
use crate::keyspace::{range_args, Keyspace, Space};

/// A write batch: puts, deletes and range deletes applied together by
/// ``write()``, all or nothing. Made by ``db.batch()``; best used as
/// ``with db.batch() as b: b[k] = v`` (written on exit, discarded if the
/// block raises). Operations may name another ``keyspace`` of the store.
#[pyclass(module = "flexdb", name = "Batch", frozen)]
pub struct Batch {
    handle: Arc<Handle>,
    space: Space,
    /// `None` once closed.
    batch: Mutex<Option<flexdb::WriteBatch>>,
}

impl Batch {
    /// An empty batch writing to `space` by default.
    pub fn new(handle: Arc<Handle>, space: Space) -> Batch {
        Batch {
            handle,
            space,
            batch: Mutex::new(Some(flexdb::WriteBatch::new())),
        }
    }

    /// Runs `f` on the open batch and the keyspace an operation names.
    fn with<R>(
        &self,
        py: Python<'_>,
        keyspace: Option<PyRef<'_, Keyspace>>,
        f: impl FnOnce(&mut flexdb::WriteBatch, Option<&flexdb::Keyspace>) -> flexdb::Result<R>,
    ) -> PyResult<R> {
        let space = match &keyspace {
            Some(ks) => &ks.space,
            None => &self.space,
        };
        let held = space.hold()?;
        let mut g = lock(py, &self.batch);
        let b = g.as_mut().ok_or_else(|| closed("batch"))?;
        f(b, held.keyspace()).py_err()
    }

    fn write_now(&self, py: Python<'_>) -> PyResult<()> {
        let batch = {
            let mut g = lock(py, &self.batch);
            let b = g.as_mut().ok_or_else(|| closed("batch"))?;
            std::mem::take(b)
        };
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| db.write(batch)).py_err()
    }
}

#[pymethods]
impl Batch {
    /// Adds a put of ``key`` = ``value`` (with ``ttl`` seconds to live,
    /// when given), in ``keyspace`` if given.
    #[pyo3(signature = (key, value, ttl=None, keyspace=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<f64>,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (k, v) = (arg(key, "key")?, arg(value, "value")?);
        let (k, v) = (k.as_slice(), v.as_slice());
        let d = ttl.map(crate::convert::ttl).transpose()?;
        self.with(py, keyspace, |b, space| {
            match (space, d) {
                (None, None) => b.put(k, v),
                (None, Some(d)) => b.put_with_ttl(k, v, d),
                (Some(ks), None) => b.put_in(ks, k, v),
                (Some(ks), Some(d)) => b.put_with_ttl_in(ks, k, v, d),
            }
            .map(drop)
        })
    }

    /// Adds a put of ``key`` = ``value`` that expires after ``ttl`` seconds.
    #[pyo3(signature = (key, value, ttl, keyspace=None))]
    fn put_with_ttl(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: f64,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        self.put(py, key, value, Some(ttl), keyspace)
    }

    /// ``b[key] = value``: adds a put.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, None, None)
    }

    /// Adds a delete of ``key`` (in ``keyspace`` if given).
    #[pyo3(signature = (key, keyspace=None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        self.with(py, keyspace, |b, space| {
            match space {
                None => b.delete(k),
                Some(ks) => b.delete_in(ks, k),
            }
            .map(drop)
        })
    }

    /// ``del b[key]``: adds a delete (no error when the key is absent).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, None)
    }

    /// Adds a delete of every key ``start <= key < stop`` starting with
    /// ``prefix`` (each optional), in ``keyspace`` if given.
    #[pyo3(signature = (start=None, stop=None, prefix=None, keyspace=None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        let r = range_args(start, stop, prefix)?;
        if crate::convert::is_empty(&r) {
            return Ok(());
        }
        self.with(py, keyspace, |b, space| {
            match space {
                None => b.delete_range(r),
                Some(ks) => b.delete_range_in(ks, r),
            }
            .map(drop)
        })
    }

    /// The number of operations gathered.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let g = lock(py, &self.batch);
        Ok(g.as_ref().ok_or_else(|| closed("batch"))?.len())
    }

    /// Discards the operations gathered so far.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let mut g = lock(py, &self.batch);
        g.as_mut().ok_or_else(|| closed("batch"))?.clear();
        Ok(())
    }

    /// Applies every operation atomically, then empties the batch.
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        self.write_now(py)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Writes the batch if the block raised nothing, else discards it;
    /// the batch is closed either way.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let ok = exc_type.is_none_or(|t| t.is_none());
        let result = if ok { self.write_now(py) } else { Ok(()) };
        *lock(py, &self.batch) = None;
        result.map(|()| false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match lock(py, &self.batch).as_ref() {
            Some(b) => format!("<flexdb.Batch of {} operations>", b.len()),
            None => "<flexdb.Batch (closed)>".to_string(),
        }
    }
}
