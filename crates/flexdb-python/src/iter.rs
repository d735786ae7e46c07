//! `flexdb.Iterator`: a lazy, ordered iterator over keys, values or pairs.
//!
//! Invariants:
//! - It wraps one engine iterator, which reads the store as of the
//!   iterator's creation (an implicit snapshot): writes made while it
//!   runs are never seen and never break it.
//! - `__next__` makes the Python objects of one pair straight from the
//!   bytes the engine iterator lends (no copy in between). When the engine
//!   has the pair fetched already (`Iter::next_is_buffered`: a pop from
//!   memory) it is taken with the GIL held; otherwise the fetch of the
//!   next chunk (64 pairs from each source, perhaps a read from disk) runs
//!   with the GIL released.
//! - The engine iterator is dropped (releasing what its snapshot pins) as
//!   soon as it is exhausted or fails; an error is raised when it comes,
//!   after the pairs before it, then the iterator is finished.
//! - Every fetch runs under the store's read guard, and the store's close
//!   drops the engine iterator (under the iterator's lock, so never during
//!   a pop): after the close every `__next__` raises `ClosedError`.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::to_py;
use crate::handle::{lock, Handle, Release};

/// What an iterator yields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Keys.
    Keys,
    /// Values.
    Values,
    /// `(key, value)` tuples.
    Items,
}

struct State {
    /// The engine iterator; `None` once finished.
    it: Option<flexdb::Iter<'static>>,
    /// The store was closed: every `__next__` raises `ClosedError`.
    released: bool,
}

/// A lazy iterator over a range of a store, in key order (or reverse).
///
/// It reads the store as it was when it was made (a snapshot), so writes
/// made while iterating neither show up nor break it. Pairs are fetched
/// in chunks with the GIL released.
#[pyclass(module = "flexdb", name = "Iterator", frozen)]
pub struct PyIter {
    /// Registered with the handle: the engine iterator is dropped at the
    /// store's close.
    state: Arc<Mutex<State>>,
    handle: Arc<Handle>,
    mode: Mode,
    reverse: bool,
}

impl PyIter {
    /// An iterator over `it`, yielding per `mode`, backwards if `reverse`,
    /// at most `limit` pairs when given (the engine then reads no more).
    pub fn new(
        handle: Arc<Handle>,
        it: flexdb::Iter<'static>,
        mode: Mode,
        reverse: bool,
        limit: Option<usize>,
    ) -> Self {
        let it = match limit {
            Some(n) => it.limit(n),
            None => it,
        };
        let state = Arc::new(Mutex::new(State {
            it: Some(it),
            released: false,
        }));
        handle.register(Arc::downgrade(&state) as Weak<dyn Release>);
        PyIter {
            state,
            handle,
            mode,
            reverse,
        }
    }
}

/// The engine iterator's next pair from the front (the back, when
/// `reverse`), lent.
fn step<'i>(
    it: &'i mut flexdb::Iter<'static>,
    reverse: bool,
) -> Option<flexdb::Result<(&'i [u8], &'i [u8])>> {
    if reverse {
        it.next_back_ref()
    } else {
        it.next_ref()
    }
}

impl PyIter {
    /// The object of one pair, per the iterator's mode.
    fn object(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<Py<PyAny>> {
        Ok(match self.mode {
            Mode::Keys => PyBytes::new(py, key).into_any().unbind(),
            Mode::Values => PyBytes::new(py, value).into_any().unbind(),
            Mode::Items => (PyBytes::new(py, key), PyBytes::new(py, value))
                .into_pyobject(py)?
                .into_any()
                .unbind(),
        })
    }
}

impl Release for Mutex<State> {
    fn release(&self) {
        let mut st = self.lock();
        let taken = st.it.take();
        st.released = true;
        drop(st);
        drop(taken);
    }
}

#[pymethods]
impl PyIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut guard = lock(py, &self.state);
        let st = &mut *guard;
        if st.released {
            return Err(crate::errors::closed("store"));
        }
        let Some(it) = st.it.as_mut() else {
            return Ok(None);
        };
        let reverse = self.reverse;
        let buffered = if reverse {
            it.next_back_is_buffered()
        } else {
            it.next_is_buffered()
        };
        let got = if buffered {
            step(it, reverse)
        } else {
            let _open = self.handle.db()?;
            py.detach(|| step(it, reverse))
        };
        let got = match got {
            Some(Ok((k, v))) => Some(Ok(self.object(py, k, v))),
            Some(Err(e)) => Some(Err(e)),
            None => None,
        };
        match got {
            Some(Ok(obj)) => obj.map(Some),
            end => {
                // Exhausted or failed: release the snapshot now.
                st.it = None;
                match end {
                    Some(Err(e)) => Err(to_py(e)),
                    _ => Ok(None),
                }
            }
        }
    }

    /// Releases the iterator's snapshot now; it then yields nothing more.
    fn close(&self, py: Python<'_>) {
        let mut st = lock(py, &self.state);
        st.it = None;
    }

    fn __repr__(&self) -> String {
        let what = match self.mode {
            Mode::Keys => "keys",
            Mode::Values => "values",
            Mode::Items => "items",
        };
        let dir = if self.reverse { ", reverse" } else { "" };
        format!("<flexdb.Iterator over {what}{dir}>")
    }
}
