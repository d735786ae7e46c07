//! Ordered scans: key ranges, prefixes, reverse iteration and seeking.
//!
//! Run with `cargo run -p flexdb --example scans`.

use flexdb::{Db, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::new().create_if_missing(true))?;
    for city in ["amsterdam", "berlin", "bern", "lisbon", "madrid", "paris"] {
        db.put(format!("city:{city}"), city.len().to_string())?;
    }
    db.put("country:nl", "netherlands")?;
    db.put("country:de", "germany")?;

    // A half-open range, in key order.
    println!("cities from b up to m:");
    for kv in db.range("city:b".."city:m") {
        let (key, value) = kv?;
        println!("  {} ({} letters)", show(&key), show(&value));
    }

    // Every key with a prefix.
    let countries = db.prefix("country:").collect::<flexdb::Result<Vec<_>>>()?;
    println!("{} countries", countries.len());
    assert_eq!(countries.len(), 2);

    // Reverse iteration: the iterator is double-ended.
    print!("cities in reverse:");
    for kv in db.prefix("city:").rev() {
        print!(" {}", show(&kv?.0));
    }
    println!();

    // Seeking: jump the front to the first key at or after a key, or the
    // back to the last key at or before one.
    let mut it = db.prefix("city:");
    it.seek("city:l");
    if let Some(kv) = it.next() {
        println!("first city at or after l: {}", show(&kv?.0));
    }
    it.seek_back("city:n");
    if let Some(kv) = it.next_back() {
        println!("last city at or before n: {}", show(&kv?.0));
    }

    // Unbounded ranges work too.
    let last = db.range::<&str, _>(..).next_back().transpose()?;
    println!("last key overall: {:?}", last.map(|(k, _)| show(&k)));
    db.close()?;
    Ok(())
}

/// Bytes as text, for printing.
fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
