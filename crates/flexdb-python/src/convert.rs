//! Conversions between Python arguments and the engine's byte strings,
//! ranges and durations.
//!
//! Invariants: a key or value is a `bytes` (borrowed, never copied) or a
//! `str` (encoded as UTF-8); anything else is a `TypeError` naming the
//! type. A borrowed `bytes` is immutable and kept alive by the caller's
//! `Bound`, so its slice may be read with the GIL released. Ranges are
//! half-open, `[start, stop)`, intersected with a prefix's keys.

use std::ops::Bound as RangeBound;
use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors::InvalidArgumentError;

/// A key or value argument: a `bytes` object, given or made from a
/// `str`'s UTF-8 encoding, read in place.
pub struct Arg<'py>(Bound<'py, PyBytes>);

impl Arg<'_> {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// `obj` as bytes: `bytes` or `str`, else `TypeError` naming `what`.
pub fn arg<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Arg<'py>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Arg(b.clone()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Arg(s.encode_utf8()?));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes or str, not {}",
        obj.get_type().name()?
    )))
}

/// An optional argument: `None` stays `None`.
pub fn opt_arg<'py>(obj: Option<&Bound<'py, PyAny>>, what: &str) -> PyResult<Option<Arg<'py>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => arg(o, what).map(Some),
    }
}

/// The smallest key above every key that starts with `prefix` (`None`:
/// no such key, the prefix is empty or all 0xff).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// Owned bounds of a range.
pub type Bounds = (RangeBound<Vec<u8>>, RangeBound<Vec<u8>>);

/// The keys `start <= k < stop` that start with `prefix` (each optional).
pub fn bounds(start: Option<&[u8]>, stop: Option<&[u8]>, prefix: Option<&[u8]>) -> Bounds {
    let mut lo: Option<Vec<u8>> = start.map(<[u8]>::to_vec);
    let mut hi: Option<Vec<u8>> = stop.map(<[u8]>::to_vec);
    if let Some(p) = prefix {
        if lo.as_deref().is_none_or(|l| l < p) {
            lo = Some(p.to_vec());
        }
        if let Some(end) = prefix_successor(p) {
            if hi.as_deref().is_none_or(|h| h > end.as_slice()) {
                hi = Some(end);
            }
        }
    }
    (
        lo.map_or(RangeBound::Unbounded, RangeBound::Included),
        hi.map_or(RangeBound::Unbounded, RangeBound::Excluded),
    )
}

/// A time to live in seconds (a float) as a duration; zero, negative,
/// NaN or too long is `InvalidArgumentError`.
pub fn ttl(seconds: f64) -> PyResult<Duration> {
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(InvalidArgumentError::new_err(format!(
            "invalid argument: a time to live must be positive, not {seconds}"
        )));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| {
        InvalidArgumentError::new_err(format!("invalid argument: time to live {seconds}: {e}"))
    })
}

/// Whether no key lies within `r`.
pub fn is_empty(r: &Bounds) -> bool {
    match (&r.0, &r.1) {
        (RangeBound::Included(a), RangeBound::Excluded(b)) => a >= b,
        _ => false,
    }
}
