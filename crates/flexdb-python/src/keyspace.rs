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

use std::sync::{Arc, Weak};

use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard};

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::batch::Batch;
use crate::convert::{arg, bounds, opt_arg, ttl, Arg, Bounds};
use crate::errors::{closed, OrPy};
use crate::handle::{Handle, Release};
use crate::iter::{Mode, PyIter};
use crate::snapshot::Snapshot;
use crate::txn::{parse_isolation, Transaction};

/// A named keyspace's engine handle, dropped when the store closes.
pub type KsSlot = RwLock<Option<flexdb::Keyspace>>;

/// Which keyspace an object acts on.
#[derive(Clone)]
pub enum Space {
    /// The default keyspace (the `Db`'s own methods).
    Default,
    /// A named keyspace (registered with the store's handle).
    Named(Arc<KsSlot>),
}

/// A `Space` held for one call: the named keyspace's read guard.
pub enum Held<'a> {
    /// The default keyspace.
    Default,
    /// A named keyspace.
    Named(MappedRwLockReadGuard<'a, flexdb::Keyspace>),
}

/// What one call acts on: the `Db` itself or a `Keyspace` (both have the
/// same methods; both are `Sync`, so this crosses `Python::detach`).
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// The default keyspace.
    Db(&'a flexdb::Db),
    /// A named keyspace.
    Ks(&'a flexdb::Keyspace),
}

impl Space {
    /// A named keyspace's slot, registered with `handle` for `close()`.
    pub fn named(handle: &Handle, ks: flexdb::Keyspace) -> Space {
        let slot: Arc<KsSlot> = Arc::new(RwLock::new(Some(ks)));
        let weak: Weak<dyn Release> = Arc::downgrade(&slot) as Weak<dyn Release>;
        handle.register(weak);
        Space::Named(slot)
    }

    /// Holds the keyspace for a call (`ClosedError` once the store closed).
    pub fn hold(&self) -> PyResult<Held<'_>> {
        match self {
            Space::Default => Ok(Held::Default),
            Space::Named(slot) => RwLockReadGuard::try_map(slot.read_recursive(), Option::as_ref)
                .map(Held::Named)
                .map_err(|_| closed("store")),
        }
    }

    /// The engine's handle of this keyspace (the default one is looked up).
    pub fn engine(&self, db: &flexdb::Db) -> PyResult<flexdb::Keyspace> {
        match self.hold()? {
            Held::Default => db.keyspace(flexdb::DEFAULT_KEYSPACE).py_err(),
            Held::Named(ks) => Ok(ks.clone()),
        }
    }
}

impl Held<'_> {
    /// The named keyspace, `None` for the default one.
    pub fn keyspace(&self) -> Option<&flexdb::Keyspace> {
        match self {
            Held::Default => None,
            Held::Named(ks) => Some(ks),
        }
    }

    /// The call's target, `db` for the default keyspace.
    pub fn target<'a>(&'a self, db: &'a flexdb::Db) -> Target<'a> {
        match self {
            Held::Default => Target::Db(db),
            Held::Named(ks) => Target::Ks(ks),
        }
    }
}

/// Runs `$body` with `$t` bound to the `Db` or the `Keyspace` of target
/// `$target` (both have the same methods).
macro_rules! on {
    ($target:expr, |$t:ident| $body:expr) => {
        match $target {
            Target::Db(db) => {
                let $t: &flexdb::Db = db;
                $body
            }
            Target::Ks(ks) => {
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
    name: String,
}

impl Keyspace {
    /// A keyspace object of `handle`.
    pub fn new(handle: Arc<Handle>, space: Space, name: &str) -> Self {
        Keyspace {
            handle,
            space,
            name: name.to_string(),
        }
    }

    /// Runs `f` on this keyspace with the GIL released.
    fn run<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(Target<'_>) -> flexdb::Result<R> + Send,
    ) -> PyResult<R> {
        let db = self.handle.db()?;
        let held = self.space.hold()?;
        let target = held.target(&db);
        py.detach(|| f(target)).py_err()
    }

    fn get_bytes(&self, py: Python<'_>, key: &[u8]) -> PyResult<Option<Py<PyBytes>>> {
        let v = self.run(py, |target| on!(target, |t| t.get(key)))?;
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
        self.run(py, |target| {
            on!(target, |t| match ttl {
                Some(d) => t.put_with_ttl(key, value, d),
                None => t.put(key, value),
            })
        })
    }

    fn cas(
        &self,
        py: Python<'_>,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> PyResult<bool> {
        self.run(py, |target| {
            on!(target, |t| t.compare_and_swap(key, expected, new))
        })
    }

    /// An iterator over `range` in this keyspace.
    fn iter(
        &self,
        range: Bounds,
        mode: Mode,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        let db = self.handle.db()?;
        let held = self.space.hold()?;
        let it = on!(held.target(&db), |t| t.range(range));
        Ok(PyIter::new(self.handle.clone(), it, mode, reverse, limit))
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
        self.name.clone()
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
        let found = self.run(py, |target| {
            on!(target, |t| {
                if t.contains(k)? {
                    t.delete(k).map(|()| true)
                } else {
                    Ok(false)
                }
            })
        })?;
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
        self.run(py, |target| on!(target, |t| t.contains(k)))
    }

    /// ``iter(db)``: the keys in order (a snapshot as of this call).
    fn __iter__(&self) -> PyResult<PyIter> {
        self.iter(bounds(None, None, None), Mode::Keys, false, None)
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
        match self.run(py, |target| on!(target, |t| t.ttl(k)))? {
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
        self.run(py, |target| on!(target, |t| t.expire(k, d)))
    }

    /// Removes ``key``'s deadline, keeping its value; ``False`` when
    /// ``key`` is absent or has no deadline.
    fn persist(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        self.run(py, |target| on!(target, |t| t.persist(k)))
    }

    /// Removes ``key`` (no error when it is absent).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = arg(key, "key")?;
        let k = k.as_slice();
        self.run(py, |target| on!(target, |t| t.delete(k)))
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
        self.run(py, |target| on!(target, |t| t.delete_range(r)))
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
        let held = self.space.hold()?;
        let mut batch = flexdb::WriteBatch::new();
        for (k, v) in &pairs {
            match held.keyspace() {
                None => batch.put(k, v),
                Some(ks) => batch.put_in(ks, k, v),
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
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, limit=None))]
    fn keys(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        self.iter(range_args(start, stop, prefix)?, Mode::Keys, reverse, limit)
    }

    /// The values, in key order (see ``keys`` for the arguments).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, limit=None))]
    fn values(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        self.iter(
            range_args(start, stop, prefix)?,
            Mode::Values,
            reverse,
            limit,
        )
    }

    /// The ``(key, value)`` pairs, in key order (see ``keys``).
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, limit=None))]
    fn items(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        self.iter(
            range_args(start, stop, prefix)?,
            Mode::Items,
            reverse,
            limit,
        )
    }

    /// The ``(key, value)`` pairs with ``start <= key < stop`` starting
    /// with ``prefix`` (each optional), in key order (``reverse``:
    /// descending); lazy, reading the store as of this call.
    #[pyo3(signature = (start=None, stop=None, prefix=None, reverse=false, limit=None))]
    fn range(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        self.items(start, stop, prefix, reverse, limit)
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
        let snap = match self.space.hold()?.keyspace() {
            None => db.snapshot(),
            Some(ks) => ks.snapshot().py_err()?,
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
        let t = match self.space.hold()?.keyspace() {
            None => db.transaction(iso),
            Some(ks) => ks.transaction(iso).py_err()?,
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
