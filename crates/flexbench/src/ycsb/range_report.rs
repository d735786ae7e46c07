//! What `flexbench range-delete` measures, as JSON lines and a table.
//!
//! Invariants: one record per engine and range size, with `kind`
//! "range_delete"; a figure an engine does not have is `null`, never 0
//! (`commit_ms` of the peers, which have no step to wait for); each
//! record says in `commit` what its `commit_ms` and `done_ms` time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::report::Latency;

/// The timed gets after one range delete.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct GetFigures {
    /// Seconds of the phase.
    pub seconds: f64,
    /// Gets done.
    pub ops: u64,
    /// Millions of gets per second.
    pub mops: f64,
    /// Latency of a get.
    pub latency: Latency,
    /// Gets that found nothing.
    pub misses: u64,
    /// Gets of deleted keys: the misses there should be.
    pub expected_misses: u64,
    /// Gets whose result was not what the deletes left (a deleted key
    /// found, a kept key missing); 0 unless `check` says otherwise.
    pub wrong: u64,
}

/// The timed scans after one range delete.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ScanFigures {
    /// Seconds of the phase.
    pub seconds: f64,
    /// Scans done.
    pub ops: u64,
    /// Millions of scans per second.
    pub mops: f64,
    /// Latency of a scan.
    pub latency: Latency,
    /// Pairs a scan reads (`--scan-len`).
    pub scan_len: usize,
    /// Pairs the scans returned.
    pub pairs: u64,
    /// Pairs the scans should have returned.
    pub expected_pairs: u64,
    /// Scans that started inside a deleted range.
    pub starts_in_deleted: u64,
    /// Scans that returned the wrong number of pairs.
    pub wrong: u64,
}

/// One range delete on one engine and the reads right after it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RangeDeleteResult {
    /// Always "range_delete".
    pub kind: String,
    /// The engine.
    pub engine: String,
    /// The dataset (zippydb, udb, sys).
    pub dataset: String,
    /// Pairs loaded (`--records`), once per engine.
    pub records: u64,
    /// Seconds the load took (its flush not included).
    pub load_seconds: f64,
    /// Client threads of the reads.
    pub threads: usize,
    /// The share of reads aimed at the range just deleted
    /// (`--deleted-share`; the others are uniform over every loaded key).
    pub deleted_share: f64,
    /// Adjacent pairs this range delete removed (a size of `--sizes`).
    pub size: u64,
    /// The first key of the range (deleted).
    pub first_key: String,
    /// The key just past the range (kept; the exclusive end).
    pub end_key: String,
    /// The index of the first key in key order.
    pub first_index: u64,
    /// Pairs deleted by this and the earlier sizes (the store's deleted
    /// ranges when the reads ran).
    pub deleted_total: u64,
    /// The pairs the engine says the call removed (LMDB counts them; null
    /// for the others).
    pub engine_deleted: Option<u64>,
    /// Wall time of the `delete_range` call, in milliseconds.
    pub call_ms: f64,
    /// Wall time of the commit step right after the call, in
    /// milliseconds: flexdb's `flush`, which returns once the committer
    /// took the range out of the space; null for engines with no such
    /// step (`commit` says why).
    pub commit_ms: Option<f64>,
    /// Until the delete is done as far as the engine goes: `call_ms` plus
    /// `commit_ms` (the figure to compare between engines).
    pub done_ms: f64,
    /// What the commit step is on this engine.
    pub commit: String,
    /// Bytes the store takes on disk (du) before the call.
    pub disk_bytes_before: u64,
    /// ... right after the call.
    pub disk_bytes_after_call: u64,
    /// ... after the commit step and a `syncfs`.
    pub disk_bytes_after_commit: u64,
    /// ... after the reads.
    pub disk_bytes_after_reads: u64,
    /// The store's disk bytes by what they hold after the commit step, as
    /// the engine counts them (flexdb); null for the others.
    pub disk_parts_after_commit: Option<BTreeMap<String, u64>>,
    /// The gets right after.
    pub get: GetFigures,
    /// The scans after the gets.
    pub scan: ScanFigures,
    /// Null when every result was right (the engine's count, the sampled
    /// keys at and around the range, every timed get and scan); else how
    /// many were wrong and the first (the run then exits with status 1).
    pub check: Option<String>,
}

/// The records as JSON lines.
pub fn json_lines(records: &[RangeDeleteResult]) -> String {
    let mut s = String::new();
    for r in records {
        s += &serde_json::to_string(r).unwrap_or_default();
        s.push('\n');
    }
    s
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// The records as a human table, with what each figure is.
pub fn table(records: &[RangeDeleteResult]) -> String {
    let mut s = String::new();
    if let Some(f) = records.first() {
        s += &format!(
            "# range-delete: dataset {}, {} records, reads with {} thread(s) for {:.1} s each, \
             {:.0}% of them in the range just deleted\n",
            f.dataset,
            f.records,
            f.threads,
            f.get.seconds,
            f.deleted_share * 100.0
        );
    }
    s += "# call: the delete_range call; commit: flexdb's flush right after (until the range \
          is out of the space), n/a where the engine has no such step; done: call + commit\n";
    s += &format!(
        "{:<8} {:>9} {:>10} {:>10} {:>10} {:>10} {:>19} {:>10} {:>21} {:>9} {:>9} {:>9}  {}\n",
        "engine",
        "size",
        "call ms",
        "commit ms",
        "done ms",
        "get Mops",
        "misses/expected",
        "scan Mops",
        "pairs/expected",
        "MiB pre",
        "MiB call",
        "MiB cmt",
        "check"
    );
    for r in records {
        s += &format!(
            "{:<8} {:>9} {:>10.3} {:>10} {:>10.3} {:>10.4} {:>19} {:>10.4} {:>21} {:>9.1} {:>9.1} {:>9.1}  {}\n",
            r.engine,
            r.size,
            r.call_ms,
            r.commit_ms
                .map_or_else(|| "n/a".into(), |v| format!("{v:.3}")),
            r.done_ms,
            r.get.mops,
            format!("{}/{}", r.get.misses, r.get.expected_misses),
            r.scan.mops,
            format!("{}/{}", r.scan.pairs, r.scan.expected_pairs),
            mib(r.disk_bytes_before),
            mib(r.disk_bytes_after_call),
            mib(r.disk_bytes_after_commit),
            r.check.as_deref().unwrap_or("ok"),
        );
    }
    let notes: Vec<String> = {
        let mut seen = Vec::new();
        for r in records {
            let line = format!("# {}: commit = {}", r.engine, r.commit);
            if !seen.contains(&line) {
                seen.push(line);
            }
        }
        seen
    };
    for n in notes {
        s += &n;
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_peers_have_no_commit_figure() {
        let r = RangeDeleteResult {
            kind: "range_delete".into(),
            engine: "rocksdb".into(),
            size: 1000,
            call_ms: 0.05,
            done_ms: 0.05,
            commit: "none".into(),
            ..Default::default()
        };
        let text = json_lines(std::slice::from_ref(&r));
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["kind"], "range_delete");
        assert!(v["commit_ms"].is_null());
        assert!(v["check"].is_null());
        assert!(v["get"]["latency"]["p99_us"].is_number());
        let back: RangeDeleteResult = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(back, r);
        let t = table(&[r]);
        assert!(t.contains("n/a") && t.contains("ok"), "{t}");
        assert!(t.contains("# rocksdb: commit = none"), "{t}");
    }
}
