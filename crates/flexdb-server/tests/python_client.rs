//! The server driven by the Python `redis` package, as Python users reach
//! it (skipped, saying so, when python3 or the package is missing:
//! `python3 -m pip install redis`).

mod common;

use std::process::Command;

use common::Server;

const SCRIPT: &str = r#"
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), decode_responses=True)
assert r.ping()
assert r.set("a", "1") is True
assert r.incr("a") == 2
assert r.get("a") == "2"
assert r.set("a", "x", nx=True) is None
r.mset({"m1": "x", "m2": "y"})
assert r.mget("m1", "nope", "m2") == ["x", None, "y"]
assert r.expire("m1", 100) and 99 <= r.ttl("m1") <= 100
assert sorted(r.scan_iter(match="m*", count=1)) == ["m1", "m2"]
p = r.pipeline(transaction=True)
p.incr("c").incr("c").get("c")
assert p.execute() == [1, 2, "2"]
with r.pipeline() as p:
    p.watch("c")
    other = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
    other.set("c", "100")
    p.multi()
    p.set("c", "0")
    try:
        p.execute()
        raise SystemExit("EXEC should have failed")
    except redis.WatchError:
        pass
assert r.get("c") == "100"
try:
    r.execute_command("GET")
    raise SystemExit("expected an error")
except redis.ResponseError as e:
    assert str(e) == "wrong number of arguments for 'get' command", str(e)
assert r.execute_command("FLEXDB.RANGE", "-", "+", "LIMIT", "2") == ["a", "c"]
r3 = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), protocol=3, decode_responses=True)
assert r3.get("a") == "2" and r3.get("missing") is None
assert r3.config_get("maxclients") == {"maxclients": "10000"}
print("python ok")
"#;

#[test]
fn python_redis_package_drives_the_server() {
    let probe = Command::new("python3")
        .args(["-c", "import redis"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        println!("skipped: python3 with the redis package is not installed (python3 -m pip install redis)");
        return;
    }
    let s = Server::start(&[]);
    let out = Command::new("python3")
        .args(["-c", SCRIPT, &s.port.to_string()])
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("python ok"));
}
