//! The workloads: YCSB's core workloads A to F (Table 5 of the FlexSpace
//! paper), the load phase, a 100%-put workload and two transaction
//! workloads (a transfer between two keys, under snapshot isolation or
//! serializable).
//!
//! Invariants: the proportions of a mix add up to exactly 2^32 parts, so
//! [`Mix::pick`] always returns an operation; workload D reads with the
//! "latest" distribution whatever `--dist` says (as YCSB's workload D).

use super::keygen::FastRng;
use super::zipf::Dist;

/// A workload of `flexbench ycsb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// Insert the N records (key order by `--dist`: `seq` in key order,
    /// any other in a random permutation).
    Load,
    /// 50% read, 50% update.
    A,
    /// 95% read, 5% update.
    B,
    /// 100% read.
    C,
    /// 95% read, 5% insert; reads follow "latest".
    D,
    /// 95% scan (seek + `--scan-len` pairs), 5% insert.
    E,
    /// 50% read, 50% read-modify-write.
    F,
    /// 100% put (overwrites of existing keys by `--dist`).
    Put,
    /// 100% transfers under snapshot isolation: a transaction reads two
    /// keys drawn by `--dist` and writes both.
    T,
    /// The transfers of `T`, serializable.
    Ts,
    /// No operations: the store is left alone for `--idle-seconds`, then
    /// measured (what an idle store gives back on its own).
    Idle,
    /// One call of the engine's full compaction (flexdb: `Db::compact`),
    /// timed, then measured.
    Compact,
}

/// Phases that run no operation mix, which `--workloads` also accepts.
pub const MAINTENANCE: [Workload; 2] = [Workload::Idle, Workload::Compact];

/// The workloads `--workloads` accepts, in their canonical order.
pub const ALL: [Workload; 10] = [
    Workload::Load,
    Workload::A,
    Workload::B,
    Workload::C,
    Workload::D,
    Workload::E,
    Workload::F,
    Workload::Put,
    Workload::T,
    Workload::Ts,
];

impl Workload {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Load => "load",
            Workload::A => "a",
            Workload::B => "b",
            Workload::C => "c",
            Workload::D => "d",
            Workload::E => "e",
            Workload::F => "f",
            Workload::Put => "put",
            Workload::T => "t",
            Workload::Ts => "ts",
            Workload::Idle => "idle",
            Workload::Compact => "compact",
        }
    }

    /// Parses a name (`w` is an alias of `put`).
    pub fn parse(s: &str) -> Result<Workload, String> {
        let s = s.trim().to_ascii_lowercase();
        if s == "w" {
            return Ok(Workload::Put);
        }
        let known = || ALL.iter().chain(&MAINTENANCE).copied();
        known().find(|w| w.name() == s).ok_or_else(|| {
            let names: Vec<_> = known().map(|w| w.name()).collect();
            format!(
                "unknown workload '{s}' (expected one of {}, or w for put)",
                names.join(", ")
            )
        })
    }

    /// The operation mix (`Load` is all inserts; the maintenance phases,
    /// which run no operation, have an empty one that is never drawn from).
    pub fn mix(self) -> Mix {
        use OpKind::*;
        Mix::new(match self {
            Workload::Idle | Workload::Compact => &[],
            Workload::Load => &[(Insert, 100)],
            Workload::A => &[(Read, 50), (Update, 50)],
            Workload::B => &[(Read, 95), (Update, 5)],
            Workload::C => &[(Read, 100)],
            Workload::D => &[(Read, 95), (Insert, 5)],
            Workload::E => &[(Scan, 95), (Insert, 5)],
            Workload::F => &[(Read, 50), (Rmw, 50)],
            Workload::Put => &[(Put, 100)],
            Workload::T | Workload::Ts => &[(Transfer, 100)],
        })
    }

    /// The request distribution given `--dist`.
    pub fn request_dist(self, dist: Dist) -> Dist {
        match self {
            Workload::D => Dist::Latest,
            _ => dist,
        }
    }

    /// Whether the workload's transactions are serializable (only the
    /// transaction workloads run any).
    pub fn serializable(self) -> bool {
        self == Workload::Ts
    }

    /// Whether the workload writes.
    pub fn writes(self) -> bool {
        !matches!(self, Workload::C | Workload::Idle | Workload::Compact)
    }
}

/// One kind of operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// Point read of an existing key.
    Read,
    /// Overwrite of an existing key.
    Update,
    /// Insert of a new key.
    Insert,
    /// Seek and read the following pairs.
    Scan,
    /// Read a key, then write it.
    Rmw,
    /// Overwrite of an existing key (the `put` workload).
    Put,
    /// A transaction that reads two existing keys and writes both.
    Transfer,
}

/// Every operation kind.
pub const OP_KINDS: [OpKind; 7] = [
    OpKind::Read,
    OpKind::Update,
    OpKind::Insert,
    OpKind::Scan,
    OpKind::Rmw,
    OpKind::Put,
    OpKind::Transfer,
];

impl OpKind {
    /// The report name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Scan => "scan",
            OpKind::Rmw => "rmw",
            OpKind::Put => "put",
            OpKind::Transfer => "transfer",
        }
    }

    /// Index into per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Operation proportions.
#[derive(Clone, Debug)]
pub struct Mix {
    /// (kind, cumulative upper bound out of 2^32).
    bounds: Vec<(OpKind, u64)>,
}

impl Mix {
    /// A mix from (kind, percent) pairs that add up to 100.
    fn new(parts: &[(OpKind, u64)]) -> Mix {
        let total: u64 = parts.iter().map(|p| p.1).sum();
        let mut acc = 0;
        let mut bounds = Vec::new();
        for &(k, p) in parts {
            acc += p;
            bounds.push((k, (acc << 32) / total));
        }
        Mix { bounds }
    }

    /// The share of `kind` in the mix, in [0, 1].
    #[cfg(test)]
    pub fn share(&self, kind: OpKind) -> f64 {
        let mut prev = 0;
        for &(k, b) in &self.bounds {
            if k == kind {
                return (b - prev) as f64 / (1u64 << 32) as f64;
            }
            prev = b;
        }
        0.0
    }

    /// The next operation.
    #[inline]
    pub fn pick(&self, rng: &mut FastRng) -> OpKind {
        let x = rng.next_u64() >> 32;
        for &(k, b) in &self.bounds {
            if x < b {
                return k;
            }
        }
        // Unreachable: the last bound is 2^32 > x.
        self.bounds[self.bounds.len() - 1].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for w in ALL.into_iter().chain(MAINTENANCE) {
            assert_eq!(Workload::parse(w.name()), Ok(w));
        }
        assert_eq!(Workload::parse("W"), Ok(Workload::Put));
        assert_eq!(Workload::parse(" A "), Ok(Workload::A));
        assert!(Workload::parse("g").is_err());
    }

    #[test]
    fn mixes_match_table_5() {
        let expect: [(Workload, &[(OpKind, f64)]); 10] = [
            (Workload::Load, &[(OpKind::Insert, 1.0)]),
            (Workload::A, &[(OpKind::Read, 0.5), (OpKind::Update, 0.5)]),
            (Workload::B, &[(OpKind::Read, 0.95), (OpKind::Update, 0.05)]),
            (Workload::C, &[(OpKind::Read, 1.0)]),
            (Workload::D, &[(OpKind::Read, 0.95), (OpKind::Insert, 0.05)]),
            (Workload::E, &[(OpKind::Scan, 0.95), (OpKind::Insert, 0.05)]),
            (Workload::F, &[(OpKind::Read, 0.5), (OpKind::Rmw, 0.5)]),
            (Workload::Put, &[(OpKind::Put, 1.0)]),
            (Workload::T, &[(OpKind::Transfer, 1.0)]),
            (Workload::Ts, &[(OpKind::Transfer, 1.0)]),
        ];
        for (w, parts) in expect {
            let mix = w.mix();
            let mut rng = FastRng::new(w as u64);
            let draws = 200_000;
            let mut counts = [0u64; OP_KINDS.len()];
            for _ in 0..draws {
                counts[mix.pick(&mut rng).index()] += 1;
            }
            for k in OP_KINDS {
                let want = parts.iter().find(|p| p.0 == k).map_or(0.0, |p| p.1);
                assert!((mix.share(k) - want).abs() < 1e-9, "{w:?} {k:?}");
                let got = counts[k.index()] as f64 / draws as f64;
                assert!((got - want).abs() < 0.005, "{w:?} {k:?}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn d_reads_the_latest() {
        assert_eq!(Workload::D.request_dist(Dist::Zipf), Dist::Latest);
        assert_eq!(Workload::A.request_dist(Dist::Uniform), Dist::Uniform);
        assert!(!Workload::C.writes());
        assert!(Workload::E.writes());
        assert!(Workload::Ts.serializable() && !Workload::T.serializable());
    }
}
