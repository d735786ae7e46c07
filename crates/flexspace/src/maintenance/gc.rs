//! Garbage collection, room making and maintenance (§4.1).
//!
//! Policy:
//! - *Room*: keep `reserve_segments` free segments beyond what the next
//!   mutations need. First a commit (emptied segments become free after it
//!   and their grace period), then rounds that relocate the live extents of
//!   the least utilized segments at most 30/32 full. Live data is capped at
//!   30/32 of the data file, so such a segment exists while garbage does,
//!   and relocating it gains room (§4.1).
//! - *Garbage*: bound space amplification: when the garbage in segments
//!   that hold live data exceeds `gc_garbage_high` of their capacity,
//!   relocate the least utilized ones until it is below `gc_garbage_low`.
//!
//! A round holds `maint` and the gate (mutations wait; readers do not):
//! it picks victims and scans the index for their extents under the read
//! lock, then in batches copies the extents' bytes with no lock held and
//! takes the write lock only to append them and remap (an extent keeps its
//! tag; it stays one extent unless the open segment fills in its middle,
//! which leaves its tail as a second, untagged extent). It ends with a commit, after which the
//! victims wait for their grace period and become free.

use std::time::{Duration, Instant};

use crate::error::{io, Error, Result};
use crate::open::DATA;
use crate::options::{MAX_EXTENT, SEGMENT_SIZE};
use crate::space::{max_inflight, LogPosition, SpaceInner};
use crate::state::SpaceState;
use crate::storage::StorageFile;

/// Most bytes (and extents) relocated under one hold of the write lock.
const BATCH_BYTES: u64 = 128 << 10;
const BATCH_EXTENTS: usize = 64;
/// Most victims of a round relocating for room.
const ROOM_VICTIMS: usize = 16;
/// Most live bytes a round relocating for garbage moves (four full
/// segments' worth), and most victims it takes. A round walks the whole
/// index once whatever it moves, so nearly empty victims are taken many at
/// a time: a fixed four victims a round spent 24 ms walking a 10 M-pair
/// index per 0–5 KiB moved (measured in docs/experiments/2026-11-24-flexspace-gc-rounds-by-bytes.md).
const GARBAGE_BYTES: u64 = 4 * SEGMENT_SIZE;
const GARBAGE_VICTIMS: usize = 256;
/// Most rounds one `maintain` call runs.
const MAX_ROUNDS: usize = 64;
/// How long room making waits for readers to release quarantined segments.
const GRACE_WAIT: Duration = Duration::from_secs(5);

/// Free segments kept beyond what mutations need: 1/256 of the data file,
/// between 1 and the paper's 64 (see docs/experiments/2026-11-23-flexspace-gc-reserve-and-thresholds.md).
pub fn reserve_segments(count: usize) -> u64 {
    (count as u64 / 256).clamp(1, 64)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Goal {
    Room,
    Garbage,
    /// `compact`: every segment holding data that is not full.
    Compact,
}

fn room_wanted(st: &SpaceState) -> u64 {
    reserve_segments(st.seg.count()) * SEGMENT_SIZE
}

/// Whether room-driven collection could help: room is short and GC has
/// not found itself stuck at the current amount of garbage.
fn room_due(st: &SpaceState) -> bool {
    st.available() < room_wanted(st) && st.gc_stuck_at.is_none_or(|g| st.seg.garbage().1 > g)
}

fn garbage_due(st: &SpaceState, high: f64, low: f64) -> bool {
    let r = st.seg.garbage_ratio();
    r > high || (st.gc_active && r > low)
}

impl SpaceInner {
    /// Whether collection for garbage is due (see the module policy).
    pub(crate) fn garbage_due(&self, st: &SpaceState) -> bool {
        garbage_due(st, self.opts.gc_garbage_high, self.opts.gc_garbage_low)
    }

    /// See [`crate::FlexSpace::maintenance_due`].
    pub(crate) fn maintenance_due(&self) -> bool {
        let st = self.state.read();
        if st.poisoned {
            return false;
        }
        st.log_buf.len() >= self.opts.commit_log_bytes
            || room_due(&st)
            || garbage_due(&st, self.opts.gc_garbage_high, self.opts.gc_garbage_low)
            || self.log_past_checkpoint()
    }

    fn log_past_checkpoint(&self) -> bool {
        let end = self
            .counters
            .log_end
            .load(std::sync::atomic::Ordering::Relaxed);
        end.saturating_sub(crate::log::HEADER as u64) > self.opts.checkpoint_log_bytes
    }

    /// See [`crate::FlexSpace::maintain`].
    pub(crate) fn maintain(&self) -> Result<()> {
        self.check_usable()?;
        let mut m = self.maint.lock();
        if self.state.read().closed {
            return Ok(());
        }
        let commit_due = {
            let mut st = self.state.write();
            st.release();
            st.log_buf.len() >= self.opts.commit_log_bytes
                || (st.seg.pending_count() > 0 && room_due(&st))
        };
        if commit_due {
            self.commit_locked(&mut m)?;
        }
        for _ in 0..MAX_ROUNDS {
            let goal = {
                let st = self.state.read();
                if room_due(&st) {
                    Goal::Room
                } else if garbage_due(&st, self.opts.gc_garbage_high, self.opts.gc_garbage_low) {
                    Goal::Garbage
                } else {
                    break;
                }
            };
            if self.gc_round(&mut m, goal)?.is_none() {
                break;
            }
        }
        self.checkpoint_if_due(&mut m)?;
        self.punch_soon();
        Ok(())
    }

    /// See [`crate::FlexSpace::reserve`].
    pub(crate) fn reserve(&self, bytes: u64) -> Result<()> {
        self.check_usable()?;
        // Mutations adding `bytes` may seal this many segments; with room
        // for their writes in flight (and buffers for the segments they
        // open), none of them waits for a segment write.
        let seals = 1 + (bytes / SEGMENT_SIZE) as usize;
        self.writer
            .wait_below(max_inflight(&self.opts).saturating_sub(seals).max(1));
        self.writer.prestart();
        self.pool.fill(seals);
        self.make_room(bytes, true)?;
        let st = self.state.read();
        st.check_cap(bytes)?;
        if st.available() < bytes {
            return Err(Error::NoSpace(format!(
                "garbage collection could not make room for {bytes} bytes"
            )));
        }
        Ok(())
    }

    /// Makes `bytes` (plus the reserve, when asked) appendable if it can,
    /// by commits, grace-period waits and GC rounds. Never fails for lack
    /// of room: the caller checks.
    pub(crate) fn make_room(&self, bytes: u64, with_reserve: bool) -> Result<()> {
        {
            let st = self.state.read();
            let want = bytes + if with_reserve { room_wanted(&st) } else { 0 };
            if st.available() >= want {
                return Ok(());
            }
        }
        let mut m = self.maint.lock();
        let deadline = Instant::now() + GRACE_WAIT;
        loop {
            let (avail, want, pending, quarantined, stuck) = {
                let mut st = self.state.write();
                st.release();
                let want = bytes + if with_reserve { room_wanted(&st) } else { 0 };
                let stuck = st.gc_stuck_at.is_some_and(|g| st.seg.garbage().1 <= g);
                (
                    st.available(),
                    want,
                    st.seg.pending_count(),
                    // This process's readers only (see `settle_freed`).
                    st.seg.in_grace(),
                    stuck,
                )
            };
            if avail >= want {
                return Ok(());
            }
            if pending > 0 {
                self.commit_locked(&mut m)?;
                continue;
            }
            if quarantined > 0 && Instant::now() < deadline {
                // Readers still hold emptied segments: they are short.
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            if stuck || self.gc_round(&mut m, Goal::Room)?.is_none() {
                return Ok(());
            }
        }
    }

    /// One garbage-collection round (see the module documentation): the
    /// bytes it relocated, `None` when it found nothing to relocate.
    pub(crate) fn gc_round(&self, m: &mut LogPosition, goal: Goal) -> Result<Option<u64>> {
        let gate = self.gate.lock();
        let pieces = {
            let mut st = self.state.write();
            st.release();
            let chosen = pick_victims(&st, goal, self.opts.gc_garbage_low);
            if chosen.is_empty() {
                match goal {
                    Goal::Room => st.gc_stuck_at = Some(st.seg.garbage().1),
                    Goal::Garbage => st.gc_active = false,
                    Goal::Compact => {}
                }
                return Ok(None);
            }
            if goal == Goal::Garbage {
                st.gc_active = true;
            }
            drop(st);
            let st = self.state.read();
            victim_pieces(&st, &chosen)?
        };
        let mut moved = 0u64;
        let mut i = 0;
        while i < pieces.len() {
            let mut j = i;
            let mut bytes = 0;
            while j < pieces.len() && j - i < BATCH_EXTENTS && bytes < BATCH_BYTES {
                bytes += pieces[j].1;
                j += 1;
            }
            self.relocate_batch(&pieces[i..j])?;
            moved += bytes;
            i = j;
        }
        {
            let mut st = self.state.write();
            st.gc_stuck_at = None;
            if goal == Goal::Garbage && st.seg.garbage_ratio() <= self.opts.gc_garbage_low {
                st.gc_active = false;
            }
        }
        drop(gate);
        let ctr = &self.counters;
        ctr.gc_runs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ctr.gc_relocated
            .fetch_add(moved, std::sync::atomic::Ordering::Relaxed);
        self.commit_locked(m)?;
        Ok(Some(moved))
    }

    /// Copies the bytes of `pieces` (logical offset, length, physical
    /// address; the gate is held, so they stay where they are) without the
    /// write lock, then appends and remaps them under it.
    fn relocate_batch(&self, pieces: &[(u64, u64, u64)]) -> Result<()> {
        let total: u64 = pieces.iter().map(|p| p.1).sum();
        let mut data = vec![0u8; total as usize];
        let bufs: Vec<_> = {
            let st = self.state.read();
            pieces
                .iter()
                .map(|p| st.resident(p.2 / SEGMENT_SIZE).cloned())
                .collect()
        };
        let mut at = 0usize;
        for (p, buf) in pieces.iter().zip(&bufs) {
            let out = &mut data[at..at + p.1 as usize];
            match buf {
                Some(b) => {
                    if !b.read((p.2 % SEGMENT_SIZE) as usize, out) {
                        return Err(Error::Corrupt {
                            file: DATA.into(),
                            detail: "an extent maps bytes its segment buffer does not hold".into(),
                        });
                    }
                }
                None => self.files.data.read_exact_at(p.2, out).map_err(io(DATA))?,
            }
            at += p.1 as usize;
        }
        let mut st = self.state.write();
        let mut at = 0usize;
        for p in pieces {
            st.relocate(p.0, &data[at..at + p.1 as usize])?;
            at += p.1 as usize;
        }
        Ok(())
    }

    /// See [`crate::FlexSpace::defrag`]: under the gate, chunk by chunk,
    /// the bytes are read without the lock and remapped under it.
    pub(crate) fn defrag(&self, offset: u64, len: u64) -> Result<()> {
        self.check_usable()?;
        self.state.read().check_range(offset, len)?;
        self.writer.wait_below(max_inflight(&self.opts));
        self.make_room(len, self.opts.auto_maintenance)?;
        let commit_due = {
            let _gate = self.gate.lock();
            {
                let mut st = self.state.write();
                if st.poisoned {
                    return Err(self.poisoned_error());
                }
                st.check_range(offset, len)?;
                if st.available() < len {
                    st.release();
                }
                if st.available() < len {
                    return Err(Error::NoSpace(format!("no room to defragment {len} bytes")));
                }
            }
            let mut at = offset;
            let end = offset + len;
            while at < end {
                let n = (end - at).min(MAX_EXTENT * 4);
                self.defrag_chunk(at, n)?;
                at += n;
            }
            self.state.read().log_buf.len() >= self.opts.commit_log_bytes
        };
        if self.opts.auto_maintenance && commit_due {
            self.commit_auto()?;
        }
        Ok(())
    }

    /// Defragments one chunk (the gate is held).
    fn defrag_chunk(&self, at: u64, n: u64) -> Result<()> {
        let (runs, plan) = {
            let st = self.state.read();
            let mut runs: Vec<(u64, u64)> = Vec::new();
            for e in st.tree.extents_from(at)? {
                let from = e.offset.max(at);
                let to = (e.offset + e.len).min(at + n);
                if e.addr.is_some() {
                    match runs.last_mut() {
                        Some(r) if r.0 + r.1 == from => r.1 += to - from,
                        _ => runs.push((from, to - from)),
                    }
                }
                if to >= at + n {
                    break;
                }
            }
            let guard = self.readers.enter(st.seg.epoch());
            let plan = crate::read::plan(&st, at, n, self.source(), guard)?;
            (runs, plan)
        };
        let mut data = vec![0u8; n as usize];
        plan.read(&mut data)?;
        drop(plan);
        let mut st = self.state.write();
        for (from, len) in runs {
            let s = (from - at) as usize;
            st.relocate(from, &data[s..s + len as usize])?;
        }
        Ok(())
    }
}

/// Victims of a round: the least utilized segments holding data (not the
/// open one), as many as fit in the free room.
fn pick_victims(st: &SpaceState, goal: Goal, low: f64) -> Vec<u32> {
    let room = st.available();
    let (limit, cap, most) = match goal {
        Goal::Room => (ROOM_VICTIMS, SEGMENT_SIZE / 32 * 30, room),
        Goal::Garbage | Goal::Compact => {
            (GARBAGE_VICTIMS, SEGMENT_SIZE - 1, room.min(GARBAGE_BYTES))
        }
    };
    let (mut n, mut garbage) = st.seg.garbage();
    let mut moving = 0u64;
    let mut victims = Vec::new();
    for s in st.seg.gc_candidates() {
        let v = st.seg.valid(s);
        if v > cap || moving + v > most || victims.len() >= limit {
            break;
        }
        if goal == Goal::Garbage {
            if n == 0 || (garbage as f64) <= low * (n as u64 * SEGMENT_SIZE) as f64 {
                break;
            }
            // Relocated bytes land in the open segment and later ones.
            n -= 1;
            garbage -= SEGMENT_SIZE - v;
        }
        victims.push(s);
        moving += v;
    }
    victims
}

/// The parts of extents that lie in `victims`: (logical offset, length,
/// physical address), in logical order.
fn victim_pieces(st: &SpaceState, victims: &[u32]) -> Result<Vec<(u64, u64, u64)>> {
    let mut is_victim = vec![false; st.seg.count()];
    for &v in victims {
        if let Some(x) = is_victim.get_mut(v as usize) {
            *x = true;
        }
    }
    let mut pieces = Vec::new();
    for e in st.tree.extents_from(0)? {
        let Some(a) = e.addr else { continue };
        let mut p = a;
        let end = a + e.len;
        while p < end {
            let seg = p / SEGMENT_SIZE;
            let n = ((seg + 1) * SEGMENT_SIZE).min(end) - p;
            if is_victim.get(seg as usize).copied().unwrap_or(false) {
                pieces.push((e.offset + (p - a), n, p));
            }
            p += n;
        }
    }
    Ok(pieces)
}
