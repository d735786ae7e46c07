//! Replaying the logs a crash left: each log holds one generation's writes
//! and is read on its own, so several are replayed at once, each into a
//! MemTable of its own, and synced meanwhile by a helper thread (what a
//! crashed process wrote may still sit in the page cache only). Whether a
//! log's writes are taken depends on the log before it (its chain record,
//! `wal::record3`): the caller judges that from what each replay reports.
//!
//! Invariants: the results come back in the order of the logs given,
//! whatever order the threads finish in, so the caller takes them oldest
//! first as a sequential replay would; a log is served only once it is
//! synced; a log whose replay failed (or whose thread panicked) gives an
//! error, never a partial MemTable passed off as whole.

use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use flexspace::{Storage, StorageFile};

use crate::batch::{OpRef, WriteBatch};
use crate::error::{io_err, Error, Result};
use crate::wal::{Replayed, Wal};
use crate::write::memtable::MemTable;

/// One replayed log: its MemTable, its file, the sequence number after its
/// last write (0 when it holds none), what replay found (where its
/// records end, its chain record), and, when a salvaging replay kept the
/// records before damage, what the damage was.
pub(super) type ReplayedLog = (
    Arc<MemTable>,
    Arc<dyn StorageFile>,
    u64,
    Replayed,
    Option<String>,
);

/// Replays `logs` (generation and file name), several at a time, and
/// returns what each gave, in the order of `logs`. Every log is also synced
/// (what a crashed process wrote may still sit in the page cache only) by
/// one more thread while the others replay.
pub(super) fn replay_logs(
    storage: &Arc<dyn Storage>,
    logs: &[(u64, String)],
    salvage: bool,
) -> Vec<Result<ReplayedLog>> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8)
        .min(logs.len());
    let next = AtomicUsize::new(0);
    let mut out: Vec<Option<Result<ReplayedLog>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, AtomicOrdering::Relaxed);
                        let Some((_, name)) = logs.get(i) else {
                            return done;
                        };
                        done.push((i, replay_log(storage, name, salvage)));
                    }
                })
            })
            .collect();
        let mut out: Vec<Option<Result<ReplayedLog>>> = (0..logs.len()).map(|_| None).collect();
        for h in handles {
            for (i, r) in h.join().unwrap_or_default() {
                out[i] = Some(r);
            }
        }
        out
    });
    out.iter_mut()
        .map(|r| {
            // A log whose replay thread panicked has no result.
            r.take().unwrap_or_else(|| {
                Err(Error::Corrupt {
                    file: "wal".into(),
                    detail: "a log replay thread failed".into(),
                })
            })
        })
        .collect()
}

/// Syncs and replays one log into a new MemTable; the sync runs on its own
/// thread meanwhile (both only read the file's content, which nothing
/// writes during recovery). With `salvage`, damage keeps the records
/// before it instead of failing.
fn replay_log(storage: &Arc<dyn Storage>, name: &str, salvage: bool) -> Result<ReplayedLog> {
    let file = storage.open_file(name, false).map_err(io_err(name))?;
    let mem = Arc::new(MemTable::new());
    let mut next_seq = 0;
    let t0 = std::time::Instant::now();
    let (synced, replayed) = std::thread::scope(|s| {
        // What a crashed process wrote may still sit in the page cache
        // only: it is made durable before it is served.
        let sync = s.spawn(|| file.sync());
        let replayed = Wal::replay(file.as_ref(), name, |seq, payload| {
            let mut i = 0;
            let n = WriteBatch::for_each_op(payload, |op| {
                let s = seq + i;
                match op {
                    OpRef::Put { key, value } => mem.insert(key, s, Some(value)),
                    OpRef::PutExpiring {
                        key,
                        value,
                        expires,
                    } => mem.insert_expiring(key, s, value, expires),
                    // (Logs never hold one: a write resolves it first.)
                    OpRef::PutWithTtl { key, value, .. } => mem.insert(key, s, Some(value)),
                    OpRef::Delete { key } => mem.insert(key, s, None),
                    OpRef::DeleteRange { start, end } => mem.delete_range(start, end, s),
                }
                i += 1;
            })
            .ok_or_else(|| Error::Corrupt {
                file: name.into(),
                detail: format!("record {seq} is not a valid write batch"),
            })?;
            next_seq = next_seq.max(seq + n as u64);
            Ok(())
        });
        let t_replay = t0.elapsed();
        let synced = sync
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the sync thread failed")));
        tracing::debug!(
            target: super::TRACE_TARGET,
            log = name,
            records = replayed.as_ref().map_or(0, |r| r.records),
            replay = ?t_replay,
            synced_after = ?t0.elapsed(),
            "log replayed"
        );
        (synced, replayed)
    });
    synced.map_err(io_err(name))?;
    match replayed {
        Ok(replayed) => Ok((mem, file, next_seq, replayed, None)),
        Err(Error::Corrupt { detail, .. }) if salvage => {
            let found = Replayed {
                end: file.len().map_err(io_err(name))?,
                ..Replayed::default()
            };
            Ok((mem, file, next_seq, found, Some(detail)))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Newest = BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)>;

    fn newest(mem: &MemTable) -> Newest {
        mem.newest()
            .map(|e| (e.key.to_vec(), (e.seq, e.value.map(<[u8]>::to_vec))))
            .collect()
    }

    #[test]
    fn parallel_replay_gives_what_sequential_replay_gives() {
        let storage: Arc<dyn Storage> = Arc::new(flexspace::FaultStorage::new());
        let mut logs = Vec::new();
        let mut models = Vec::new();
        let mut seq = 1;
        for gen in 1..=6u64 {
            let name = crate::wal::log_files::wal_name(gen);
            let file = storage.open_file(&name, true).unwrap();
            let wal = Wal::create(file.clone(), &name, None, 0, 0).unwrap();
            let mut model = Newest::new();
            // Log 4 stays empty; log 5 is not a log at all.
            let batches = if gen == 4 { 0 } else { 150 * gen };
            for i in 0..batches {
                let mut b = WriteBatch::new();
                for j in 0..1 + i % 4 {
                    let key = format!("k{:03}", (i * 7 + j * 13 + gen) % 300).into_bytes();
                    let s = seq + b.len() as u64;
                    if (i + j) % 5 == 2 {
                        b.delete(&key).unwrap();
                        model.insert(key, (s, None));
                    } else {
                        let value = vec![(i + j) as u8; (i % 40) as usize];
                        b.put(&key, &value).unwrap();
                        model.insert(key, (s, Some(value)));
                    }
                }
                wal.append(seq, &b.encode()).unwrap();
                seq += b.len() as u64;
            }
            wal.sync().unwrap();
            if gen == 5 {
                file.write_all_at(0, b"NOTALOG!").unwrap();
            }
            models.push((model, seq));
            logs.push((gen, name));
        }
        let parallel = replay_logs(&storage, &logs, false);
        assert_eq!(parallel.len(), logs.len());
        for (((gen, name), got), (model, next)) in logs.iter().zip(parallel).zip(models) {
            let sequential = replay_log(&storage, name, false);
            if *gen == 5 {
                assert!(matches!(got, Err(Error::Corrupt { .. })));
                assert!(matches!(sequential, Err(Error::Corrupt { .. })));
                continue;
            }
            let (pm, _, pn, pr, _) = got.unwrap();
            let (sm, _, sn, sr, _) = sequential.unwrap();
            assert_eq!(pr, sr);
            assert_eq!(newest(&pm), model, "log {gen}");
            assert_eq!(newest(&sm), model, "log {gen}");
            assert_eq!(pm.len(), sm.len());
            assert_eq!((pn, sn), if *gen == 4 { (0, 0) } else { (next, next) });
        }
    }
}
