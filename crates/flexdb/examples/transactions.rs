//! Point-in-time reads and optimistic transactions: a `Snapshot` keeps
//! reading the state it was taken at while writes go on; a `Transaction`
//! reads a snapshot with its own writes merged in and commits all of its
//! writes or none, failing with `Error::Conflict` (nothing written) when
//! another commit got in its way; `compare_and_swap` changes one key only
//! if it still holds what the caller saw.
//!
//! Run with `cargo run -p flexdb --example transactions`.

use flexdb::{Db, Error, Isolation, Options};

/// The balance stored under `key` (absent counts as 0).
fn balance(value: Option<Vec<u8>>) -> Result<i64, Box<dyn std::error::Error>> {
    Ok(match value {
        Some(v) => String::from_utf8(v)?.parse()?,
        None => 0,
    })
}

/// Moves `amount` from `from` to `to` in a serializable transaction,
/// retrying on conflicts.
fn transfer(db: &Db, from: &str, to: &str, amount: i64) -> Result<(), Box<dyn std::error::Error>> {
    loop {
        let mut t = db.transaction(Isolation::Serializable);
        let a = balance(t.get(from)?)?;
        let b = balance(t.get(to)?)?;
        t.put(from, (a - amount).to_string())?;
        t.put(to, (b + amount).to_string())?;
        match t.commit() {
            Ok(()) => return Ok(()),
            Err(Error::Conflict) => continue, // another transfer won: retry
            Err(e) => return Err(e.into()),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::new().create_if_missing(true))?;
    db.put("account:alice", "100")?;
    db.put("account:bob", "50")?;

    // A snapshot before the transfers: it keeps seeing 100 and 50.
    let before = db.snapshot();

    // Four threads move money around; the total never changes.
    std::thread::scope(|s| {
        for i in 0..4 {
            let db = &db;
            s.spawn(move || {
                for _ in 0..25 {
                    let (from, to) = if i % 2 == 0 {
                        ("account:alice", "account:bob")
                    } else {
                        ("account:bob", "account:alice")
                    };
                    if let Err(e) = transfer(db, from, to, 1 + i) {
                        eprintln!("transfer failed: {e}");
                    }
                }
            });
        }
    });

    let sum = |pairs: Vec<(Vec<u8>, Vec<u8>)>| -> Result<i64, Box<dyn std::error::Error>> {
        pairs
            .into_iter()
            .try_fold(0, |acc, (_, v)| Ok(acc + balance(Some(v))?))
    };
    let now = sum(db.prefix("account:").collect::<flexdb::Result<_>>()?)?;
    let then = sum(before.prefix("account:").collect::<flexdb::Result<_>>()?)?;
    println!("total now {now}, in the snapshot {then}");
    assert_eq!((now, then), (150, 150));
    assert_eq!(before.get("account:alice")?.as_deref(), Some(&b"100"[..]));

    // Set-if-absent and a counter, one key at a time.
    assert!(db.compare_and_swap("lock:report", None, Some(&b"owner-1"[..]))?);
    assert!(!db.compare_and_swap("lock:report", None, Some(&b"owner-2"[..]))?);
    loop {
        let seen = db.get("counter")?;
        let next = (balance(seen.clone())? + 1).to_string();
        if db.compare_and_swap("counter", seen.as_deref(), Some(next.as_bytes()))? {
            break;
        }
    }
    println!("counter = {}", balance(db.get("counter")?)?);

    drop(before);
    db.close()?;
    Ok(())
}
