//! Expiry, MULTI/EXEC/WATCH and atomicity across clients through the
//! real server.

mod common;

use std::thread::sleep;
use std::time::Duration;

use common::{c, err_of, q, Server};

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn keys_expire() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    q::<String>(&mut con, &["SET", "px", "v", "PX", "400"]);
    q::<String>(&mut con, &["PSETEX", "ps", "400", "v"]);
    q::<String>(&mut con, &["SET", "pe", "v"]);
    assert_eq!(q::<i64>(&mut con, &["PEXPIRE", "pe", "400"]), 1);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "px", "ps", "pe"]), 3);
    sleep(Duration::from_millis(700));
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "px", "ps", "pe"]), 0);
    assert_eq!(q::<Option<String>>(&mut con, &["GET", "px"]), None);
    assert_eq!(q::<i64>(&mut con, &["TTL", "px"]), -2);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 0);
}

#[test]
fn expire_family() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "nope", "10"]), 0);
    q::<String>(&mut con, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut con, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut con, &["PTTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut con, &["TTL", "nope"]), -2);
    assert_eq!(q::<i64>(&mut con, &["PTTL", "nope"]), -2);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "100"]), 1);
    assert!((95..=100).contains(&q::<i64>(&mut con, &["TTL", "k"])));
    // NX / XX / GT / LT
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "200", "NX"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "50", "GT"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "150", "LT"]), 1);
    assert!((145..=150).contains(&q::<i64>(&mut con, &["TTL", "k"])));
    assert_eq!(q::<i64>(&mut con, &["PERSIST", "k"]), 1);
    assert_eq!(q::<i64>(&mut con, &["PERSIST", "k"]), 0);
    assert_eq!(q::<i64>(&mut con, &["PERSIST", "nope"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "10", "XX"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "10", "GT"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "10", "LT"]), 1);
    assert_eq!(
        err_of(&mut con, &mut c(&["EXPIRE", "k", "10", "NX", "XX"])),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["EXPIRE", "k", "10", "GT", "LT"])),
        "ERR GT and LT options at the same time are not compatible"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["EXPIRE", "k", "10", "FOO"])),
        "ERR Unsupported option FOO"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["EXPIRE", "k", "x"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["EXPIRE", "k", "9223372036854775807"])),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        err_of(&mut con, &mut c(&["PEXPIRE", "k", "9223372036854775807"])),
        "ERR invalid expire time in 'pexpire' command"
    );
    // PEXPIRE / EXPIREAT / PEXPIREAT / *EXPIRETIME
    assert_eq!(q::<i64>(&mut con, &["PEXPIRE", "k", "100000"]), 1);
    assert!((90_000..=100_000).contains(&q::<i64>(&mut con, &["PTTL", "k"])));
    let at = now_secs() + 1000;
    assert_eq!(q::<i64>(&mut con, &["EXPIREAT", "k", &at.to_string()]), 1);
    assert!((at - 1..=at).contains(&(q::<i64>(&mut con, &["EXPIRETIME", "k"]) as u64)));
    assert_eq!(
        q::<i64>(&mut con, &["PEXPIREAT", "k", &(at * 1000).to_string()]),
        1
    );
    let pat = q::<i64>(&mut con, &["PEXPIRETIME", "k"]) as u64;
    assert!(pat.abs_diff(at * 1000) < 50, "{pat}");
    assert_eq!(q::<i64>(&mut con, &["EXPIRETIME", "nope"]), -2);
    // a deadline in the past, or a non-positive TTL, deletes the key
    assert_eq!(q::<i64>(&mut con, &["EXPIREAT", "k", "1"]), 1);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "k"]), 0);
    q::<String>(&mut con, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "0"]), 1);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "k"]), 0);
    q::<String>(&mut con, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut con, &["PEXPIRE", "k", "-5"]), 1);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "k"]), 0);
}

#[test]
fn multi_exec_discard() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let mut raw = s.raw();
    assert_eq!(raw.cmd(&[b"MULTI"]), "+OK");
    assert_eq!(raw.cmd(&[b"SET", b"a", b"1"]), "+QUEUED");
    assert_eq!(raw.cmd(&[b"INCR", b"a"]), "+QUEUED");
    assert_eq!(raw.cmd(&[b"INCR", b"nonint-later"]), "+QUEUED");
    assert_eq!(raw.cmd(&[b"GET", b"a"]), "+QUEUED");
    // not applied before EXEC
    assert_eq!(q::<Option<String>>(&mut con, &["GET", "a"]), None);
    assert_eq!(raw.cmd(&[b"EXEC"]), "[+OK, :2, :1, 2]");
    // a runtime error inside EXEC does not stop the others
    raw.cmd(&[b"SET", b"s", b"abc"]);
    raw.cmd(&[b"MULTI"]);
    raw.cmd(&[b"INCR", b"s"]);
    raw.cmd(&[b"SET", b"t", b"1"]);
    assert_eq!(
        raw.cmd(&[b"EXEC"]),
        "[-ERR value is not an integer or out of range, +OK]"
    );
    // a refused command aborts the whole transaction
    raw.cmd(&[b"MULTI"]);
    raw.cmd(&[b"SET", b"u", b"1"]);
    assert_eq!(
        raw.cmd(&[b"GET"]),
        "-ERR wrong number of arguments for 'get' command"
    );
    assert!(raw
        .cmd(&[b"NOSUCH"])
        .starts_with("-ERR unknown command 'NOSUCH'"));
    assert_eq!(
        raw.cmd(&[b"EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "u"]), 0);
    // DISCARD
    raw.cmd(&[b"MULTI"]);
    raw.cmd(&[b"SET", b"v", b"1"]);
    assert_eq!(raw.cmd(&[b"DISCARD"]), "+OK");
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "v"]), 0);
    assert_eq!(raw.cmd(&[b"EXEC"]), "-ERR EXEC without MULTI");
    assert_eq!(raw.cmd(&[b"DISCARD"]), "-ERR DISCARD without MULTI");
    raw.cmd(&[b"MULTI"]);
    assert_eq!(raw.cmd(&[b"MULTI"]), "-ERR MULTI calls can not be nested");
    assert_eq!(
        raw.cmd(&[b"WATCH", b"x"]),
        "-ERR WATCH inside MULTI is not allowed"
    );
    assert_eq!(raw.cmd(&[b"EXEC"]), "[]");
    // the redis crate's atomic pipeline
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("p")
        .cmd("INCR")
        .arg("p")
        .query(&mut con)
        .unwrap();
    assert_eq!((a, b), (1, 2));
}

#[test]
fn watch_conflicts_across_clients() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.conn();
    q::<String>(&mut b, &["SET", "w", "1"]);
    // untouched watched key: EXEC runs
    assert_eq!(a.cmd(&[b"WATCH", b"w", b"other"]), "+OK");
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"SET", b"w", b"2"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "[+OK]");
    // another client writes the watched key: EXEC returns the null array
    a.cmd(&[b"WATCH", b"w"]);
    q::<String>(&mut b, &["SET", "w", "from-b"]);
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"SET", b"w", b"from-a"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "(nil array)");
    assert_eq!(q::<String>(&mut b, &["GET", "w"]), "from-b");
    // watches end with EXEC: the next transaction runs
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"SET", b"w", b"from-a"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "[+OK]");
    // a write of the same value, an expire, a DEL, a FLUSHDB each count
    for touch in [
        &["SET", "w", "from-a"][..],
        &["EXPIRE", "w", "100"],
        &["DEL", "w"],
        &["FLUSHDB"],
    ] {
        q::<String>(&mut b, &["SET", "w", "x"]);
        a.cmd(&[b"WATCH", b"w"]);
        c(touch).query::<redis::Value>(&mut b).unwrap();
        a.cmd(&[b"MULTI"]);
        a.cmd(&[b"GET", b"w"]);
        assert_eq!(a.cmd(&[b"EXEC"]), "(nil array)", "{touch:?}");
    }
    // a write to the same key name in another database does not
    q::<String>(&mut b, &["SET", "w", "x"]);
    a.cmd(&[b"WATCH", b"w"]);
    q::<String>(&mut b, &["SELECT", "3"]);
    q::<String>(&mut b, &["SET", "w", "elsewhere"]);
    q::<String>(&mut b, &["SELECT", "0"]);
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"GET", b"w"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "[x]");
    // a watched key that expires meanwhile fails the transaction (Redis 7)
    q::<String>(&mut b, &["SET", "short", "x", "PX", "400"]);
    a.cmd(&[b"WATCH", b"short", b"absent"]);
    sleep(Duration::from_millis(800));
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"GET", b"short"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "(nil array)");
    // UNWATCH forgets
    a.cmd(&[b"WATCH", b"w"]);
    assert_eq!(a.cmd(&[b"UNWATCH"]), "+OK");
    q::<String>(&mut b, &["SET", "w", "y"]);
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"GET", b"w"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "[y]");
}

#[test]
fn optimistic_counter_with_watch_is_exact() {
    let s = Server::start(&[]);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let url = s.url();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..50 {
                    loop {
                        redis::cmd("WATCH")
                            .arg("ctr")
                            .query::<()>(&mut con)
                            .unwrap();
                        let v: Option<i64> = redis::cmd("GET").arg("ctr").query(&mut con).unwrap();
                        let r: Option<(String,)> = redis::pipe()
                            .atomic()
                            .cmd("SET")
                            .arg("ctr")
                            .arg(v.unwrap_or(0) + 1)
                            .query(&mut con)
                            .unwrap();
                        if r.is_some() {
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut con = s.conn();
    assert_eq!(q::<i64>(&mut con, &["GET", "ctr"]), 200);
}

#[test]
fn read_modify_write_commands_are_atomic_across_clients() {
    let s = Server::start(&[]);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let url = s.url();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut won = 0;
                for i in 0..200 {
                    redis::cmd("INCR").arg("n").query::<i64>(&mut con).unwrap();
                    redis::cmd("APPEND")
                        .arg("log")
                        .arg("x")
                        .query::<i64>(&mut con)
                        .unwrap();
                    redis::cmd("INCRBYFLOAT")
                        .arg("f")
                        .arg("0.5")
                        .query::<String>(&mut con)
                        .unwrap();
                    won += redis::cmd("SETNX")
                        .arg(format!("lock:{i}"))
                        .arg(t)
                        .query::<i64>(&mut con)
                        .unwrap();
                }
                won
            })
        })
        .collect();
    let won: i64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let mut con = s.conn();
    assert_eq!(q::<i64>(&mut con, &["GET", "n"]), 800);
    assert_eq!(q::<i64>(&mut con, &["STRLEN", "log"]), 800);
    assert_eq!(q::<String>(&mut con, &["GET", "f"]), "400");
    assert_eq!(won, 200, "each SETNX lock was won exactly once");
}
