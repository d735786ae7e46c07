//! Reads in two phases: a *plan* translates a logical range into physical
//! parts under the space's read lock (in memory, microseconds), and the
//! plan then copies the bytes with no lock held: from segment buffers
//! (shared by `Arc`, immutable where a plan looks) or from the data file.
//!
//! Invariants:
//! - A plan holds a grace-period registration ([`ReadGuard`]) taken under
//!   the read lock, so no segment it translated into is reused before the
//!   plan is dropped; the physical bytes it names stay what they were.
//! - Parts are listed in logical order and cover the planned range exactly;
//!   each lies in one segment; adjacent file parts that are physically
//!   contiguous are merged into one read.

use std::sync::Arc;

use flextree::{Extent, FlexTree};

use crate::error::{io, Error, Result};
use crate::grace::ReadGuard;
use crate::options::SEGMENT_SIZE;
use crate::segments::segbuf::SegBuf;
use crate::state::SpaceState;
use crate::storage::mapping::Mapping;
use crate::storage::StorageFile;

/// Where the bytes of one part come from.
enum Src {
    Hole,
    Mem(Arc<SegBuf>, usize),
    File(u64),
}

struct Part {
    src: Src,
    len: usize,
}

/// Parts, the first few stored inline (a read of a few KiB has a few).
#[derive(Default)]
struct Parts {
    inline: [Option<Part>; 4],
    n: usize,
    spill: Vec<Part>,
}

impl Parts {
    fn push(&mut self, src: Src, len: usize) {
        // Merge with a physically contiguous file part.
        if let (Src::File(a), Some(last)) = (&src, self.last_mut()) {
            if let Src::File(b) = last.src {
                if b + last.len as u64 == *a && (b / SEGMENT_SIZE) == (*a / SEGMENT_SIZE) {
                    last.len += len;
                    return;
                }
            }
        }
        let p = Part { src, len };
        if self.n < self.inline.len() {
            self.inline[self.n] = Some(p);
        } else {
            self.spill.push(p);
        }
        self.n += 1;
    }

    fn last_mut(&mut self) -> Option<&mut Part> {
        if self.n == 0 {
            None
        } else if self.n <= self.inline.len() {
            self.inline[self.n - 1].as_mut()
        } else {
            self.spill.last_mut()
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Part> {
        self.inline.iter().flatten().chain(self.spill.iter())
    }
}

/// Where the data file's bytes are read from.
#[derive(Clone, Copy)]
pub struct DataSource<'a> {
    pub file: &'a dyn StorageFile,
    pub map: Option<&'a Mapping>,
}

/// A planned read: see [`crate::FlexSpace::plan_read`].
pub struct ReadPlan<'a> {
    parts: Parts,
    len: usize,
    extents: usize,
    source: DataSource<'a>,
    /// The plan's own registration; `None` for a plan of a snapshot, whose
    /// registration covers its plans.
    _guard: Option<ReadGuard<'a>>,
}

impl ReadPlan<'_> {
    /// Bytes the plan reads (the requested length, clipped at the end of
    /// the space).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the plan reads nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Extents (of the index) the planned bytes come from.
    pub fn extents(&self) -> usize {
        self.extents
    }

    /// Copies the planned bytes into `buf` (at most `buf.len()` of them);
    /// returns the bytes copied and the extents the plan covers.
    pub fn read(&self, buf: &mut [u8]) -> Result<(usize, usize)> {
        let n = self.len.min(buf.len());
        let mut at = 0usize;
        for p in self.parts.iter() {
            if at >= n {
                break;
            }
            let take = p.len.min(n - at);
            let out = &mut buf[at..at + take];
            match &p.src {
                Src::Hole => out.fill(0),
                Src::Mem(b, off) => {
                    if !b.read(*off, out) {
                        return Err(Error::Corrupt {
                            file: "data".into(),
                            detail: "a read planned bytes its segment buffer does not hold".into(),
                        });
                    }
                }
                Src::File(a) => {
                    if !self.source.map.is_some_and(|m| m.read(*a, out)) {
                        self.source
                            .file
                            .read_exact_at(*a, out)
                            .map_err(io("data"))?;
                    }
                }
            }
            at += take;
        }
        Ok((n, self.extents))
    }
}

/// Plans a read of up to `len` bytes at `offset` with `guard` registered
/// (see [`plan_in`]): the caller holds the read lock.
pub fn plan<'a>(
    st: &SpaceState,
    offset: u64,
    len: u64,
    source: DataSource<'a>,
    guard: ReadGuard<'a>,
) -> Result<ReadPlan<'a>> {
    plan_in(
        &st.tree,
        st.resident_table(),
        offset,
        len,
        source,
        Some(guard),
    )
}

/// Plans a read of up to `len` bytes at `offset` against `tree` and the
/// segment buffers `resident`, which stay as they are for the plan's life
/// (held under the read lock, or a snapshot's copies). The read stops at
/// the end of the space; an offset past the end is `OutOfRange`.
pub fn plan_in<'a>(
    tree: &FlexTree,
    resident: &[Option<Arc<SegBuf>>],
    offset: u64,
    len: u64,
    source: DataSource<'a>,
    guard: Option<ReadGuard<'a>>,
) -> Result<ReadPlan<'a>> {
    let len = clamped(tree, offset, len)?;
    let mut parts = Parts::default();
    let extents = translate(tree, resident, offset, len, &mut parts)?;
    Ok(ReadPlan {
        parts,
        len: len as usize,
        extents,
        source,
        _guard: guard,
    })
}

/// The extents of `tree` the `len` bytes at `offset` span (see
/// [`plan_in`] for the range's bounds).
pub fn count_extents(tree: &FlexTree, offset: u64, len: u64) -> Result<usize> {
    let len = clamped(tree, offset, len)?;
    Ok(spanned(tree, offset, len)?.count())
}

/// `len` cut at the end of `tree`'s space; `offset` past it is
/// `OutOfRange`.
fn clamped(tree: &FlexTree, offset: u64, len: u64) -> Result<u64> {
    let size = tree.len();
    if offset > size {
        return Err(Error::OutOfRange { offset, len, size });
    }
    Ok(len.min(size - offset))
}

/// The extents the `len` bytes at `offset` (within the space) span, in
/// order: none for no bytes.
fn spanned(tree: &FlexTree, offset: u64, len: u64) -> Result<impl Iterator<Item = Extent> + '_> {
    let end = offset + len;
    let mut more = len > 0;
    Ok(tree.extents_from(offset)?.take_while(move |e| {
        let this = more;
        more = e.offset + e.len < end;
        this
    }))
}

fn translate(
    tree: &FlexTree,
    resident: &[Option<Arc<SegBuf>>],
    offset: u64,
    len: u64,
    parts: &mut Parts,
) -> Result<usize> {
    let end = offset + len;
    let mut extents = 0;
    for e in spanned(tree, offset, len)? {
        let from = e.offset.max(offset);
        let to = (e.offset + e.len).min(end);
        extents += 1;
        match e.addr {
            None => parts.push(Src::Hole, (to - from) as usize),
            Some(base) => {
                let mut a = base + (from - e.offset);
                let stop = a + (to - from);
                while a < stop {
                    let seg = a / SEGMENT_SIZE;
                    let n = ((seg + 1) * SEGMENT_SIZE).min(stop) - a;
                    let src = match resident.get(seg as usize).and_then(Option::as_ref) {
                        Some(b) => Src::Mem(b.clone(), (a % SEGMENT_SIZE) as usize),
                        None => Src::File(a),
                    };
                    parts.push(src, n as usize);
                    a += n;
                }
            }
        }
    }
    Ok(extents)
}
