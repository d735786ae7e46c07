//! Python bindings of FlexDB: the native part (`flexdb._flexdb`) of the
//! `flexdb` Python package, built with maturin (see `pyproject.toml` and
//! docs/PYTHON.md).
//!
//! Invariants, kept by every module here:
//! - Keys and values cross as `bytes` (`str` is encoded as UTF-8; any
//!   other type is a `TypeError`); results are always `bytes`.
//! - Every engine call that may touch files or wait runs with the GIL
//!   released, and no Rust lock is ever waited for with the GIL held
//!   while its holder may need the GIL (`handle`).
//! - Every engine error becomes a subclass of `flexdb.Error` carrying the
//!   engine's message (`errors`); nothing here panics on any input, and
//!   a closed store raises `flexdb.ClosedError`.
//! - Every object is thread-safe (`frozen` classes with interior locks).
//!
//! Modules: `handle` (the open store, locking), `errors`, `convert`
//! (arguments), `keyspace` (the mapping API), `db` (open, close, store-wide
//! methods), `iter`, `batch`, `snapshot`, `txn`, `stats`.

use std::path::PathBuf;

use pyo3::prelude::*;

/// mimalloc for the extension's own allocations (the engine's, and the
/// binding's buffers; Python's objects keep Python's allocator), as in the
/// `flexdb` command and flexbench: scans of 50 pairs from Python took
/// about 8 % less time than with glibc's allocator (noisy; recorded in
/// docs/experiments/2026-12-06-memtable-scan-prefetch.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod batch;
mod convert;
mod db;
mod errors;
mod handle;
mod iter;
mod keyspace;
mod snapshot;
mod stats;
mod txn;

/// Opens (by default creating) the FlexDB store in directory ``path``;
/// the same as ``flexdb.DB(...)``. See ``help(flexdb.DB)`` for the options.
#[pyfunction]
#[pyo3(signature = (path, create=true, cache_mb=None, memtable_mb=None, sync=false, read_only=false, error_if_exists=false))]
#[allow(clippy::too_many_arguments)]
fn open(
    py: Python<'_>,
    path: PathBuf,
    create: bool,
    cache_mb: Option<usize>,
    memtable_mb: Option<usize>,
    sync: bool,
    read_only: bool,
    error_if_exists: bool,
) -> PyResult<Py<db::DB>> {
    let h = db::open_handle(
        py,
        path,
        create,
        cache_mb,
        memtable_mb,
        sync,
        read_only,
        error_if_exists,
    )?;
    Py::new(py, db::DB::init(h))
}

/// The native module `flexdb._flexdb` (the package re-exports it).
#[pymodule]
fn _flexdb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_class::<db::DB>()?;
    m.add_class::<keyspace::Keyspace>()?;
    m.add_class::<iter::PyIter>()?;
    m.add_class::<batch::Batch>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<txn::Transaction>()?;
    m.add_class::<txn::TransactionKeyspace>()?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_KEY_LEN", flexdb::MAX_KEY_LEN)?;
    m.add("MAX_VALUE_LEN", flexdb::MAX_VALUE_LEN)?;
    Ok(())
}
