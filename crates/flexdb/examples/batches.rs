//! Atomic batches and durable writes: a `WriteBatch` applies all of its
//! operations or none (also across a crash), and `WriteOptions { sync:
//! true }` returns only once the write is on disk.
//!
//! Run with `cargo run -p flexdb --example batches`.

use flexdb::{Db, Options, WriteBatch, WriteOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::new().create_if_missing(true))?;

    db.put("account:alice", "100")?;
    db.put("account:bob", "50")?;

    // Move 30 from alice to bob: readers see both changes or neither.
    let mut transfer = WriteBatch::new();
    transfer
        .put(b"account:alice", b"70")?
        .put(b"account:bob", b"80")?
        .delete(b"pending:transfer-1")?;
    println!("a batch of {} operations", transfer.len());
    // Durable when `write_opt` returns.
    db.write_opt(transfer, &WriteOptions { sync: true })?;

    // A single durable put.
    db.put_opt("audit:1", "alice -> bob: 30", &WriteOptions { sync: true })?;

    // Writes with the store's default (`Options::sync_writes`, off unless
    // set) are made durable together by `sync`.
    for i in 0..100 {
        db.put(format!("log:{i:03}"), format!("entry {i}"))?;
    }
    db.sync()?;

    for (key, value) in db.prefix("account:").collect::<flexdb::Result<Vec<_>>>()? {
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    assert_eq!(db.get("account:alice")?.as_deref(), Some(&b"70"[..]));
    assert_eq!(db.get("account:bob")?.as_deref(), Some(&b"80"[..]));

    // A store can also make every write durable by default.
    db.close()?;
    let db = Db::open(dir.path(), Options::new().sync_writes(true))?;
    db.put("audit:2", "closed the books")?;
    println!("{} pairs", db.iter().count());
    db.close()?;
    Ok(())
}
