//! Shared test helpers: a `Vec<u8>` model of a space and random operations.

#![allow(dead_code)]

pub mod blocking;
pub mod blocks;

use flexspace::{FlexSpace, Result};
use rand::rngs::StdRng;
use rand::Rng;

/// One operation on a space.
#[derive(Clone, Debug)]
pub enum Op {
    Insert(u64, Vec<u8>),
    Write(u64, Vec<u8>),
    Collapse(u64, u64),
    Update(u64, Vec<u8>, u64),
    /// A tagged update of the same length (a pair rewritten in place).
    Replace(u64, Vec<u8>, u16),
    Truncate(u64),
    Tag(u64, u16),
    Defrag(u64, u64),
    Sync,
    Checkpoint,
}

/// Draws an operation valid for a space of `len` bytes; sizes up to `max`.
pub fn random_op(rng: &mut StdRng, len: u64, max: usize) -> Op {
    let data = |rng: &mut StdRng| {
        let n = rng.gen_range(1..=max);
        let b: u8 = rng.gen();
        (0..n).map(|i| b.wrapping_add(i as u8)).collect::<Vec<u8>>()
    };
    let at = |rng: &mut StdRng, below: u64| {
        if below == 0 {
            0
        } else {
            rng.gen_range(0..below)
        }
    };
    match rng.gen_range(0..100) {
        0..=34 => Op::Insert(at(rng, len + 1), data(rng)),
        35..=49 => Op::Write(at(rng, len + 10), data(rng)),
        50..=64 if len > 0 => {
            let o = at(rng, len);
            Op::Collapse(o, rng.gen_range(1..=(len - o).min(max as u64)))
        }
        65..=69 if len > 0 => {
            let o = at(rng, len);
            Op::Update(o, data(rng), rng.gen_range(0..=(len - o).min(max as u64)))
        }
        70..=74 if len > 0 => {
            let o = at(rng, len);
            let mut d = data(rng);
            d.truncate((len - o) as usize);
            Op::Replace(o, d, rng.gen_range(1..100))
        }
        75..=77 => Op::Truncate(at(rng, len + 100)),
        78..=84 if len > 0 => Op::Tag(at(rng, len), rng.gen_range(1..100)),
        85..=87 if len > 0 => {
            let o = at(rng, len);
            Op::Defrag(o, rng.gen_range(1..=(len - o).min(max as u64)))
        }
        88..=89 => Op::Checkpoint,
        _ => Op::Sync,
    }
}

/// Applies `op` to the space.
pub fn apply(space: &FlexSpace, op: &Op) -> Result<()> {
    match op {
        Op::Insert(o, d) => space.insert(*o, d),
        Op::Write(o, d) => space.write(*o, d),
        Op::Collapse(o, n) => space.collapse(*o, *n),
        Op::Update(o, d, n) => space.update(*o, d, *n),
        Op::Replace(o, d, t) => space.update_tagged(*o, d, d.len() as u64, *t),
        Op::Truncate(n) => space.truncate(*n),
        Op::Tag(o, t) => space.set_tag(*o, *t),
        Op::Defrag(o, n) => space.defrag(*o, *n),
        Op::Sync => space.sync(),
        Op::Checkpoint => space.checkpoint(),
    }
}

/// Applies `op` to the model.
pub fn apply_model(m: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Insert(o, d) => {
            m.splice(*o as usize..*o as usize, d.iter().copied());
        }
        Op::Write(o, d) => {
            let o = *o as usize;
            if m.len() < o + d.len() {
                m.resize(o + d.len(), 0);
            }
            m[o..o + d.len()].copy_from_slice(d);
        }
        Op::Collapse(o, n) => {
            m.drain(*o as usize..(*o + *n) as usize);
        }
        Op::Update(o, d, n) => {
            m.splice(*o as usize..(*o + *n) as usize, d.iter().copied());
        }
        Op::Replace(o, d, _) => {
            m[*o as usize..*o as usize + d.len()].copy_from_slice(d);
        }
        Op::Truncate(n) => m.resize(*n as usize, 0),
        Op::Tag(..) | Op::Defrag(..) | Op::Sync | Op::Checkpoint => {}
    }
}

/// The whole content of a space.
pub fn content(space: &FlexSpace) -> Vec<u8> {
    let mut buf = vec![0u8; space.len() as usize];
    let n = space.read(0, &mut buf).expect("read");
    assert_eq!(n, buf.len());
    buf
}
