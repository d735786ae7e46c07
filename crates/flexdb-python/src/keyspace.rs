//! `flexdb.Keyspace`: the mapping API over one keyspace of a store, which
//! `flexdb.DB` extends for the default keyspace.
//!
//! Invariants:
//! - Every method first takes the store's read guard (`Handle::db`), so a
//!   closed store raises `ClosedError`, and the engine is never reached
//!   after `close()`.
//! - Engine calls that may read or write files run with the GIL released
//!   (`Python::detach`); only argument conversion and the building of
//!   result objects hold it. Borrowed `bytes` stay alive across that.
//! - Multi-step methods are atomic where the engine allows: `pop` and
//!   `setdefault` use compare-and-swap (retried when another write got
//!   there first); `update` is one batch. `del db[k]` reads, then deletes:
//!   a concurrent delete between the two is not reported.

use std::sync::Arc;

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::batch::Batch;
use crate::convert::{arg, bounds, opt_arg, ttl, Arg, Bounds};
use crate::errors::OrPy;
use crate::handle::Handle;
use crate::iter::{Mode, PyIter};
use crate::snapshot::Snapshot;
use crate::txn::{parse_isolation, Transaction};

/// Which keyspace an object acts on.
#[derive(Clone)]
pub enum Space {
    /// The default keyspace (the `Db`'s own methods).
    Default,
    /// A named keyspace.
    Named(flexdb::Keyspace),
}

impl Space {
    /// The engine's handle of this keyspace (the default one is looked up).
    pub fn engine(&self, db: &flexdb::Db) -> PyResult<flexdb::Keyspace> {
        match self {
            Space::Default => db.keyspace(flexdb::DEFAULT_KEYSPACE).py_err(),
            Space::Named(ks) => Ok(ks.clone()),
        }
    }
}

/// Runs `$body` with `$t` bound to the `Db` or the `Keyspace` that
/// `$space` names (both have the same methods).
macro_rules! on {
    ($space:expr, $db:expr, |$t:ident| $body:expr) => {
        match $space {
            Space::Default => {
                let $t: &flexdb::Db = $db;
                $body
            }
            Space::Named(ks) => {
                let $t: &flexdb::Keyspace = ks;
                $body
            }
        }
    };
}

/// One keyspace of a store: an ordered mapping of bytes keys to bytes
/// values (``str`` arguments are encoded as UTF-8; other types raise
/// ``TypeError``). ``flexdb.DB`` is the default keyspace; get others with
/// ``db.keyspace(name)``. Thread-safe.
#[pyclass(module = "flexdb", name = "Keyspace", subclass, frozen)]
pub struct Keyspace {
    pub(crate) handle: Arc<Handle>,
    pub(crate) space: Space,
}

impl Keyspace {
    /// A keyspace object of `handle`.
    pub fn new(handle: Arc<Handle>, space: Space) -> Self {
        Keyspace { handle, space }
    }

    fn get_bytes(&self, py: Python<'_>, key: &[u8]) -> PyResult<Option<Py<PyBytes>>> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        let v = py
            .detach(|| on!(&self.space, db, |t| t.get(key)))
            .py_err()?;
        Ok(v.map(|v| PyBytes::new(py, &v).unbind()))
    }

    fn put_bytes(
        &self,
        py: Python<'_>,
        key: &[u8],
        value: &[u8],
        ttl_s: Option<f64>,
    ) -> PyResult<()> {
        let ttl = ttl_s.map(ttl).transpose()?;
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| {
            on!(&self.space, db, |t| match ttl {
                Some(d) => t.put_with_ttl(key, value, d),
                None => t.put(key, value),
            })
        })
        .py_err()
    }

    fn cas(
        &self,
        py: Python<'_>,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> PyResult<bool> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| on!(&self.space, db, |t| t.compare_and_swap(key, expected, new)))
            .py_err()
    }

    /// An iterator over `range` in this keyspace.
    fn iter(&self, range: Bounds, mode: Mode, reverse: bool) -> PyResult<PyIter> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        let it = on!(&self.space, db, |t| t.range(range));
        Ok(PyIter::new(self.handle.clone(), it, mode, reverse))
    }
}

/// The bounds from the optional `start`, `stop` and `prefix` arguments.
pub fn range_args(
    start: Option<&Bound<'_, PyAny>>,
    stop: Option<&Bound<'_, PyAny>>,
    prefix: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bounds> {
    let start = opt_arg(start, "start")?;
    let stop = opt_arg(stop, "stop")?;
    let prefix = opt_arg(prefix, "prefix")?;
    Ok(bounds(
        start.as_ref().map(Arg::as_slice),
        stop.as_ref().map(Arg::as_slice),
        prefix.as_ref().map(Arg::as_slice),
    ))
}

/// The `(key, value)` pairs of a mapping (anything with `items()`) or an
/// iterable of pairs, converted, in order.
pub fn pairs(other: &Bound<'_, PyAny>) -> PyResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let py = other.py();
    let items = if other.cast::<PyDict>().is_ok() || other.hasattr("items")? {
        other.call_method0("items")?
    } else {
        other.clone()
    };
    let mut out = Vec::new();
    for pair in items.try_iter()? {
        let pair = pair?;
        let tuple: Bound<'_, PyTuple> = match pair.cast::<PyTuple>() {
            Ok(t) => t.clone(),
            Err(_) => PyTuple::new(py, pair.try_iter()?.collect::<PyResult<Vec<_>>>()?)?,
        };
        if tuple.len() != 2 {
            return Err(PyTypeError::new_err(format!(
                "update() takes (key, value) pairs, got a sequence of {} items",
                tuple.len()
            )));
        }
        let k = arg(&tuple.get_item(0)?, "key")?.as_slice().to_vec();
        let v = arg(&tuple.get_item(1)?, "value")?.as_slice().to_vec();
        out.push((k, v));
    }
    Ok(out)
}

/// `KeyError(key)` with the key as given.
fn key_error(key: &Bound<'_, PyAny>) -> PyErr {
    PyKeyError::new_err(key.clone().unbind())
}

#[pymethods]
impl Keyspace {
    /// The keyspace's name (``"default"`` for the store's own).
    #[getter]
    fn name(&self) -> String {
        match &self.space {
            Space::Default => flexdb::DEFAULT_KEYSPACE.to_string(),
            Space::Named(ks) => ks.name().to_string(),
        }
    }

    /// ``db[key]``: the value of ``key``; ``KeyError`` when absent.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
        let k = arg(key, "key")?;
        self.get_bytes(py, k.as_slice())?
            .ok_or_else(|| key_error(key))
    }

    /// ``db[key] = value``: sets ``key`` to ``value``.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (arg(key, "key")?, arg(value, "value")?);
        self.put_bytes(py, k.as_slice(), v.as_slice(), None)
    }

    /// ``del db[key]``: removes ``key``; ``KeyError`` when absent.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        let found = py
            .detach(|| {
                on!(&self.space, db, |t| {
                    if t.contains(k)? {
                        t.delete(k).map(|()| true)
                    } else {
                        Ok(false)
                    }
                })
            })
            .py_err()?;
        if found {
            Ok(())
        } else {
            Err(key_error(key))
        }
    }

    /// ``key in db``: whether ``key`` is present.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| on!(&self.space, db, |t| t.contains(k)))
            .py_err()
    }

    /// ``iter(db)``: the keys in order (a snapshot as of this call).
    fn __iter__(&self) -> PyResult<PyIter> {
        self.iter(bounds(None, None, None), Mode::Keys, false)
    }

    /// The value of ``key``, or ``default`` when absent.
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

    /// Sets ``key`` to ``value``. With ``ttl`` (seconds, > 0) the pair
    /// expires that long from now: reads judge it absent from then on.
    #[pyo3(signature = (key, value, ttl=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<f64>,
    ) -> PyResult<()> {
        let (k, v) = (arg(key, "key")?, arg(value, "value")?);
        self.put_bytes(py, k.as_slice(), v.as_slice(), ttl)
    }

    /// Sets ``key`` to ``value`` for ``ttl`` seconds (``put(key, value, ttl=ttl)``).
    fn put_with_ttl(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: f64,
    ) -> PyResult<()> {
        let (k, v) = (arg(key, "key")?, arg(value, "value")?);
        self.put_bytes(py, k.as_slice(), v.as_slice(), Some(ttl))
    }

    /// The seconds ``key`` has left to live, ``None`` when it has no
    /// deadline; ``KeyError`` when absent.
    fn ttl(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        match py.detach(|| on!(&self.space, db, |t| t.ttl(k))).py_err()? {
            None => Err(key_error(key)),
            Some(left) => Ok(left.map(|d| d.as_secs_f64())),
        }
    }

    /// Gives ``key`` a deadline ``ttl`` seconds from now, keeping its
    /// value; ``False`` when ``key`` is absent.
    fn expire(&self, py: Python<'_>, key: &Bound<'_, PyAny>, ttl: f64) -> PyResult<bool> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        let d = crate::convert::ttl(ttl)?;
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| on!(&self.space, db, |t| t.expire(k, d)))
            .py_err()
    }

    /// Removes ``key``'s deadline, keeping its value; ``False`` when
    /// ``key`` is absent or has no deadline.
    fn persist(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| on!(&self.space, db, |t| t.persist(k)))
            .py_err()
    }

    /// Removes ``key`` (no error when it is absent).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| on!(&self.space, db, |t| t.delete(k))).py_err()
    }

    /// Removes every key ``start <= key < stop`` that starts with
    /// ``prefix`` (each optional; none given: every key) atomically, at
    /// the cost of one logged record.
    #[pyo3(signature = (start=None, stop=None, prefix=None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let r = range_args(start, stop, prefix)?;
        if crate::convert::is_empty(&r) {
            return Ok(());
        }
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| on!(&self.space, db, |t| t.delete_range(r)))
            .py_err()
    }

    /// Removes ``key`` and returns its value; when absent, returns
    /// ``default`` if given, else raises ``KeyError``. Atomic.
    #[pyo3(signature = (key, *default), text_signature = "($self, key, default=<missing>)")]
    fn pop(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: &Bound<'_, PyTuple>,
    ) -> PyResult<Py<PyAny>> {
        if default.len() > 1 {
            return Err(PyTypeError::new_err(format!(
                "pop expected at most 2 arguments, got {}",
                default.len() + 1
            )));
        }
        let default = default.get_item(0).ok().map(Bound::unbind);
        let k = arg(key, "key")?;
        let k = k.as_slice();
        loop {
            let Some(v) = self.get_bytes(py, k)? else {
                return default.ok_or_else(|| key_error(key));
            };
            if self.cas(py, k, Some(v.as_bytes(py)), None)? {
                return Ok(v.into_any());
            }
        }
    }

    /// The value of ``key``; when absent, first sets it to ``default``
    /// (bytes or str) and returns that. Atomic.
    fn setdefault(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyBytes>> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        let d = arg(default, "default")?;
        loop {
            if let Some(v) = self.get_bytes(py, k)? {
                return Ok(v);
            }
            if self.cas(py, k, None, Some(d.as_slice()))? {
                return Ok(PyBytes::new(py, d.as_slice()).unbind());
            }
        }
    }

    /// Writes every pair of ``other`` (a mapping, or an iterable of
    /// ``(key, value)`` pairs) as one atomic batch.
    fn update(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        let pairs = pairs(other)?;
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        let mut batch = flexdb::WriteBatch::new();
        for (k, v) in &pairs {
            match &self.space {
                Space::Default => batch.put(k, v),
                Space::Named(ks) => batch.put_in(ks, k, v),
            }
            .py_err()?;
        }
        py.detach(|| db.write(batch)).py_err()
    }

    /// Atomically sets ``key`` to ``new`` if its value is ``expected``;
    /// ``None`` as ``expected`` means absent, as ``new`` removes the key.
    /// Returns whether it did.
    fn compare_and_swap(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        expected: Option<&Bound<'_, PyAny>>,
        new: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let k = arg(key, "key")?;
        let e = opt_arg(expected, "expected")?;
        let n = opt_arg(new, "new")?;
        self.cas(
            py,
            k.as_slice(),
            e.as_ref().map(Arg::as_slice),
            n.as_ref().map(Arg::as_slice),
        )
    }

    /// The keys ``start <= key < stop`` starting with ``prefix`` (each
    /// optional), in order (``reverse``: descending); lazy, reading the
    /// store as of this call.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false))]
    fn keys(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<PyIter> {
        self.iter(range_args(start, stop, prefix)?, Mode::Keys, reverse)
    }

    /// The values, in key order (see ``keys`` for the arguments).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false))]
    fn values(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<PyIter> {
        self.iter(range_args(start, stop, prefix)?, Mode::Values, reverse)
    }

    /// The ``(key, value)`` pairs, in key order (see ``keys``).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false))]
    fn items(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<PyIter> {
        self.iter(range_args(start, stop, prefix)?, Mode::Items, reverse)
    }

    /// The ``(key, value)`` pairs with ``start <= key < stop`` starting
    /// with ``prefix`` (each optional), in key order (``reverse``:
    /// descending); lazy, reading the store as of this call.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false))]
    fn range(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<PyIter> {
        self.iter(range_args(start, stop, prefix)?, Mode::Items, reverse)
    }

    /// A write batch whose plain puts and deletes go to this keyspace.
    /// Use it as ``with db.batch() as b:``: written atomically on exit,
    /// discarded if the block raises.
    fn batch(&self) -> PyResult<Batch> {
        let _open = self.handle.db()?;
        Ok(Batch::new(self.handle.clone(), self.space.clone()))
    }

    /// A snapshot reading this keyspace as of now (``with db.snapshot() as s:``).
    fn snapshot(&self) -> PyResult<Snapshot> {
        let db = self.handle.db()?;
        let snap = match &self.space {
            Space::Default => db.snapshot(),
            Space::Named(ks) => ks.snapshot().py_err()?,
        };
        Ok(Snapshot::new(self.handle.clone(), snap))
    }

    /// An optimistic transaction on this keyspace, ``isolation`` being
    /// ``"serializable"`` (default) or ``"snapshot"``. As
    /// ``with db.transaction() as t:`` it commits on exit (raising
    /// ``ConflictError`` if another write got in its way) and rolls back
    /// if the block raises.
    #[pyo3(signature = (isolation="serializable"))]
    fn transaction(&self, isolation: &str) -> PyResult<Transaction> {
        let iso = parse_isolation(isolation)?;
        let db = self.handle.db()?;
        let t = match &self.space {
            Space::Default => db.transaction(iso),
            Space::Named(ks) => ks.transaction(iso).py_err()?,
        };
        Ok(Transaction::new(self.handle.clone(), t))
    }

    fn __repr__(&self) -> String {
        format!(
            "<flexdb.Keyspace {:?} of {:?}{}>",
            self.name(),
            self.handle.path,
            if self.handle.is_closed() {
                " (closed)"
            } else {
                ""
            }
        )
    }
}
