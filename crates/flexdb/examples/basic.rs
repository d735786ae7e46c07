//! The basics: open a store in a temporary directory, put, get and delete
//! keys, close it, then reopen it and read back what was written.
//!
//! Run with `cargo run -p flexdb --example basic`.

use flexdb::{Db, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store");

    // `create_if_missing`: a new directory becomes an empty store.
    let db = Db::open(&path, Options::new().create_if_missing(true))?;
    db.put("apple", "red")?;
    db.put("banana", "yellow")?;
    db.put("cherry", "dark red")?;
    // A put of an existing key replaces its value.
    db.put("apple", "green")?;
    db.delete("banana")?;

    assert_eq!(db.get("apple")?.as_deref(), Some(&b"green"[..]));
    assert_eq!(db.get("banana")?, None);
    assert!(db.contains("cherry")?);
    println!("before close: apple = {:?}", text(db.get("apple")?));

    // `close` commits everything to the space and reports any error
    // (dropping a `Db` closes it too, ignoring errors).
    db.close()?;

    let db = Db::open(&path, Options::new())?;
    for key in ["apple", "banana", "cherry"] {
        println!("after reopen: {key} = {:?}", text(db.get(key)?));
    }
    assert_eq!(db.get("apple")?.as_deref(), Some(&b"green"[..]));
    assert_eq!(db.get("banana")?, None);
    let stats = db.stats();
    println!("{} pairs in the store", stats.pairs);
    db.close()?;
    Ok(())
}

/// A value as text, for printing.
fn text(value: Option<Vec<u8>>) -> Option<String> {
    value.map(|v| String::from_utf8_lossy(&v).into_owned())
}
