//! Keyspaces: independent orders of keys in one store, written together
//! atomically, each dropped at once.
//!
//! Run with `cargo run -p flexdb --example keyspaces`.

use flexdb::{Db, Isolation, Options, WriteBatch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::new().create_if_missing(true))?;

    // Created on first use; the same key lives apart in each keyspace.
    let users = db.keyspace("users")?;
    let sessions = db.keyspace("sessions")?;
    users.put("alice", "Alice Liddell")?;
    sessions.put("alice", "token-1")?;
    db.put("alice", "in the default keyspace")?;

    // One batch over several keyspaces: all of it or nothing.
    let mut batch = WriteBatch::new();
    batch.put_in(&users, b"bob", b"Bob")?;
    batch.put_in(&sessions, b"bob", b"token-2")?;
    db.write(batch)?;

    // A transaction reading one keyspace and writing another.
    let mut t = db.transaction(Isolation::Serializable);
    let name = t.keyspace(&users)?.get("bob")?.unwrap_or_default();
    t.keyspace(&sessions)?.put("bob:name", name)?;
    t.commit()?;

    for ks in db.keyspaces() {
        let n = db.keyspace(&ks)?.iter().count();
        println!("keyspace {ks}: {n} pairs");
    }

    // Every pair of a keyspace goes at once (one range delete).
    db.drop_keyspace("sessions")?;
    println!("after the drop: {:?}", db.keyspaces());
    assert!(sessions.get("alice").is_err());
    assert_eq!(users.get("alice")?.as_deref(), Some(&b"Alice Liddell"[..]));
    db.close()?;
    Ok(())
}
