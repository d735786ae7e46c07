"""Other processes: the write lock, read-only opens beside a writer, reopening."""

import multiprocessing
import subprocess
import sys
import textwrap

import pytest

import flexdb


def run_python(code, *args):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_second_process_gets_locked_error(path):
    with flexdb.open(path) as db:
        db[b"k"] = b"v"
        r = run_python(
            """
            import sys, flexdb
            try:
                flexdb.open(sys.argv[1])
            except flexdb.LockedError as e:
                print("locked:", e)
                sys.exit(0)
            sys.exit(3)
            """,
            path,
        )
        assert r.returncode == 0, r.stderr
        assert "locked by another process" in r.stdout
    # Once closed, another process may open it.
    r = run_python(
        """
        import sys, flexdb
        with flexdb.open(sys.argv[1], create=False) as db:
            print(db[b"k"].decode())
        """,
        path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "v"


def test_same_process_second_handle_is_locked(path):
    with flexdb.open(path):
        with pytest.raises(flexdb.LockedError):
            flexdb.open(path)


def test_reopen_keeps_data(path):
    with flexdb.open(path, memtable_mb=8) as db:
        for i in range(5000):
            db[b"%05d" % i] = b"v%d" % i
        ks = db.keyspace("ks")
        ks[b"x"] = b"y"
    with flexdb.open(path, create=False) as db:
        assert len(list(db)) == 5000
        assert db[b"04999"] == b"v4999"
        assert db.keyspace("ks")[b"x"] == b"y"
        assert db.check()["ok"]


def _reader(path, queue):
    try:
        with flexdb.open(path, read_only=True) as ro:
            first = ro.get(b"k")
            try:
                ro[b"x"] = b"y"
                wrote = True
            except flexdb.ReadOnlyError:
                wrote = False
            n = len(list(ro.keys(prefix=b"n")))
            queue.put(("ok", first, wrote, n, ro.read_only))
    except Exception as e:  # reported to the parent
        queue.put(("error", repr(e)))


def _catch_up_reader(path, queue, go, done):
    with flexdb.open(path, read_only=True) as ro:
        before = ro.get(b"later")
        queue.put(before)
        go.wait(60)
        ro.catch_up()
        queue.put(ro.get(b"later"))
    done.set()


def test_multiprocessing_read_only_reader_beside_writer(path):
    ctx = multiprocessing.get_context("spawn")
    with flexdb.open(path) as db:
        db[b"k"] = b"v"
        for i in range(100):
            db[b"n%03d" % i] = b"x"
        db.sync()
        q = ctx.Queue()
        p = ctx.Process(target=_reader, args=(path, q))
        p.start()
        result = q.get(timeout=120)
        p.join(120)
        assert result == ("ok", b"v", False, 100, True), result

        go, done = ctx.Event(), ctx.Event()
        p = ctx.Process(target=_catch_up_reader, args=(path, q, go, done))
        p.start()
        assert q.get(timeout=120) is None
        db[b"later"] = b"now"
        db.sync()
        go.set()
        assert q.get(timeout=120) == b"now"
        p.join(120)
        assert p.exitcode == 0


def test_read_only_of_missing_store_is_not_found(tmp_path):
    with pytest.raises(flexdb.NotFoundError):
        flexdb.open(str(tmp_path / "none"), read_only=True)


def test_reopen_while_objects_of_the_closed_store_live(path):
    db = flexdb.open(path, memtable_mb=8)
    for i in range(300):
        db[b"%03d" % i] = b"v"
    ks = db.keyspace("ks")
    ks[b"x"] = b"y"
    it = db.items()
    next(it)
    snap = db.snapshot()
    txn = db.transaction()
    txn[b"t"] = b"never committed"
    db.close()
    # The engine objects above were dropped with the store: it opens again.
    with flexdb.open(path, create=False) as db2:
        assert len(list(db2)) == 300 and b"t" not in db2
        assert db2.keyspace("ks")[b"x"] == b"y"
    for call in (lambda: ks[b"x"], lambda: next(it), lambda: snap.get(b"x"), lambda: txn.commit()):
        with pytest.raises(flexdb.ClosedError):
            call()
