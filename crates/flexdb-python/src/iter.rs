//! `flexdb.Iterator`: a lazy, ordered iterator over keys, values or pairs.
//!
//! Invariants:
//! - It wraps one engine iterator, which reads the store as of the
//!   iterator's creation (an implicit snapshot): writes made while it
//!   runs are never seen and never break it.
//! - Pairs are pulled in chunks with the GIL released (64 pairs first,
//!   then four times more each time up to 1024, and at most about 1 MiB of
//!   keys and values unless one pair is larger), copied into one reused
//!   buffer; `__next__` makes the Python objects of one pair from it with
//!   the GIL held, so pairs pulled but never asked for cost no objects.
//!   A chunk never holds a pair twice, nor skips one.
//! - The engine iterator is dropped (releasing what its snapshot pins) as
//!   soon as it is exhausted or fails; an error is raised after the pairs
//!   pulled before it, then the iterator is finished.
//! - Every pull runs under the store's read guard, and the store's close
//!   drops the engine iterator and what was pulled: after the close every
//!   `__next__` raises `ClosedError`.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

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

const FIRST_CHUNK: usize = 64;
const MAX_CHUNK: usize = 1024;
const CHUNK_BYTES: usize = 1 << 20;

struct State {
    /// The engine iterator; `None` once finished.
    it: Option<flexdb::Iter<'static>>,
    /// The last chunk pulled; `pulled.spans[next..]` are not yet yielded.
    pulled: Pulled,
    next: usize,
    /// Pairs to pull next time.
    chunk: usize,
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
    /// An iterator over `it`, yielding per `mode`, backwards if `reverse`.
    pub fn new(handle: Arc<Handle>, it: flexdb::Iter<'static>, mode: Mode, reverse: bool) -> Self {
        let state = Arc::new(Mutex::new(State {
            it: Some(it),
            pulled: Pulled::default(),
            next: 0,
            chunk: FIRST_CHUNK,
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

/// One chunk's bytes: `spans[i] = (start, key_end, end)` in `arena`.
#[derive(Default)]
struct Pulled {
    arena: Vec<u8>,
    spans: Vec<(usize, usize, usize)>,
    done: bool,
    error: Option<flexdb::Error>,
}

/// Refills `p` with up to `n` pairs of `it`.
fn pull(p: &mut Pulled, it: &mut flexdb::Iter<'static>, n: usize, mode: Mode, reverse: bool) {
    p.arena.clear();
    p.spans.clear();
    while p.spans.len() < n && p.arena.len() < CHUNK_BYTES {
        let next = if reverse {
            it.next_back_ref()
        } else {
            it.next_ref()
        };
        match next {
            None => {
                p.done = true;
                break;
            }
            Some(Err(e)) => {
                p.done = true;
                p.error = Some(e);
                break;
            }
            Some(Ok((k, v))) => {
                let start = p.arena.len();
                if mode != Mode::Values {
                    p.arena.extend_from_slice(k);
                }
                let key_end = p.arena.len();
                if mode != Mode::Keys {
                    p.arena.extend_from_slice(v);
                }
                p.spans.push((start, key_end, p.arena.len()));
            }
        }
    }
}

impl PyIter {
    /// The object of pair `i` of the last chunk.
    fn object(&self, py: Python<'_>, p: &Pulled, i: usize) -> PyResult<Py<PyAny>> {
        let (s, k, e) = p.spans[i];
        let a = &p.arena;
        Ok(match self.mode {
            Mode::Keys => PyBytes::new(py, &a[s..k]).into_any().unbind(),
            Mode::Values => PyBytes::new(py, &a[k..e]).into_any().unbind(),
            Mode::Items => {
                let key = PyBytes::new(py, &a[s..k]);
                let value = PyBytes::new(py, &a[k..e]);
                PyTuple::new(py, [key, value])?.into_any().unbind()
            }
        })
    }
}

impl Release for Mutex<State> {
    fn release(&self) {
        let mut st = self.lock();
        let taken = st.it.take();
        st.released = true;
        st.pulled = Pulled::default();
        st.next = 0;
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
        loop {
            if st.next < st.pulled.spans.len() {
                let i = st.next;
                st.next += 1;
                return self.object(py, &st.pulled, i).map(Some);
            }
            if let Some(e) = st.pulled.error.take() {
                return Err(to_py(e));
            }
            if st.pulled.done {
                return Ok(None);
            }
            let chunk = st.chunk;
            let Some(it) = st.it.as_mut() else {
                return Ok(None);
            };
            let (mode, reverse) = (self.mode, self.reverse);
            {
                let _open = self.handle.db()?;
                let p = &mut st.pulled;
                py.detach(|| pull(p, it, chunk, mode, reverse));
            }
            st.next = 0;
            st.chunk = (chunk * 4).min(MAX_CHUNK);
            if st.pulled.done {
                // Release the snapshot as soon as nothing is left to read.
                st.it = None;
            }
        }
    }

    /// Releases the iterator's snapshot now; it then yields nothing more.
    fn close(&self, py: Python<'_>) {
        let mut st = lock(py, &self.state);
        st.it = None;
        st.pulled = Pulled {
            done: true,
            ..Pulled::default()
        };
        st.next = 0;
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
