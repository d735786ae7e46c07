//! `DB.stats()` as a Python dict.
//!
//! Invariant: the dict has one entry per public field of the engine's
//! `flexdb::Stats`, under the field's name, with durations in seconds
//! (float); a field the engine adds shows up here once it is listed.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The statistics `s` as a dict.
pub fn to_dict<'py>(py: Python<'py>, s: &flexdb::Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("pairs", s.pairs)?;
    d.set_item("space_bytes", s.space_bytes)?;
    d.set_item("memtable_bytes", s.memtable_bytes)?;
    d.set_item("committer_backlog", s.committer_backlog)?;
    d.set_item("backlog_bytes", s.backlog_bytes)?;
    d.set_item("intervals", s.intervals)?;
    d.set_item("sparse_index_bytes", s.sparse_index_bytes)?;
    d.set_item("extent_index_bytes", s.extent_index_bytes)?;
    d.set_item("space_amplification", s.space_amplification)?;
    d.set_item("extents", s.extents)?;
    d.set_item("cache_capacity", s.cache_capacity)?;
    d.set_item("cache_bytes", s.cache_bytes)?;
    d.set_item("cache_hit_ratio", s.cache_hit_ratio)?;
    d.set_item("cache_hits", s.cache_hits)?;
    d.set_item("cache_lookups", s.cache_lookups)?;
    d.set_item("row_cache_bytes", s.row_cache_bytes)?;
    d.set_item("row_cache_hits", s.row_cache_hits)?;
    d.set_item("row_cache_lookups", s.row_cache_lookups)?;
    d.set_item("wal_bytes_written", s.wal_bytes_written)?;
    d.set_item("data_bytes_written", s.data_bytes_written)?;
    d.set_item("tree_bytes_written", s.tree_bytes_written)?;
    d.set_item("log_bytes_written", s.log_bytes_written)?;
    d.set_item("gc_relocated_bytes", s.gc_relocated_bytes)?;
    d.set_item("defragmented_intervals", s.defragmented_intervals)?;
    d.set_item("range_deletes_committed", s.range_deletes_committed)?;
    d.set_item("range_intervals_dropped", s.range_intervals_dropped)?;
    d.set_item("commits", s.commits)?;
    d.set_item("memtables_committed", s.memtables_committed)?;
    d.set_item("logs_reused", s.logs_reused)?;
    d.set_item("logs_prepared", s.logs_prepared)?;
    d.set_item("memtable_pool_bytes", s.memtable_pool_bytes)?;
    d.set_item("memtable_pool_lazy_bytes", s.memtable_pool_lazy_bytes)?;
    d.set_item("max_reader_wait", s.max_reader_wait.as_secs_f64())?;
    d.set_item("snapshots_live", s.snapshots_live)?;
    d.set_item("snapshot_oldest_age", s.snapshot_oldest_age.as_secs_f64())?;
    d.set_item("snapshot_held_bytes", s.snapshot_held_bytes)?;
    d.set_item("snapshot_held_versions", s.snapshot_held_versions)?;
    d.set_item("space_held_bytes", s.space_held_bytes)?;
    d.set_item("disk_live_bytes", s.disk_live_bytes)?;
    d.set_item("disk_garbage_bytes", s.disk_garbage_bytes)?;
    d.set_item("disk_garbage_free_bytes", s.disk_garbage_free_bytes)?;
    d.set_item("disk_wal_bytes", s.disk_wal_bytes)?;
    d.set_item("disk_checkpoint_bytes", s.disk_checkpoint_bytes)?;
    d.set_item("disk_log_bytes", s.disk_log_bytes)?;
    d.set_item("disk_other_bytes", s.disk_other_bytes)?;
    d.set_item("disk_total_bytes", s.disk_total_bytes)?;
    Ok(d)
}
