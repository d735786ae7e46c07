//! `flexdb.Iterator`: a lazy, ordered iterator over keys, values or pairs.
//!
//! Invariants:
//! - It wraps one engine iterator, which reads the store as of the
//!   iterator's creation (an implicit snapshot): writes made while it
//!   runs are never seen and never break it.
//! - Pairs are pulled in chunks with the GIL released (64 pairs first,
//!   then four times more each time up to 1024, and at most about 1 MiB of
//!   keys and values unless one pair is larger), copied into one buffer,
//!   then turned into Python objects with the GIL held; `__next__` pops
//!   from the chunk. A chunk never holds a pair twice, nor skips one.
//! - The engine iterator is dropped (releasing what its snapshot pins) as
//!   soon as it is exhausted or fails; an error is raised after the pairs
//!   pulled before it, then the iterator is finished.
//! - Every pull runs under the store's read guard: a closed store raises
//!   `ClosedError` instead of reading.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::errors::to_py;
use crate::handle::{lock, Handle};

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
    /// Pulled, not yet yielded.
    buf: VecDeque<Py<PyAny>>,
    /// An error to raise once `buf` is empty.
    error: Option<flexdb::Error>,
    /// Pairs to pull next time.
    chunk: usize,
}

/// A lazy iterator over a range of a store, in key order (or reverse).
///
/// It reads the store as it was when it was made (a snapshot), so writes
/// made while iterating neither show up nor break it. Pairs are fetched
/// in chunks with the GIL released.
#[pyclass(module = "flexdb", name = "Iterator", frozen)]
pub struct PyIter {
    state: Mutex<State>,
    handle: Arc<Handle>,
    mode: Mode,
    reverse: bool,
}

impl PyIter {
    /// An iterator over `it`, yielding per `mode`, backwards if `reverse`.
    pub fn new(handle: Arc<Handle>, it: flexdb::Iter<'static>, mode: Mode, reverse: bool) -> Self {
        PyIter {
            state: Mutex::new(State {
                it: Some(it),
                buf: VecDeque::new(),
                error: None,
                chunk: FIRST_CHUNK,
            }),
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

fn pull(it: &mut flexdb::Iter<'static>, n: usize, mode: Mode, reverse: bool) -> Pulled {
    let mut p = Pulled::default();
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
    p
}

#[pymethods]
impl PyIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut st = lock(py, &self.state);
        loop {
            if let Some(x) = st.buf.pop_front() {
                return Ok(Some(x));
            }
            if let Some(e) = st.error.take() {
                return Err(to_py(e));
            }
            let chunk = st.chunk;
            let Some(it) = st.it.as_mut() else {
                return Ok(None);
            };
            let (mode, reverse) = (self.mode, self.reverse);
            let pulled = {
                let _open = self.handle.db()?;
                py.detach(|| pull(it, chunk, mode, reverse))
            };
            st.chunk = (chunk * 4).min(MAX_CHUNK);
            let a = &pulled.arena;
            for &(s, k, e) in &pulled.spans {
                let obj: Py<PyAny> = match mode {
                    Mode::Keys => PyBytes::new(py, &a[s..k]).into_any().unbind(),
                    Mode::Values => PyBytes::new(py, &a[k..e]).into_any().unbind(),
                    Mode::Items => {
                        let key = PyBytes::new(py, &a[s..k]);
                        let value = PyBytes::new(py, &a[k..e]);
                        PyTuple::new(py, [key, value])?.into_any().unbind()
                    }
                };
                st.buf.push_back(obj);
            }
            if pulled.done {
                st.it = None;
                st.error = pulled.error;
            }
        }
    }

    /// Releases the iterator's snapshot now; it then yields nothing more.
    fn close(&self, py: Python<'_>) {
        let mut st = lock(py, &self.state);
        st.it = None;
        st.buf.clear();
        st.error = None;
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
