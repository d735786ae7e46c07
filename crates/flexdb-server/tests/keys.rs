//! Key commands, SELECT and the FLEXDB.* extensions through the real
//! server.

mod common;

use std::collections::HashSet;

use common::{c, err_of, q, Server};
use redis::Connection;

#[test]
fn del_exists_type_keys_dbsize() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    q::<String>(
        &mut con,
        &[
            "MSET", "a", "1", "b", "2", "c", "3", "user:1", "x", "user:2", "y",
        ],
    );
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "a", "a", "nope", "b"]), 3);
    assert_eq!(q::<String>(&mut con, &["TYPE", "a"]), "string");
    assert_eq!(q::<String>(&mut con, &["TYPE", "nope"]), "none");
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 5);
    let mut keys: Vec<String> = q(&mut con, &["KEYS", "user:*"]);
    keys.sort();
    assert_eq!(keys, ["user:1", "user:2"]);
    assert_eq!(q::<Vec<String>>(&mut con, &["KEYS", "?"]).len(), 3);
    assert_eq!(q::<Vec<String>>(&mut con, &["KEYS", "[ab]"]).len(), 2);
    assert_eq!(q::<i64>(&mut con, &["DEL", "a", "a", "nope", "b"]), 2);
    assert_eq!(q::<i64>(&mut con, &["UNLINK", "c"]), 1);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 2);
    assert_eq!(
        err_of(&mut con, &mut c(&["DEL"])),
        "ERR wrong number of arguments for 'del' command"
    );
    let r: Option<String> = q(&mut con, &["RANDOMKEY"]);
    assert!(r.is_some_and(|k| k.starts_with("user:")));
    q::<String>(&mut con, &["FLUSHDB"]);
    assert_eq!(q::<Option<String>>(&mut con, &["RANDOMKEY"]), None);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 0);
}

#[test]
fn rename_copy() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    q::<String>(&mut con, &["SET", "a", "1", "EX", "100"]);
    assert_eq!(q::<String>(&mut con, &["RENAME", "a", "b"]), "OK");
    assert_eq!(q::<Option<String>>(&mut con, &["GET", "a"]), None);
    assert_eq!(
        q::<Option<String>>(&mut con, &["GET", "b"]).as_deref(),
        Some("1")
    );
    assert!(
        (90..=100).contains(&q::<i64>(&mut con, &["TTL", "b"])),
        "RENAME keeps the TTL"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["RENAME", "nope", "x"])),
        "ERR no such key"
    );
    q::<String>(&mut con, &["SET", "c", "3"]);
    assert_eq!(q::<i64>(&mut con, &["RENAMENX", "b", "c"]), 0);
    assert_eq!(q::<i64>(&mut con, &["RENAMENX", "b", "d"]), 1);
    assert_eq!(q::<String>(&mut con, &["RENAME", "d", "d"]), "OK");
    // COPY
    assert_eq!(q::<i64>(&mut con, &["COPY", "c", "e"]), 1);
    assert_eq!(q::<i64>(&mut con, &["COPY", "c", "e"]), 0);
    q::<String>(&mut con, &["SET", "c", "33"]);
    assert_eq!(q::<i64>(&mut con, &["COPY", "c", "e", "REPLACE"]), 1);
    assert_eq!(
        q::<Option<String>>(&mut con, &["GET", "e"]).as_deref(),
        Some("33")
    );
    assert_eq!(q::<i64>(&mut con, &["COPY", "c", "c", "DB", "5"]), 1);
    assert_eq!(q::<i64>(&mut con, &["COPY", "nope", "x"]), 0);
    assert_eq!(
        err_of(&mut con, &mut c(&["COPY", "c", "c"])),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["COPY", "c", "x", "DB", "16"])),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["COPY", "c", "x", "BOGUS"])),
        "ERR syntax error"
    );
    q::<String>(&mut con, &["SELECT", "5"]);
    assert_eq!(
        q::<Option<String>>(&mut con, &["GET", "c"]).as_deref(),
        Some("33")
    );
}

#[test]
fn select_isolates_databases() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let mut other = s.conn();
    q::<String>(&mut con, &["SET", "k", "db0"]);
    q::<String>(&mut con, &["SELECT", "1"]);
    assert_eq!(q::<Option<String>>(&mut con, &["GET", "k"]), None);
    q::<String>(&mut con, &["SET", "k", "db1"]);
    q::<String>(&mut con, &["SELECT", "15"]);
    q::<String>(&mut con, &["SET", "k", "db15"]);
    assert_eq!(
        q::<Option<String>>(&mut other, &["GET", "k"]).as_deref(),
        Some("db0")
    );
    q::<String>(&mut other, &["SELECT", "1"]);
    assert_eq!(
        q::<Option<String>>(&mut other, &["GET", "k"]).as_deref(),
        Some("db1")
    );
    assert_eq!(q::<i64>(&mut other, &["DBSIZE"]), 1);
    // FLUSHDB empties only the selected database, FLUSHALL all
    q::<String>(&mut other, &["FLUSHDB"]);
    assert_eq!(q::<i64>(&mut other, &["DBSIZE"]), 0);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 1);
    q::<String>(&mut other, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut other, &["DBSIZE"]), 1);
    assert_eq!(q::<String>(&mut other, &["FLUSHALL", "ASYNC"]), "OK");
    assert_eq!(q::<i64>(&mut other, &["DBSIZE"]), 0);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 0);
    assert_eq!(
        err_of(&mut con, &mut c(&["SELECT", "16"])),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SELECT", "-1"])),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SELECT", "x"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["FLUSHDB", "NOW"])),
        "ERR syntax error"
    );
    // a URL naming a database selects it
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/7", s.port)).unwrap();
    let mut seven = client.get_connection().unwrap();
    q::<String>(&mut seven, &["SET", "in7", "x"]);
    q::<String>(&mut con, &["SELECT", "7"]);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "in7"]), 1);
}

fn scan_all(con: &mut Connection, extra: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    loop {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(extra);
        let (next, keys): (String, Vec<String>) = q(con, &args);
        out.extend(keys);
        if next == "0" {
            return out;
        }
        cursor = next;
    }
}

#[test]
fn scan_match_count_type() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    for i in 0..250 {
        q::<String>(&mut con, &["SET", &format!("key:{i:03}"), "v"]);
        q::<String>(&mut con, &["SET", &format!("other:{i:03}"), "v"]);
    }
    let all = scan_all(&mut con, &["COUNT", "7"]);
    assert_eq!(all.len(), 500);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 500);
    let some = scan_all(&mut con, &["MATCH", "key:1*", "COUNT", "20"]);
    assert_eq!(some.len(), 100);
    assert!(scan_all(&mut con, &["TYPE", "hash"]).is_empty());
    assert_eq!(scan_all(&mut con, &["TYPE", "string"]).len(), 500);
    // the redis crate's own cursor loop
    let it: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("MATCH")
        .arg("other:*")
        .clone()
        .iter(&mut con)
        .unwrap()
        .collect();
    assert_eq!(it.len(), 250);
    assert_eq!(
        err_of(&mut con, &mut c(&["SCAN", "x"])),
        "ERR invalid cursor"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SCAN", "0", "COUNT", "0"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SCAN", "0", "MATCH"])),
        "ERR syntax error"
    );
}

#[test]
fn scan_returns_every_key_present_throughout_while_another_client_writes() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let stable: HashSet<String> = (0..2000).map(|i| format!("stable:{i:05}")).collect();
    let mut pipe = redis::pipe();
    for k in &stable {
        pipe.cmd("SET").arg(k).arg("v").ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let url = s.url();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (stop, written) = (stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut w = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // keys landing before, between and after the stable ones, and deletes
                let k = format!(
                    "{}:{i}",
                    ["a", "stable:0", "stable:01", "z"][(i % 4) as usize]
                );
                redis::cmd("SET")
                    .arg(&k)
                    .arg("x")
                    .query::<()>(&mut w)
                    .unwrap();
                if i.is_multiple_of(3) {
                    redis::cmd("DEL").arg(&k).query::<()>(&mut w).unwrap();
                }
                i += 1;
                written.store(i, std::sync::atomic::Ordering::Relaxed);
            }
            i
        })
    };
    // The scan starts once the writer writes (it connects first, and a
    // scan of 2,000 keys can end before it does).
    while written.load(std::sync::atomic::Ordering::Relaxed) == 0 && !writer.is_finished() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let seen: HashSet<String> = scan_all(&mut con, &["COUNT", "13"]).into_iter().collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(writes > 0);
    let missing: Vec<_> = stable.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "SCAN missed {} stable keys, e.g. {:?}",
        missing.len(),
        missing.first()
    );
}

#[test]
fn flexdb_range_and_delrange() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    for k in ["a", "b", "c", "d", "e"] {
        q::<String>(&mut con, &["SET", k, &k.to_uppercase()]);
    }
    assert_eq!(
        q::<Vec<String>>(&mut con, &["FLEXDB.RANGE", "-", "+"]),
        ["a", "b", "c", "d", "e"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut con, &["FLEXDB.RANGE", "[b", "(d"]),
        ["b", "c"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut con, &["FLEXDB.RANGE", "(b", "[d"]),
        ["c", "d"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut con, &["FLEXDB.RANGE", "-", "+", "LIMIT", "2", "REV"]),
        ["e", "d"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut con, &["FLEXDB.RANGE", "[c", "+", "WITHVALUES"]),
        ["c", "C", "d", "D", "e", "E"]
    );
    assert!(q::<Vec<String>>(&mut con, &["FLEXDB.RANGE", "[d", "[b"]).is_empty());
    assert_eq!(
        err_of(&mut con, &mut c(&["FLEXDB.RANGE", "a", "+"])),
        "ERR min or max not valid string range item"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["FLEXDB.RANGE", "-", "+", "LIMIT", "-1"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["FLEXDB.RANGE", "-", "+", "BOGUS"])),
        "ERR syntax error"
    );
    assert_eq!(
        q::<String>(&mut con, &["FLEXDB.DELRANGE", "[b", "[d"]),
        "OK"
    );
    assert_eq!(
        q::<Vec<String>>(&mut con, &["FLEXDB.RANGE", "-", "+"]),
        ["a", "e"]
    );
    assert_eq!(q::<String>(&mut con, &["FLEXDB.DELRANGE", "(a", "+"]), "OK");
    assert_eq!(
        q::<Vec<String>>(&mut con, &["FLEXDB.RANGE", "-", "+"]),
        ["a"]
    );
    // another database is untouched
    q::<String>(&mut con, &["SELECT", "2"]);
    q::<String>(&mut con, &["SET", "b", "x"]);
    q::<String>(&mut con, &["FLEXDB.DELRANGE", "-", "+"]);
    q::<String>(&mut con, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "a"]), 1);
}
