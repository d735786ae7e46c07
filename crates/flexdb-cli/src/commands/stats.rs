//! `stats`: the store's counters as a table or one JSON object.
//!
//! Invariants: the JSON object has one member per field of
//! [`flexdb::Stats`], under the same name (`max_reader_wait` in
//! microseconds as `max_reader_wait_us`); the table has the same names and
//! order, one per line, with byte counts also shown in decimal units.

use flexdb::Stats;
use serde_json::{json, Value};

use crate::progress::human_bytes;

/// The counters as (name, number, is a byte count), in display order.
/// The destructuring names every field, so a new field of `Stats` fails
/// the build here until it is shown.
fn rows(s: &Stats) -> Vec<(&'static str, Value, bool)> {
    let Stats {
        pairs,
        space_bytes,
        memtable_bytes,
        committer_backlog,
        backlog_bytes,
        intervals,
        sparse_index_bytes,
        extent_index_bytes,
        space_amplification,
        extents,
        cache_capacity,
        cache_bytes,
        cache_hit_ratio,
        cache_hits,
        cache_lookups,
        row_cache_bytes,
        row_cache_hits,
        row_cache_lookups,
        wal_bytes_written,
        data_bytes_written,
        tree_bytes_written,
        log_bytes_written,
        gc_relocated_bytes,
        defragmented_intervals,
        range_deletes_committed,
        range_intervals_dropped,
        commits,
        memtables_committed,
        logs_reused,
        logs_prepared,
        memtable_pool_bytes,
        memtable_pool_lazy_bytes,
        max_reader_wait,
        snapshots_live,
        snapshot_oldest_age,
        snapshot_held_bytes,
        snapshot_held_versions,
        space_held_bytes,
        disk_live_bytes,
        disk_garbage_bytes,
        disk_garbage_free_bytes,
        disk_wal_bytes,
        disk_checkpoint_bytes,
        disk_log_bytes,
        disk_other_bytes,
        disk_total_bytes,
    } = s;
    let wait_us = u64::try_from(max_reader_wait.as_micros()).unwrap_or(u64::MAX);
    let age_us = u64::try_from(snapshot_oldest_age.as_micros()).unwrap_or(u64::MAX);
    vec![
        ("pairs", json!(pairs), false),
        ("space_bytes", json!(space_bytes), true),
        ("memtable_bytes", json!(memtable_bytes), true),
        ("committer_backlog", json!(committer_backlog), false),
        ("backlog_bytes", json!(backlog_bytes), true),
        ("intervals", json!(intervals), false),
        ("sparse_index_bytes", json!(sparse_index_bytes), true),
        ("extent_index_bytes", json!(extent_index_bytes), true),
        ("space_amplification", json!(space_amplification), false),
        ("extents", json!(extents), false),
        ("cache_capacity", json!(cache_capacity), true),
        ("cache_bytes", json!(cache_bytes), true),
        ("cache_hit_ratio", json!(cache_hit_ratio), false),
        ("cache_hits", json!(cache_hits), false),
        ("cache_lookups", json!(cache_lookups), false),
        ("row_cache_bytes", json!(row_cache_bytes), true),
        ("row_cache_hits", json!(row_cache_hits), false),
        ("row_cache_lookups", json!(row_cache_lookups), false),
        ("wal_bytes_written", json!(wal_bytes_written), true),
        ("data_bytes_written", json!(data_bytes_written), true),
        ("tree_bytes_written", json!(tree_bytes_written), true),
        ("log_bytes_written", json!(log_bytes_written), true),
        ("gc_relocated_bytes", json!(gc_relocated_bytes), true),
        (
            "defragmented_intervals",
            json!(defragmented_intervals),
            false,
        ),
        (
            "range_deletes_committed",
            json!(range_deletes_committed),
            false,
        ),
        (
            "range_intervals_dropped",
            json!(range_intervals_dropped),
            false,
        ),
        ("commits", json!(commits), false),
        ("memtables_committed", json!(memtables_committed), false),
        ("logs_reused", json!(logs_reused), false),
        ("logs_prepared", json!(logs_prepared), false),
        ("memtable_pool_bytes", json!(memtable_pool_bytes), true),
        (
            "memtable_pool_lazy_bytes",
            json!(memtable_pool_lazy_bytes),
            true,
        ),
        ("max_reader_wait_us", json!(wait_us), false),
        ("snapshots_live", json!(snapshots_live), false),
        ("snapshot_oldest_age_us", json!(age_us), false),
        ("snapshot_held_bytes", json!(snapshot_held_bytes), true),
        (
            "snapshot_held_versions",
            json!(snapshot_held_versions),
            false,
        ),
        ("space_held_bytes", json!(space_held_bytes), true),
        ("disk_live_bytes", json!(disk_live_bytes), true),
        ("disk_garbage_bytes", json!(disk_garbage_bytes), true),
        (
            "disk_garbage_free_bytes",
            json!(disk_garbage_free_bytes),
            true,
        ),
        ("disk_wal_bytes", json!(disk_wal_bytes), true),
        ("disk_checkpoint_bytes", json!(disk_checkpoint_bytes), true),
        ("disk_log_bytes", json!(disk_log_bytes), true),
        ("disk_other_bytes", json!(disk_other_bytes), true),
        ("disk_total_bytes", json!(disk_total_bytes), true),
    ]
}

/// One JSON object.
pub fn to_json(s: &Stats) -> Value {
    Value::Object(
        rows(s)
            .into_iter()
            .map(|(k, v, _)| (k.to_string(), v))
            .collect(),
    )
}

/// A table, one `name  value` line per counter.
pub fn table(s: &Stats) -> String {
    let rows = rows(s);
    let width = rows.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, value, bytes) in rows {
        let shown = match (&value, bytes) {
            (Value::Number(n), true) => match n.as_u64() {
                Some(b) if b >= 1000 => format!("{b} ({})", human_bytes(b)),
                _ => n.to_string(),
            },
            (Value::Number(n), false) if n.is_f64() => {
                format!("{:.3}", n.as_f64().unwrap_or(0.0))
            }
            (v, _) => v.to_string(),
        };
        out.push_str(&format!("{name:<width$}  {shown}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample() -> Stats {
        Stats {
            pairs: 3,
            space_bytes: 123_456,
            cache_hit_ratio: 0.5,
            max_reader_wait: Duration::from_micros(1500),
            ..Stats::default()
        }
    }

    #[test]
    fn json_has_every_field() {
        let v = to_json(&sample());
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 46);
        assert_eq!(v["pairs"], 3);
        assert_eq!(v["space_bytes"], 123_456);
        assert_eq!(v["cache_hit_ratio"], 0.5);
        assert_eq!(v["max_reader_wait_us"], 1500);
    }

    #[test]
    fn table_lines() {
        let t = table(&sample());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 46);
        assert_eq!(lines[0], "pairs                     3");
        assert_eq!(lines[1], "space_bytes               123456 (123.5 kB)");
        assert!(t.contains("cache_hit_ratio           0.500\n"));
        assert!(t.contains("max_reader_wait_us        1500\n"));
    }
}
