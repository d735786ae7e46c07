//! String commands through the real server, with the `redis` crate.

mod common;

use common::{c, err_of, q, Server};
use redis::Connection;

fn get(con: &mut Connection, key: &str) -> Option<String> {
    q(con, &["GET", key])
}

#[test]
fn set_get_and_options() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    assert_eq!(get(&mut con, "k"), None);
    assert_eq!(q::<String>(&mut con, &["SET", "k", "v1"]), "OK");
    assert_eq!(get(&mut con, "k").as_deref(), Some("v1"));
    // NX / XX
    assert_eq!(
        q::<Option<String>>(&mut con, &["SET", "k", "v2", "NX"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["SET", "new", "x", "XX"]),
        None
    );
    assert_eq!(get(&mut con, "new"), None);
    assert_eq!(q::<String>(&mut con, &["SET", "k", "v2", "XX"]), "OK");
    // GET returns the old value
    assert_eq!(
        q::<Option<String>>(&mut con, &["SET", "k", "v3", "GET"]).as_deref(),
        Some("v2")
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["SET", "none", "a", "GET"]),
        None
    );
    assert_eq!(get(&mut con, "none").as_deref(), Some("a"));
    // EX sets a deadline, KEEPTTL keeps it, a plain SET drops it
    q::<String>(&mut con, &["SET", "t", "1", "EX", "100"]);
    assert!((90..=100).contains(&q::<i64>(&mut con, &["TTL", "t"])));
    q::<String>(&mut con, &["SET", "t", "2", "KEEPTTL"]);
    assert!((90..=100).contains(&q::<i64>(&mut con, &["TTL", "t"])));
    q::<String>(&mut con, &["SET", "t", "3"]);
    assert_eq!(q::<i64>(&mut con, &["TTL", "t"]), -1);
    q::<String>(&mut con, &["SET", "t", "4", "PX", "100000"]);
    assert!(q::<i64>(&mut con, &["PTTL", "t"]) > 90_000);
    let at = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 50)
        .to_string();
    q::<String>(&mut con, &["SET", "t", "5", "EXAT", &at]);
    assert!((48..=50).contains(&q::<i64>(&mut con, &["TTL", "t"])));
    // PXAT in the past: the key is gone at once
    q::<String>(&mut con, &["SET", "t", "6", "PXAT", "1000"]);
    assert_eq!(get(&mut con, "t"), None);
    // errors
    assert_eq!(
        err_of(&mut con, &mut c(&["SET", "k"])),
        "ERR wrong number of arguments for 'set' command"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SET", "k", "v", "NX", "XX"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SET", "k", "v", "EX"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SET", "k", "v", "EX", "10", "PX", "5"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SET", "k", "v", "EX", "x"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SET", "k", "v", "EX", "0"])),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SET", "k", "v", "EX", "-5"])),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SET", "k", "v", "KEEPTTL", "EX", "5"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["GET"])),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        err_of(
            &mut con,
            &mut c(&["SET", "k", "v", "PX", "9223372036854775807"])
        ),
        "ERR invalid expire time in 'set' command"
    );
    // binary-safe keys and values
    let bin: Vec<u8> = (0..=255u8).collect();
    redis::cmd("SET")
        .arg(&bin[..])
        .arg(&bin[..])
        .query::<()>(&mut con)
        .unwrap();
    let back: Vec<u8> = redis::cmd("GET").arg(&bin[..]).query(&mut con).unwrap();
    assert_eq!(back, bin);
}

#[test]
fn set_variants() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    assert_eq!(q::<i64>(&mut con, &["SETNX", "a", "1"]), 1);
    assert_eq!(q::<i64>(&mut con, &["SETNX", "a", "2"]), 0);
    assert_eq!(get(&mut con, "a").as_deref(), Some("1"));
    assert_eq!(q::<String>(&mut con, &["SETEX", "b", "100", "x"]), "OK");
    assert!((90..=100).contains(&q::<i64>(&mut con, &["TTL", "b"])));
    assert_eq!(q::<String>(&mut con, &["PSETEX", "b", "5000", "y"]), "OK");
    assert!((4000..=5000).contains(&q::<i64>(&mut con, &["PTTL", "b"])));
    assert_eq!(
        err_of(&mut con, &mut c(&["SETEX", "b", "0", "x"])),
        "ERR invalid expire time in 'setex' command"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["PSETEX", "b", "-1", "x"])),
        "ERR invalid expire time in 'psetex' command"
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETSET", "a", "3"]).as_deref(),
        Some("1")
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETSET", "fresh", "3"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETDEL", "a"]).as_deref(),
        Some("3")
    );
    assert_eq!(q::<Option<String>>(&mut con, &["GETDEL", "a"]), None);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "a"]), 0);
    // GETEX
    q::<String>(&mut con, &["SET", "g", "v"]);
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETEX", "g", "EX", "100"]).as_deref(),
        Some("v")
    );
    assert!((90..=100).contains(&q::<i64>(&mut con, &["TTL", "g"])));
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETEX", "g", "PERSIST"]).as_deref(),
        Some("v")
    );
    assert_eq!(q::<i64>(&mut con, &["TTL", "g"]), -1);
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETEX", "g"]).as_deref(),
        Some("v")
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETEX", "nope", "EX", "5"]),
        None
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["GETEX", "g", "EX"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["GETEX", "g", "FOO", "1"])),
        "ERR syntax error"
    );
    // MSET / MGET / MSETNX
    assert_eq!(q::<String>(&mut con, &["MSET", "m1", "a", "m2", "b"]), "OK");
    assert_eq!(
        q::<Vec<Option<String>>>(&mut con, &["MGET", "m1", "missing", "m2"]),
        vec![Some("a".into()), None, Some("b".into())]
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["MSET", "m1", "a", "m2"])),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(q::<i64>(&mut con, &["MSETNX", "m3", "c", "m1", "z"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "m3"]), 0);
    assert_eq!(q::<i64>(&mut con, &["MSETNX", "m3", "c", "m4", "d"]), 1);
    assert_eq!(get(&mut con, "m4").as_deref(), Some("d"));
}

#[test]
fn counters() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    assert_eq!(q::<i64>(&mut con, &["INCR", "n"]), 1);
    assert_eq!(q::<i64>(&mut con, &["INCRBY", "n", "10"]), 11);
    assert_eq!(q::<i64>(&mut con, &["DECR", "n"]), 10);
    assert_eq!(q::<i64>(&mut con, &["DECRBY", "n", "20"]), -10);
    assert_eq!(get(&mut con, "n").as_deref(), Some("-10"));
    q::<String>(&mut con, &["SET", "s", "abc"]);
    assert_eq!(
        err_of(&mut con, &mut c(&["INCR", "s"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["INCRBY", "n", "x"])),
        "ERR value is not an integer or out of range"
    );
    q::<String>(&mut con, &["SET", "big", "9223372036854775807"]);
    assert_eq!(
        err_of(&mut con, &mut c(&["INCR", "big"])),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["DECRBY", "n", "-9223372036854775808"])),
        "ERR decrement would overflow"
    );
    q::<String>(&mut con, &["SET", "sp", " 1"]);
    assert_eq!(
        err_of(&mut con, &mut c(&["INCR", "sp"])),
        "ERR value is not an integer or out of range"
    );
    // INCRBYFLOAT
    q::<String>(&mut con, &["SET", "f", "10.50"]);
    assert_eq!(q::<String>(&mut con, &["INCRBYFLOAT", "f", "0.1"]), "10.6");
    assert_eq!(q::<String>(&mut con, &["INCRBYFLOAT", "f", "-5"]), "5.6");
    q::<String>(&mut con, &["SET", "f", "5.0e3"]);
    assert_eq!(
        q::<String>(&mut con, &["INCRBYFLOAT", "f", "2.0e2"]),
        "5200"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["INCRBYFLOAT", "s", "1"])),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["INCRBYFLOAT", "f", "x"])),
        "ERR value is not a valid float"
    );
    q::<String>(&mut con, &["SET", "f", "1e308"]);
    assert_eq!(
        err_of(&mut con, &mut c(&["INCRBYFLOAT", "f", "1e308"])),
        "ERR increment would produce NaN or Infinity"
    );
    // INCR keeps the deadline
    q::<String>(&mut con, &["SET", "t", "5", "EX", "100"]);
    assert_eq!(q::<i64>(&mut con, &["INCR", "t"]), 6);
    assert!((90..=100).contains(&q::<i64>(&mut con, &["TTL", "t"])));
}

#[test]
fn append_strlen_ranges() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    assert_eq!(q::<i64>(&mut con, &["APPEND", "a", "Hello"]), 5);
    assert_eq!(q::<i64>(&mut con, &["APPEND", "a", " World"]), 11);
    assert_eq!(q::<i64>(&mut con, &["STRLEN", "a"]), 11);
    assert_eq!(q::<i64>(&mut con, &["STRLEN", "missing"]), 0);
    assert_eq!(q::<String>(&mut con, &["GETRANGE", "a", "0", "4"]), "Hello");
    assert_eq!(
        q::<String>(&mut con, &["GETRANGE", "a", "-5", "-1"]),
        "World"
    );
    assert_eq!(
        q::<String>(&mut con, &["GETRANGE", "a", "6", "1000"]),
        "World"
    );
    assert_eq!(q::<String>(&mut con, &["GETRANGE", "a", "5", "2"]), "");
    assert_eq!(q::<String>(&mut con, &["GETRANGE", "a", "-1", "-5"]), "");
    assert_eq!(
        q::<String>(&mut con, &["GETRANGE", "missing", "0", "-1"]),
        ""
    );
    assert_eq!(q::<String>(&mut con, &["SUBSTR", "a", "0", "0"]), "H");
    assert_eq!(
        err_of(&mut con, &mut c(&["GETRANGE", "a", "x", "1"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<i64>(&mut con, &["SETRANGE", "a", "6", "Redis"]), 11);
    assert_eq!(get(&mut con, "a").as_deref(), Some("Hello Redis"));
    assert_eq!(q::<i64>(&mut con, &["SETRANGE", "z", "3", "ab"]), 5);
    assert_eq!(get(&mut con, "z").as_deref(), Some("\0\0\0ab"));
    assert_eq!(q::<i64>(&mut con, &["SETRANGE", "empty", "3", ""]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "empty"]), 0);
    assert_eq!(
        err_of(&mut con, &mut c(&["SETRANGE", "a", "-1", "x"])),
        "ERR offset is out of range"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["SETRANGE", "a", "67108863", "xx"])),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    // APPEND keeps the deadline
    q::<String>(&mut con, &["SET", "t", "x", "EX", "100"]);
    q::<i64>(&mut con, &["APPEND", "t", "y"]);
    assert!((90..=100).contains(&q::<i64>(&mut con, &["TTL", "t"])));
}
