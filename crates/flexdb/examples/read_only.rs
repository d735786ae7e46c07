//! Read-only opens: a store read by read-only handles while a writer
//! writes, and what they cost. Prints the open times of a writable and a
//! read-only open of a closed store of N pairs, of a read-only open beside
//! a live writer (its logs replayed, the sparse index sampled), and the
//! writer's overwrite throughput with 0 and with 2 read-only handles that
//! catch up every 100 ms (their states pin data segments). Phases of
//! 5 s from 100,000 pairs on, else 1 s.
//!
//! Run with `cargo run --release -p flexdb --example read_only -- N MIB`
//! (default 20,000 pairs and the writer's MemTables of 64 MiB; the record
//! in docs/experiments/2026-12-06-read-only-open.md used 1,000,000 and
//! 64 and 512).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flexdb::{Db, Options, WriteBatch};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(b"user0000");
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn writer_opts(memtable_mib: usize) -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(memtable_mib << 20)
}

/// Overwrites random keys of `n` for `run`; returns the puts a second.
fn overwrite(db: &Db, n: u64, run: Duration, seed: &mut u64) -> flexdb::Result<f64> {
    let t0 = Instant::now();
    let mut puts = 0u64;
    let value = [7u8; 100];
    while t0.elapsed() < run {
        for _ in 0..1000 {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            db.put(key((*seed >> 33) % n), value)?;
        }
        puts += 1000;
    }
    Ok(puts as f64 / t0.elapsed().as_secs_f64())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args().nth(1).map_or(Ok(20_000), |a| a.parse())?;
    let memtable_mib: usize = std::env::args().nth(2).map_or(Ok(64), |a| a.parse())?;
    let writer_opts = || writer_opts(memtable_mib);
    // Phases of 5 s (2 s of warm-up) for a real measurement, 1 s for the
    // default run (CI runs every example).
    let phase = Duration::from_secs(if n >= 100_000 { 5 } else { 1 });
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store");
    {
        let db = Db::open(&path, writer_opts())?;
        let mut b = WriteBatch::new();
        for i in 0..n {
            b.put(&key(i), &[1u8; 100])?;
            if b.len() == 1000 {
                db.write(std::mem::take(&mut b))?;
            }
        }
        db.write(b)?;
        db.close()?;
    }
    println!("store: {n} pairs of 16 + 100 bytes, closed cleanly; MemTables of {memtable_mib} MiB");
    for _ in 0..3 {
        let t = Instant::now();
        let db = Db::open(&path, Options::new())?;
        let opened = t.elapsed();
        db.close()?;
        let t = Instant::now();
        let ro = Db::open(&path, Options::new().read_only(true))?;
        let ro_opened = t.elapsed();
        assert_eq!(ro.get(key(n / 2))?.as_deref(), Some(&[1u8; 100][..]));
        drop(ro);
        println!(
            "open of the closed store: writable {:.1} ms, read-only {:.1} ms",
            ms(opened),
            ms(ro_opened)
        );
    }
    let w = Db::open(&path, writer_opts())?;
    let mut seed = 42;
    // Writes left in the logs and the space committed since the close:
    // a reader replays the logs and samples the sparse index.
    overwrite(&w, n, phase * 2 / 5, &mut seed)?;
    for _ in 0..3 {
        let t = Instant::now();
        let ro = Db::open(&path, Options::new().read_only(true))?;
        println!(
            "read-only open beside the live writer: {:.1} ms ({} bytes in MemTables)",
            ms(t.elapsed()),
            ro.stats().memtable_bytes + ro.stats().backlog_bytes
        );
    }
    let data = || std::fs::metadata(path.join("data")).map(|m| m.len());
    let before = data()?;
    let alone = overwrite(&w, n, phase, &mut seed)?;
    w.flush()?;
    println!(
        "writer alone: {alone:.0} puts/s; data file {} -> {} MiB",
        before >> 20,
        data()? >> 20
    );
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || -> flexdb::Result<u64> {
                let db = Db::open(&path, Options::new().read_only(true))?;
                let mut catch_ups = 0;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    db.catch_up()?;
                    db.get(key(1))?;
                    catch_ups += 1;
                }
                Ok(catch_ups)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let before = data()?;
    let with = overwrite(&w, n, phase, &mut seed)?;
    stop.store(true, Ordering::Relaxed);
    let mut catch_ups = 0;
    for r in readers {
        catch_ups += r.join().map_err(|_| "reader panicked")??;
    }
    w.flush()?;
    println!(
        "writer with 2 read-only handles ({catch_ups} catch-ups): {with:.0} puts/s; \
         data file {} -> {} MiB, {} segments waiting at the end",
        before >> 20,
        data()? >> 20,
        w.stats().space_held_bytes / (4 << 20)
    );
    w.close()?;
    Ok(())
}
