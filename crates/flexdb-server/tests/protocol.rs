//! The protocol and the connection layer through the real server:
//! pipelining, inline commands, RESP3, limits and bad input, AUTH,
//! maxclients, and redis-cli when installed.

mod common;

use std::io::Write;
use std::time::Duration;

use common::{c, err_of, frame, q, Server};

#[test]
fn pipelined_requests_are_answered_in_order() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    let mut batch = Vec::new();
    for i in 0..1000 {
        batch.extend(frame(&[
            b"SET",
            format!("k{i}").as_bytes(),
            format!("{i}").as_bytes(),
        ]));
        batch.extend(frame(&[b"GET", format!("k{i}").as_bytes()]));
    }
    batch.extend(b"PING\r\n");
    // split at awkward places
    for chunk in batch.chunks(7777) {
        raw.send(chunk);
    }
    for i in 0..1000 {
        assert_eq!(raw.reply(), "+OK");
        assert_eq!(raw.reply(), i.to_string());
    }
    assert_eq!(raw.reply(), "+PONG");
    // the redis crate's pipeline
    let mut con = s.conn();
    let mut p = redis::pipe();
    for i in 0..500 {
        p.cmd("INCR").arg("ctr").cmd("GET").arg(format!("k{i}"));
    }
    let out: Vec<i64> = p.query(&mut con).unwrap();
    assert_eq!(out.len(), 1000);
    assert_eq!(out[998], 500);
    assert_eq!(out[999], 499);
}

#[test]
fn inline_commands_and_connection_commands() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    raw.send(b"PING\r\nset greeting \"hello world\\x21\"\nGET greeting\r\n\r\nECHO 'it''s'\r\n");
    assert_eq!(raw.reply(), "+PONG");
    assert_eq!(raw.reply(), "+OK");
    assert_eq!(raw.reply(), "hello world!");
    // an unbalanced quote is a protocol error: error reply, then closed
    raw.send(b"ECHO \"open\r\n");
    assert!(raw.reply().starts_with("-ERR Protocol error"));
    assert!(raw.closed());
    let mut raw = s.raw();
    assert_eq!(raw.cmd(&[b"PING", b"hi"]), "hi");
    assert_eq!(
        raw.cmd(&[b"PING", b"a", b"b"]),
        "-ERR wrong number of arguments for 'ping' command"
    );
    assert_eq!(raw.cmd(&[b"ECHO", b"x"]), "x");
    assert_eq!(
        raw.cmd(&[b"FOO", b"bar", b"baz"]),
        "-ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' "
    );
    assert_eq!(raw.cmd(&[b"QUIT"]), "+OK");
    assert!(raw.closed());
    // requests pipelined after QUIT are not run
    let mut raw = s.raw();
    raw.send(b"SET before 1\r\nQUIT\r\nSET after 1\r\n");
    assert_eq!(raw.reply(), "+OK");
    assert_eq!(raw.reply(), "+OK");
    assert!(raw.closed());
    let mut raw = s.raw();
    assert_eq!(raw.cmd(&[b"EXISTS", b"before", b"after"]), ":1");
}

#[test]
fn resp3_through_hello() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    let hello = raw.cmd(&[b"HELLO", b"3"]);
    assert!(
        hello.starts_with("[server, redis, version, 7.2.0, proto, :3, id, "),
        "{hello}"
    );
    assert_eq!(raw.cmd(&[b"GET", b"missing"]), "(null)");
    raw.send(&frame(&[b"INCRBYFLOAT", b"f", b"1.5"]));
    assert_eq!(raw.reply(), "1.5");
    raw.send(&frame(&[b"CONFIG", b"GET", b"maxclients"]));
    assert_eq!(raw.reply(), "[maxclients, 10000]");
    assert_eq!(
        raw.cmd(&[b"HELLO", b"4"]),
        "-NOPROTO unsupported protocol version"
    );
    let two = raw.cmd(&[b"HELLO", b"2"]);
    assert!(two.contains("proto, :2"));
    assert_eq!(raw.cmd(&[b"GET", b"missing"]), "(nil)");
    // the raw map encoding itself
    raw.send(&frame(&[b"HELLO", b"3"]));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut raw.r, &mut line).unwrap();
    assert_eq!(line, "%7\r\n");
}

#[test]
fn limits_and_bad_input_close_only_the_offender() {
    let s = Server::start(&["--proto-max-bulk-len", "1048576"]);
    let mut good = s.conn();
    q::<String>(&mut good, &["SET", "kept", "yes"]);
    let bad_inputs: Vec<(&str, Vec<u8>)> = vec![
        ("bulk of 2^40", b"*1\r\n$1099511627776\r\n".to_vec()),
        ("multibulk of 10^9", b"*1000000000\r\n".to_vec()),
        (
            "bulk over the configured limit",
            b"*2\r\n$3\r\nGET\r\n$1048577\r\n".to_vec(),
        ),
        ("negative bulk", b"*1\r\n$-3\r\n".to_vec()),
        ("not a bulk", b"*1\r\n:1\r\n".to_vec()),
        ("garbage count", b"*abc\r\n".to_vec()),
        ("bulk without its CRLF", b"*1\r\n$1\r\nabc\r\n".to_vec()),
        ("header line too long", {
            let mut v = b"*1\r\n$".to_vec();
            v.extend(std::iter::repeat_n(b'1', 70_000));
            v
        }),
        ("inline line too long", vec![b'a'; 70_000]),
    ];
    for (what, input) in bad_inputs {
        let mut raw = s.raw();
        raw.send(&input);
        let reply = raw.try_reply();
        assert!(
            reply
                .as_deref()
                .is_some_and(|r| r.starts_with("-ERR Protocol error")),
            "{what}: {reply:?}"
        );
        assert!(raw.closed(), "{what}: still open");
        assert_eq!(
            q::<String>(&mut good, &["GET", "kept"]),
            "yes",
            "after {what}"
        );
    }
    // random bytes: an error or a close, never a dead server
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..50 {
        let mut raw = s.raw();
        let mut junk = Vec::new();
        for _ in 0..512 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            junk.push((x >> 24) as u8);
        }
        junk.extend(b"\r\n");
        let _ = raw.w.write_all(&junk);
        let _ = raw.w.shutdown(std::net::Shutdown::Write);
        while raw.try_reply().is_some() {}
    }
    // truncated frames, then the peer leaves
    for cut in [3, 9, 14, 20] {
        let mut raw = s.raw();
        let f = frame(&[b"SET", b"half", b"written"]);
        raw.send(&f[..cut]);
        drop(raw);
    }
    assert_eq!(q::<Option<String>>(&mut good, &["GET", "half"]), None);
    assert_eq!(q::<String>(&mut good, &["GET", "kept"]), "yes");
    // a bulk at the limit is fine
    let big = vec![b'v'; 1024 * 1024];
    redis::cmd("SET")
        .arg("big")
        .arg(&big[..])
        .query::<()>(&mut good)
        .unwrap();
    assert_eq!(q::<i64>(&mut good, &["STRLEN", "big"]), 1024 * 1024);
}

#[test]
fn many_connections_opened_and_dropped() {
    let s = Server::start(&[]);
    let mut good = s.conn();
    q::<String>(&mut good, &["SET", "alive", "1"]);
    let warm = s.rss_kib();
    // 10,000 connections, in waves of 500 held open at once; half leave a
    // frame unfinished (with a 1 MB bulk announced), the others a command
    for wave in 0..20 {
        let mut open = Vec::new();
        for i in 0..500 {
            let mut raw = s.raw();
            if i % 2 == 0 {
                raw.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\nxxxx");
            } else {
                raw.send(&frame(&[b"INCR", b"hits"]));
            }
            open.push(raw);
        }
        assert_eq!(
            q::<String>(&mut good, &["GET", "alive"]),
            "1",
            "wave {wave}"
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(q::<i64>(&mut good, &["GET", "hits"]), 5000);
    assert_eq!(q::<Option<String>>(&mut good, &["GET", "k"]), None);
    let list: String = q(&mut good, &["CLIENT", "LIST"]);
    assert_eq!(list.lines().count(), 1, "closed connections are gone");
    let grown = s.rss_kib().saturating_sub(warm);
    assert!(grown < 100 * 1024, "resident memory grew by {grown} KiB");
}

#[test]
fn maxclients_refuses_extra_clients() {
    let s = Server::start(&["--maxclients", "2"]);
    let mut a = s.raw();
    let mut b = s.raw();
    assert_eq!(a.cmd(&[b"PING"]), "+PONG");
    assert_eq!(b.cmd(&[b"PING"]), "+PONG");
    let mut third = s.raw();
    assert_eq!(third.reply(), "-ERR max number of clients reached");
    assert!(third.closed());
    drop(a);
    std::thread::sleep(Duration::from_millis(200));
    let mut d = s.raw();
    assert_eq!(d.cmd(&[b"PING"]), "+PONG");
}

#[test]
fn auth_is_required_when_a_password_is_set() {
    let s = Server::start(&["--requirepass", "s3cret"]);
    let mut raw = s.raw();
    assert_eq!(raw.cmd(&[b"GET", b"k"]), "-NOAUTH Authentication required.");
    assert_eq!(
        raw.cmd(&[b"AUTH", b"wrong"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(
        raw.cmd(&[b"AUTH", b"other", b"s3cret"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    // before AUTH, frames are kept small
    raw.send(b"*100\r\n");
    assert!(raw.reply().starts_with("-ERR Protocol error"));
    let mut raw = s.raw();
    assert_eq!(raw.cmd(&[b"AUTH", b"s3cret"]), "+OK");
    assert_eq!(raw.cmd(&[b"SET", b"k", b"v"]), "+OK");
    let mut raw = s.raw();
    assert_eq!(raw.cmd(&[b"AUTH", b"default", b"s3cret"]), "+OK");
    assert_eq!(raw.cmd(&[b"GET", b"k"]), "v");
    let mut raw = s.raw();
    assert!(raw.cmd(&[b"HELLO", b"3"]).starts_with("-NOAUTH"));
    assert!(raw
        .cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"s3cret"])
        .contains("proto, :3"));
    // the redis crate with a password in the URL
    let client = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", s.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    assert_eq!(q::<String>(&mut con, &["GET", "k"]), "v");
    // CONFIG SET requirepass changes it for new clients
    q::<String>(&mut con, &["CONFIG", "SET", "requirepass", "new"]);
    let mut raw = s.raw();
    assert_eq!(
        raw.cmd(&[b"AUTH", b"s3cret"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(raw.cmd(&[b"AUTH", b"new"]), "+OK");
    // no password configured
    let open = Server::start(&[]);
    let mut raw = open.raw();
    assert!(raw
        .cmd(&[b"AUTH", b"x"])
        .starts_with("-ERR AUTH <password> called without any password configured"));
}

#[test]
fn server_commands() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    q::<String>(&mut con, &["SET", "a", "1"]);
    let info: String = q(&mut con, &["INFO"]);
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Keyspace",
        "db0:keys=1",
    ] {
        assert!(info.contains(section), "INFO lacks {section}");
    }
    assert!(info.contains("flexdb_memtable_bytes:") && info.contains("used_memory:"));
    // The memory section reports the flags' bound (256 MiB cache, two
    // 64 MiB memory tables by default) and the store's indexes.
    assert!(
        info.contains("flexdb_buffer_budget:402653184\r\n"),
        "{info}"
    );
    for field in [
        "flexdb_rss_anon:",
        "flexdb_rss_file:",
        "flexdb_sparse_index_bytes:",
        "flexdb_extent_index_bytes:",
    ] {
        assert!(info.contains(field), "INFO lacks {field}");
    }
    // CONFIG RESETSTAT zeroes the stats: after it, only the INFO that
    // reads them has been counted, and no read has hit or missed.
    q::<Option<String>>(&mut con, &["GET", "a"]);
    q::<Option<String>>(&mut con, &["GET", "absent"]);
    let stat = |info: &str, name: &str| -> u64 {
        let line = info.lines().find(|l| l.starts_with(name)).unwrap();
        line[name.len() + 1..].trim().parse().unwrap()
    };
    let before: String = q(&mut con, &["INFO", "stats"]);
    assert!(stat(&before, "total_commands_processed") >= 4, "{before}");
    assert_eq!(stat(&before, "keyspace_hits"), 1, "{before}");
    assert_eq!(stat(&before, "keyspace_misses"), 1, "{before}");
    assert_eq!(q::<String>(&mut con, &["CONFIG", "RESETSTAT"]), "OK");
    let after: String = q(&mut con, &["INFO", "stats"]);
    assert!(stat(&after, "total_commands_processed") <= 1, "{after}");
    assert_eq!(stat(&after, "keyspace_hits"), 0, "{after}");
    assert_eq!(stat(&after, "keyspace_misses"), 0, "{after}");
    assert_eq!(stat(&after, "total_connections_received"), 0, "{after}");
    let only: String = q(&mut con, &["INFO", "keyspace"]);
    assert!(only.contains("db0:keys=1") && !only.contains("# Server"));
    let cfg: Vec<String> = q(&mut con, &["CONFIG", "GET", "*"]);
    assert!(cfg
        .chunks(2)
        .any(|p| p[0] == "appendfsync" && p[1] == "everysec"));
    assert!(cfg
        .chunks(2)
        .any(|p| p[0] == "max-frozen-memtables" && p[1] == "1"));
    assert_eq!(
        q::<Vec<String>>(&mut con, &["CONFIG", "GET", "port"]),
        ["port", &s.port.to_string()]
    );
    assert_eq!(
        q::<String>(&mut con, &["CONFIG", "SET", "maxclients", "50"]),
        "OK"
    );
    assert_eq!(
        q::<Vec<String>>(&mut con, &["CONFIG", "GET", "maxclients"]),
        ["maxclients", "50"]
    );
    assert!(
        err_of(&mut con, &mut c(&["CONFIG", "SET", "appendfsync", "no"])).contains("immutable")
    );
    assert!(err_of(&mut con, &mut c(&["CONFIG", "SET", "nosuch", "1"]))
        .starts_with("ERR Unknown option"));
    assert!(
        err_of(&mut con, &mut c(&["CONFIG", "SET", "maxclients", "x"]))
            .contains("couldn't be parsed")
    );
    // CLIENT
    let id: i64 = q(&mut con, &["CLIENT", "ID"]);
    assert!(id > 0);
    assert_eq!(q::<Option<String>>(&mut con, &["CLIENT", "GETNAME"]), None);
    q::<String>(&mut con, &["CLIENT", "SETNAME", "tester"]);
    assert_eq!(q::<String>(&mut con, &["CLIENT", "GETNAME"]), "tester");
    assert!(
        err_of(&mut con, &mut c(&["CLIENT", "SETNAME", "a b"])).contains("cannot contain spaces")
    );
    let list: String = q(&mut con, &["CLIENT", "LIST"]);
    assert!(list.contains(&format!("id={id} ")) && list.contains("name=tester"));
    let mut victim = s.raw();
    assert_eq!(victim.cmd(&[b"PING"]), "+PONG");
    let victim_id = victim.cmd(&[b"CLIENT", b"ID"]);
    let victim_id = victim_id.trim_start_matches(':').to_string();
    assert_eq!(q::<i64>(&mut con, &["CLIENT", "KILL", "ID", &victim_id]), 1);
    assert!(victim.closed());
    assert_eq!(q::<i64>(&mut con, &["CLIENT", "KILL", "ID", "99999"]), 0);
    let mut victim = s.raw();
    let me = victim.cmd(&[b"CLIENT", b"INFO"]);
    let addr = me
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    assert_eq!(q::<String>(&mut con, &["CLIENT", "KILL", &addr]), "OK");
    assert!(victim.closed());
    assert_eq!(
        err_of(&mut con, &mut c(&["CLIENT", "KILL", "1.2.3.4:5"])),
        "ERR No such client"
    );
    assert!(err_of(&mut con, &mut c(&["CLIENT", "NOSUCH"])).starts_with("ERR unknown subcommand"));
    // HELLO SETNAME names the connection
    let mut named = s.raw();
    named.cmd(&[b"HELLO", b"2", b"SETNAME", b"hello-name"]);
    assert_eq!(named.cmd(&[b"CLIENT", b"GETNAME"]), "hello-name");
    // CONFIG SET proto-max-bulk-len applies to requests from then on
    q::<String>(&mut con, &["CONFIG", "SET", "proto-max-bulk-len", "20"]);
    let mut limited = s.raw();
    limited.send(&frame(&[b"SET", b"k", b"0123456789-0123456789"]));
    assert!(limited
        .reply()
        .starts_with("-ERR Protocol error: invalid bulk length"));
    q::<String>(
        &mut con,
        &["CONFIG", "SET", "proto-max-bulk-len", "536870912"],
    );
    // COMMAND
    let n: i64 = q(&mut con, &["COMMAND", "COUNT"]);
    assert!(n >= 60);
    let info: Vec<redis::Value> = q(&mut con, &["COMMAND", "INFO", "get", "nosuch"]);
    assert_eq!(info.len(), 2);
    assert_eq!(info[1], redis::Value::Nil);
    let all: Vec<redis::Value> = q(&mut con, &["COMMAND"]);
    assert_eq!(all.len() as i64, n);
    q::<redis::Value>(&mut con, &["COMMAND", "DOCS"]);
    // TIME, SAVE, BGSAVE, LASTSAVE
    let t: Vec<String> = q(&mut con, &["TIME"]);
    let secs: u64 = t[0].parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 2);
    assert!(t[1].parse::<u64>().unwrap() < 1_000_000);
    assert_eq!(q::<String>(&mut con, &["SAVE"]), "OK");
    assert_eq!(
        q::<String>(&mut con, &["BGSAVE"]),
        "Background saving started"
    );
    assert!(q::<u64>(&mut con, &["LASTSAVE"]).abs_diff(now) <= 2);
}

#[test]
fn shutdown_and_sigterm_keep_every_write() {
    let mut s = Server::start(&["--appendfsync", "no"]);
    let mut con = s.conn();
    for i in 0..500 {
        q::<String>(&mut con, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    q::<String>(&mut con, &["SET", "ttl", "x", "EX", "1000"]);
    // SHUTDOWN: the server exits cleanly; no reply
    let mut raw = s.raw();
    raw.send(&frame(&[b"SHUTDOWN"]));
    assert!(raw.try_reply().is_none());
    assert!(s.wait_exit().success());
    s.restart();
    let mut con = s.conn();
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 501);
    assert_eq!(q::<String>(&mut con, &["GET", "k499"]), "499");
    assert!(q::<i64>(&mut con, &["TTL", "ttl"]) > 990);
    q::<String>(&mut con, &["SET", "after", "restart"]);
    // SIGTERM
    assert!(s.terminate().success());
    s.restart();
    let mut con = s.conn();
    assert_eq!(q::<String>(&mut con, &["GET", "after"]), "restart");
}

#[test]
fn sigkill_keeps_every_acknowledged_write_with_appendfsync_always() {
    let mut s = Server::start(&["--appendfsync", "always"]);
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let (url, acked) = (s.url(), acked.clone());
            std::thread::spawn(move || {
                let Ok(mut con) = redis::Client::open(url).unwrap().get_connection() else {
                    return;
                };
                for i in 0.. {
                    let k = format!("w{t}:{i}");
                    match redis::cmd("SET").arg(&k).arg(i).query::<String>(&mut con) {
                        Ok(_) => acked.lock().unwrap().push(k),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    s.kill();
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 10, "only {} writes acknowledged", acked.len());
    s.restart();
    let mut con = s.conn();
    let mut missing = 0;
    for chunk in acked.chunks(500) {
        let vals: Vec<Option<String>> = redis::cmd("MGET").arg(chunk).query(&mut con).unwrap();
        missing += vals.iter().filter(|v| v.is_none()).count();
    }
    assert_eq!(
        missing,
        0,
        "{missing} of {} acknowledged writes lost",
        acked.len()
    );
}

#[test]
fn redis_cli_drives_the_server() {
    let Ok(out) = std::process::Command::new("redis-cli")
        .arg("--version")
        .output()
    else {
        println!("skipped: redis-cli is not installed (apt-get install redis-tools)");
        return;
    };
    assert!(out.status.success());
    let s = Server::start(&[]);
    let cli = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &s.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(cli(&["PING"]), "PONG");
    assert_eq!(cli(&["SET", "a", "hello world"]), "OK");
    assert_eq!(cli(&["GET", "a"]), "hello world");
    assert_eq!(cli(&["INCR", "n"]), "1");
    assert_eq!(cli(&["-n", "2", "SET", "b", "x"]), "OK");
    assert_eq!(cli(&["-n", "2", "DBSIZE"]), "1");
    assert_eq!(cli(&["--scan"]).lines().count(), 2);
    assert!(cli(&["INFO", "server"]).contains("redis_version"));
    assert!(cli(&["NOSUCH"]).contains("unknown command"));
    // a piped session, as a user types it
    let mut child = std::process::Command::new("redis-cli")
        .args(["-p", &s.port.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"SET c 3\nGET c\nFLEXDB.RANGE - +\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("OK") && text.contains('3') && text.contains('c'),
        "{text}"
    );
}

#[test]
fn small_memory_settings_commit_to_the_store_and_survive_a_kill() {
    let mut s = Server::start(&[
        "--memtable-mb",
        "1",
        "--cache-mb",
        "1",
        "--appendfsync",
        "always",
    ]);
    let mut con = s.conn();
    assert_eq!(
        q::<Vec<String>>(&mut con, &["CONFIG", "GET", "memtable-mb"]),
        ["memtable-mb", "1"]
    );
    let value = "v".repeat(1000);
    let mut p = redis::pipe();
    for i in 0..4000 {
        p.cmd("SET").arg(format!("k{i:05}")).arg(&value).ignore();
    }
    p.query::<()>(&mut con).unwrap();
    s.kill_and_restart();
    let mut con = s.conn();
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 4000);
    assert_eq!(q::<i64>(&mut con, &["STRLEN", "k03999"]), 1000);
}
