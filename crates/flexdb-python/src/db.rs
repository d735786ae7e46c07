//! `flexdb.DB`: opening and closing a store, and what belongs to the
//! store as a whole (keyspaces, statistics, checks, durability).
//!
//! Invariants: a `DB` owns its `Handle`; `close()` (also on leaving a
//! `with` block) flushes and closes the engine once, waiting for calls in
//! flight, and is idempotent; after it every method of the DB and of
//! everything made from it raises `ClosedError`. A `DB` dropped without
//! `close()` closes the store as the engine's `Drop` does (errors
//! unseen). Opening runs with the GIL released (recovery may take long).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::OrPy;
use crate::handle::Handle;
use crate::keyspace::{Keyspace, Space};

const MIB: usize = 1 << 20;

/// An open FlexDB store: an ordered mapping of bytes keys to bytes values,
/// kept on disk in the directory ``path``.
///
/// ``DB(path, create=True, cache_mb=None, memtable_mb=None, sync=False,
/// read_only=False, error_if_exists=False)`` opens it (``flexdb.open``
/// is the same): ``create`` makes the store when the directory holds
/// none; ``cache_mb`` and ``memtable_mb`` size the read cache and the
/// in-memory write buffer (engine defaults: 256 and 512 MiB); ``sync``
/// makes each write durable before it returns; ``read_only`` opens beside
/// a writer process, seeing the store as of the open (``catch_up()``
/// moves forward).
///
/// The DB is the default keyspace: it has every method of
/// ``flexdb.Keyspace`` (``db[k]``, ``get``, ``put``, ``range``,
/// ``batch``, ``snapshot``, ``transaction``...). Use it as a context
/// manager to close it. Thread-safe; the GIL is released during engine
/// calls.
#[pyclass(module = "flexdb", name = "DB", extends = Keyspace, frozen)]
pub struct DB {
    handle: Arc<Handle>,
}

/// Opens the store at `path` with the GIL released.
#[allow(clippy::too_many_arguments)]
pub fn open_handle(
    py: Python<'_>,
    path: PathBuf,
    create: bool,
    cache_mb: Option<usize>,
    memtable_mb: Option<usize>,
    sync: bool,
    read_only: bool,
    error_if_exists: bool,
) -> PyResult<Arc<Handle>> {
    let mut opts = flexdb::Options::new()
        .create_if_missing(create && !read_only)
        .error_if_exists(error_if_exists)
        .sync_writes(sync)
        .read_only(read_only);
    if let Some(mb) = cache_mb {
        // A size beyond the machine's memory: the engine refuses it.
        opts = opts.cache_bytes(mb.saturating_mul(MIB));
    }
    if let Some(mb) = memtable_mb {
        opts = opts.memtable_bytes(mb.saturating_mul(MIB));
    }
    let db = py.detach(|| flexdb::Db::open(&path, opts)).py_err()?;
    Ok(Arc::new(Handle::new(db)))
}

impl DB {
    /// The initializer of a `DB` over `handle`.
    pub fn init(handle: Arc<Handle>) -> PyClassInitializer<DB> {
        PyClassInitializer::from(Keyspace::new(
            handle.clone(),
            Space::Default,
            flexdb::DEFAULT_KEYSPACE,
        ))
        .add_subclass(DB { handle })
    }
}

#[pymethods]
impl DB {
    #[new]
    #[pyo3(signature = (path, create=true, cache_mb=None, memtable_mb=None, sync=false, read_only=false, error_if_exists=false))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        path: PathBuf,
        create: bool,
        cache_mb: Option<usize>,
        memtable_mb: Option<usize>,
        sync: bool,
        read_only: bool,
        error_if_exists: bool,
    ) -> PyResult<PyClassInitializer<DB>> {
        let h = open_handle(
            py,
            path,
            create,
            cache_mb,
            memtable_mb,
            sync,
            read_only,
            error_if_exists,
        )?;
        Ok(DB::init(h))
    }

    /// The store's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.handle.path.clone()
    }

    /// Whether the store was opened with ``read_only=True``.
    #[getter]
    fn read_only(&self) -> bool {
        self.handle.read_only
    }

    /// Whether ``close()`` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// Flushes, checkpoints and closes the store, waiting for calls in
    /// flight. Idempotent; afterwards every method raises ``ClosedError``.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.handle.close(py)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Closes the store (exceptions of the block propagate).
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py).map(|()| false)
    }

    /// The keyspace ``name``, created if it does not exist yet
    /// (``"default"`` is the DB's own).
    fn keyspace(&self, py: Python<'_>, name: &str) -> PyResult<Py<Keyspace>> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        let space = if name == flexdb::DEFAULT_KEYSPACE {
            Space::Default
        } else {
            Space::named(&self.handle, py.detach(|| db.keyspace(name)).py_err()?)
        };
        Py::new(py, Keyspace::new(self.handle.clone(), space, name))
    }

    /// The names of the store's keyspaces, ``"default"`` first.
    fn keyspaces(&self) -> PyResult<Vec<String>> {
        Ok(self.handle.db()?.keyspaces())
    }

    /// Removes keyspace ``name`` and every pair in it; returns whether it
    /// existed. Its ``Keyspace`` objects then raise ``InvalidArgumentError``.
    fn drop_keyspace(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| db.drop_keyspace(name)).py_err()
    }

    /// Makes every write acknowledged so far durable (syncs the log).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| db.sync()).py_err()
    }

    /// Commits the in-memory writes to the data file and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| db.flush()).py_err()
    }

    /// Rewrites the data file to drop garbage; returns a dict report.
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        let r = py.detach(|| db.compact()).py_err()?;
        let d = PyDict::new(py);
        d.set_item("disk_bytes_before", r.disk_bytes_before)?;
        d.set_item("disk_bytes_after", r.disk_bytes_after)?;
        d.set_item("relocated_bytes", r.relocated_bytes)?;
        d.set_item("punched_bytes", r.punched_bytes)?;
        d.set_item("held_bytes", r.held_bytes)?;
        Ok(d)
    }

    /// Moves a read-only store forward to the writer's state now.
    fn catch_up(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| db.catch_up()).py_err()
    }

    /// Removes the pairs whose time to live ran out now; returns how many.
    fn remove_expired(&self, py: Python<'_>) -> PyResult<u64> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        py.detach(|| db.remove_expired()).py_err()
    }

    /// The store's statistics as a dict (pairs, bytes, cache, writes, ...;
    /// durations in seconds).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        let s = py.detach(|| db.stats());
        crate::stats::to_dict(py, &s)
    }

    /// Checks the whole store's consistency (reads everything); returns a
    /// dict: ``ok``, ``pairs``, ``intervals``, ``bytes``,
    /// ``memtable_pairs``, ``problems`` (list of str), ``damaged`` (list
    /// of str).
    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle.db()?;
        let db: &flexdb::Db = &db;
        let r = py.detach(|| db.check()).py_err()?;
        let d = PyDict::new(py);
        d.set_item("ok", r.is_ok())?;
        d.set_item("pairs", r.pairs)?;
        d.set_item("intervals", r.intervals)?;
        d.set_item("bytes", r.bytes)?;
        d.set_item("memtable_pairs", r.memtable_pairs)?;
        d.set_item("problems", r.problems.clone())?;
        let damaged: Vec<String> = r.damaged.iter().map(ToString::to_string).collect();
        d.set_item("damaged", damaged)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let mut flags = String::new();
        if self.handle.read_only {
            flags.push_str(" read-only");
        }
        if self.handle.is_closed() {
            flags.push_str(" (closed)");
        }
        format!("<flexdb.DB {:?}{flags}>", self.handle.path)
    }
}
