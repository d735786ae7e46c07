//! `flexdb.Transaction` and `flexdb.TransactionKeyspace`: optimistic
//! transactions.
//!
//! Invariants:
//! - Reads see the store as of the transaction's start with its own
//!   writes merged in; writes are buffered until `commit()`, which writes
//!   all of them atomically or raises `ConflictError` having written
//!   nothing. `rollback()` discards them. Either ends the transaction;
//!   later use raises `ClosedError`.
//! - As a context manager it commits when the block raised nothing and
//!   rolls back when it raised (the block's exception propagates).
//! - The engine transaction sits behind a mutex taken with
//!   `handle::lock` (waiting with the GIL released), so threads may share
//!   one transaction safely; reads and the commit run with the GIL
//!   released while holding it.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{arg, Bounds};
use crate::errors::{closed, OrPy};
use crate::handle::{lock, Handle, Release};
use crate::iter::{Mode, PyIter};
use crate::keyspace::{range_args, Keyspace};

/// The engine's isolation level named by `s`.
pub fn parse_isolation(s: &str) -> PyResult<flexdb::Isolation> {
    match s {
        "serializable" => Ok(flexdb::Isolation::Serializable),
        "snapshot" => Ok(flexdb::Isolation::Snapshot),
        other => Err(PyValueError::new_err(format!(
            "isolation must be \"serializable\" or \"snapshot\", not {other:?}"
        ))),
    }
}

/// Runs `$body` with `$t` bound to the transaction itself or its view of
/// keyspace `$ks` (same methods).
macro_rules! in_txn {
    ($txn:expr, $ks:expr, |$t:ident| $body:expr) => {
        match $ks {
            None => {
                #[allow(unused_mut)]
                let mut $t = $txn;
                $body
            }
            Some(ks) => {
                #[allow(unused_mut)]
                let mut $t = $txn.keyspace(ks)?;
                $body
            }
        }
    };
}

/// An optimistic transaction (``db.transaction()``): reads see the store
/// as of its start plus its own writes; ``commit()`` writes everything
/// atomically or raises ``ConflictError`` (nothing written: run it
/// again). Best used as ``with db.transaction() as t:``, which commits on
/// exit and rolls back if the block raises.
#[pyclass(module = "flexdb", name = "Transaction", frozen)]
pub struct Transaction {
    handle: Arc<Handle>,
    /// `None` once committed or rolled back.
    /// Registered with the handle: dropped at the store's close.
    txn: Arc<Mutex<Option<flexdb::Transaction>>>,
    isolation: flexdb::Isolation,
}

impl Transaction {
    /// A Python transaction of `txn`.
    pub fn new(handle: Arc<Handle>, txn: flexdb::Transaction) -> Transaction {
        let isolation = txn.isolation();
        let slot = Arc::new(Mutex::new(Some(txn)));
        handle.register(Arc::downgrade(&slot) as Weak<dyn Release>);
        Transaction {
            handle,
            isolation,
            txn: slot,
        }
    }

    /// Runs `f` on the open transaction with the GIL released (and the
    /// store's read guard held).
    fn run<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut flexdb::Transaction) -> flexdb::Result<R> + Send,
    ) -> PyResult<R> {
        let mut g = lock(py, &self.txn);
        let t = g.as_mut().ok_or_else(|| closed("transaction"))?;
        let _open = self.handle.db()?;
        py.detach(|| f(t)).py_err()
    }

    fn engine_ks(&self, ks: Option<&Keyspace>) -> PyResult<Option<flexdb::Keyspace>> {
        match ks {
            None => Ok(None),
            Some(k) => Ok(Some(k.space.engine(&*self.handle.db()?)?)),
        }
    }

    pub(crate) fn get_in(
        &self,
        py: Python<'_>,
        ks: Option<&Keyspace>,
        key: &[u8],
    ) -> PyResult<Option<Py<PyBytes>>> {
        let ks = self.engine_ks(ks)?;
        let v = self.run(py, |t| in_txn!(t, &ks, |x| x.get(key)))?;
        Ok(v.map(|v| PyBytes::new(py, &v).unbind()))
    }

    pub(crate) fn contains_in(
        &self,
        py: Python<'_>,
        ks: Option<&Keyspace>,
        key: &[u8],
    ) -> PyResult<bool> {
        let ks = self.engine_ks(ks)?;
        self.run(py, |t| in_txn!(t, &ks, |x| x.contains(key)))
    }

    pub(crate) fn put_in(
        &self,
        py: Python<'_>,
        ks: Option<&Keyspace>,
        key: &[u8],
        value: &[u8],
    ) -> PyResult<()> {
        let ks = self.engine_ks(ks)?;
        self.run(py, |t| in_txn!(t, &ks, |x| x.put(key, value)))
    }

    pub(crate) fn delete_in(
        &self,
        py: Python<'_>,
        ks: Option<&Keyspace>,
        key: &[u8],
    ) -> PyResult<()> {
        let ks = self.engine_ks(ks)?;
        self.run(py, |t| in_txn!(t, &ks, |x| x.delete(key)))
    }

    pub(crate) fn delete_range_in(
        &self,
        py: Python<'_>,
        ks: Option<&Keyspace>,
        r: Bounds,
    ) -> PyResult<()> {
        if crate::convert::is_empty(&r) {
            return Ok(());
        }
        let ks = self.engine_ks(ks)?;
        self.run(py, |t| in_txn!(t, &ks, |x| x.delete_range(r)))
    }

    pub(crate) fn iter_in(
        &self,
        py: Python<'_>,
        ks: Option<&Keyspace>,
        r: Bounds,
        mode: Mode,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<PyIter> {
        let ks = self.engine_ks(ks)?;
        let it = self.run(py, |t| Ok(in_txn!(t, &ks, |x| x.range(r))))?;
        Ok(PyIter::new(self.handle.clone(), it, mode, reverse, limit))
    }

    fn end(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        let t = lock(py, &self.txn)
            .take()
            .ok_or_else(|| closed("transaction"))?;
        if !commit {
            t.rollback();
            return Ok(());
        }
        let _open = self.handle.db()?;
        py.detach(|| t.commit()).py_err()
    }
}

/// Generates the read and write methods shared by `Transaction` (its own
/// keyspace) and `TransactionKeyspace` (another one).
macro_rules! txn_methods {
    ($ty:ty, |$slf:ident| $txn:expr, $ks:expr, { $($extra:tt)* }) => {
        #[pymethods]
        impl $ty {
            $($extra)*

            /// ``t[key]``: the value as the transaction sees it; ``KeyError`` when absent.
            fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
                let $slf = self;
                let k = arg(key, "key")?;
                $txn.get_in(py, $ks, k.as_slice())?
                    .ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
            }

            /// The value of ``key`` as the transaction sees it, or ``default``.
            #[pyo3(signature = (key, default=None))]
            fn get(
                &self,
                py: Python<'_>,
                key: &Bound<'_, PyAny>,
                default: Option<Py<PyAny>>,
            ) -> PyResult<Py<PyAny>> {
                let $slf = self;
                let k = arg(key, "key")?;
                Ok(match $txn.get_in(py, $ks, k.as_slice())? {
                    Some(v) => v.into_any(),
                    None => default.unwrap_or_else(|| py.None()),
                })
            }

            /// ``key in t``.
            fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
                let $slf = self;
                let k = arg(key, "key")?;
                $txn.contains_in(py, $ks, k.as_slice())
            }

            /// ``t[key] = value``: a put at commit.
            fn __setitem__(
                &self,
                py: Python<'_>,
                key: &Bound<'_, PyAny>,
                value: &Bound<'_, PyAny>,
            ) -> PyResult<()> {
                let $slf = self;
                let (k, v) = (arg(key, "key")?, arg(value, "value")?);
                $txn.put_in(py, $ks, k.as_slice(), v.as_slice())
            }

            /// Sets ``key`` to ``value`` at commit.
            fn put(
                &self,
                py: Python<'_>,
                key: &Bound<'_, PyAny>,
                value: &Bound<'_, PyAny>,
            ) -> PyResult<()> {
                let $slf = self;
                let (k, v) = (arg(key, "key")?, arg(value, "value")?);
                $txn.put_in(py, $ks, k.as_slice(), v.as_slice())
            }

            /// ``del t[key]``: a delete at commit; ``KeyError`` when the
            /// transaction sees no such key.
            fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
                let $slf = self;
                let k = arg(key, "key")?;
                if !$txn.contains_in(py, $ks, k.as_slice())? {
                    return Err(PyKeyError::new_err(key.clone().unbind()));
                }
                $txn.delete_in(py, $ks, k.as_slice())
            }

            /// Removes ``key`` at commit (no error when absent).
            fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
                let $slf = self;
                let k = arg(key, "key")?;
                $txn.delete_in(py, $ks, k.as_slice())
            }

            /// Removes every key ``start <= key < stop`` starting with
            /// ``prefix`` (each optional) at commit.
            #[pyo3(signature = (start=None, stop=None, prefix=None))]
            fn delete_range(
                &self,
                py: Python<'_>,
                start: Option<&Bound<'_, PyAny>>,
                stop: Option<&Bound<'_, PyAny>>,
                prefix: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<()> {
                let $slf = self;
                let r = range_args(start, stop, prefix)?;
                $txn.delete_range_in(py, $ks, r)
            }

            /// ``iter(t)``: the keys in order, own writes merged in.
            fn __iter__(&self, py: Python<'_>) -> PyResult<PyIter> {
                let $slf = self;
                $txn.iter_in(py, $ks, crate::convert::bounds(None, None, None), Mode::Keys, false, None)
            }

            /// The keys (``start <= key < stop``, starting with ``prefix``),
            /// in order, own writes merged in.
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
                let $slf = self;
                let r = range_args(start, stop, prefix)?;
                $txn.iter_in(py, $ks, r, Mode::Keys, reverse, limit)
            }

            /// The values in key order (arguments as ``keys``).
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
                let $slf = self;
                let r = range_args(start, stop, prefix)?;
                $txn.iter_in(py, $ks, r, Mode::Values, reverse, limit)
            }

            /// The ``(key, value)`` pairs in key order (arguments as ``keys``).
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
                let $slf = self;
                let r = range_args(start, stop, prefix)?;
                $txn.iter_in(py, $ks, r, Mode::Items, reverse, limit)
            }

            /// The ``(key, value)`` pairs of a range (as ``items``).
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
        }
    };
}

txn_methods!(Transaction, |s| s, None, {
    /// The isolation level: ``"serializable"`` or ``"snapshot"``.
    #[getter]
    fn isolation(&self) -> &'static str {
        match self.isolation {
            flexdb::Isolation::Serializable => "serializable",
            flexdb::Isolation::Snapshot => "snapshot",
        }
    }

    /// This transaction's view of another keyspace of the store: the same
    /// methods, the same snapshot, the same commit.
    fn keyspace(slf: Py<Self>, keyspace: Py<Keyspace>) -> TransactionKeyspace {
        TransactionKeyspace {
            txn: slf,
            ks: keyspace,
        }
    }

    /// Writes the transaction's writes atomically, or raises
    /// ``ConflictError`` (nothing written; run it again). Ends it.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.end(py, true)
    }

    /// Discards the transaction's writes. Ends it.
    fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        self.end(py, false)
    }

    /// Whether it was committed or rolled back.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        lock(py, &self.txn).is_none()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Commits if the block raised nothing (a conflict raises
    /// ``ConflictError``), else rolls back and lets the exception through.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let ok = exc_type.is_none_or(|t| t.is_none());
        if lock(py, &self.txn).is_none() {
            // Ended inside the block by commit() or rollback().
            return Ok(false);
        }
        self.end(py, ok).map(|()| false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { " (ended)" } else { "" };
        format!("<flexdb.Transaction {}{state}>", self.isolation())
    }
});
txn_methods!(TransactionKeyspace, |s| s.txn.get(), Some(s.ks.get()), {});

/// A transaction's reads and writes in another keyspace
/// (``t.keyspace(ks)``); it commits with the transaction.
#[pyclass(module = "flexdb", name = "TransactionKeyspace", frozen)]
pub struct TransactionKeyspace {
    txn: Py<Transaction>,
    ks: Py<Keyspace>,
}
