"""Batches and transactions, including the bank-transfer invariant over threads."""

import random
import threading

import pytest

import flexdb


def test_batch_commits_on_exit(db):
    db[b"gone"] = b"x"
    with db.batch() as b:
        b[b"a"] = b"1"
        b.put(b"b", b"2")
        b.put(b"t", b"3", ttl=100)
        del b[b"gone"]
        assert len(b) == 4
        assert b"a" not in db  # nothing before the exit
    assert dict(db.items()) == {b"a": b"1", b"b": b"2", b"t": b"3"}
    with pytest.raises(flexdb.ClosedError):
        b.put(b"c", b"3")


def test_batch_discarded_on_exception(db):
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            b[b"a"] = b"1"
            raise RuntimeError("boom")
    assert b"a" not in db


def test_batch_write_clear_delete_range(db):
    b = db.batch()
    for i in range(10):
        b.put(b"%d" % i, b"v")
    b.write()
    assert len(b) == 0
    b.delete_range(b"2", b"5")
    b.put(b"x", b"y")
    b.clear()
    b.delete_range(prefix=b"1")
    b.write()
    assert list(db) == [b"0", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9"]
    with pytest.raises(TypeError):
        b.put(1, b"x")
    with pytest.raises(flexdb.InvalidArgumentError):
        b.put(b"k" * (flexdb.MAX_KEY_LEN + 1), b"x")


def test_transaction_commit_and_read_own_writes(db):
    db[b"a"] = b"10"
    with db.transaction() as t:
        assert t.isolation == "serializable"
        t[b"a"] = b"7"
        t.put(b"b", b"3")
        assert t[b"a"] == b"7"
        assert list(t.items()) == [(b"a", b"7"), (b"b", b"3")]
        assert db[b"a"] == b"10"
        del t[b"b"]
        assert b"b" not in t
        with pytest.raises(KeyError):
            del t[b"missing"]
    assert t.closed
    assert db[b"a"] == b"7" and b"b" not in db
    with pytest.raises(flexdb.ClosedError):
        t.get(b"a")


def test_transaction_rolls_back_on_exception(db):
    with pytest.raises(ValueError):
        with db.transaction() as t:
            t[b"a"] = b"1"
            raise ValueError("no")
    assert b"a" not in db


def test_transaction_conflict(db):
    db[b"x"] = b"0"
    with pytest.raises(flexdb.ConflictError) as e:
        with db.transaction() as t:
            t[b"x"] = t[b"x"] + b"1"
            db[b"x"] = b"other"
    assert "conflict" in str(e.value)
    assert db[b"x"] == b"other"
    t2 = db.transaction(isolation="snapshot")
    assert t2.isolation == "snapshot"
    t2.rollback()
    with pytest.raises(ValueError):
        db.transaction(isolation="bogus")


def test_transaction_across_keyspaces(db):
    src, dst = db.keyspace("from"), db.keyspace("to")
    src[b"job"] = b"data"
    with db.transaction() as t:
        v = t.keyspace(src)[b"job"]
        t.keyspace(dst)[b"job"] = v
        t.keyspace(src).delete(b"job")
        assert list(t.keyspace(dst).items()) == [(b"job", b"data")]
    assert b"job" not in src and dst[b"job"] == b"data"
    with src.transaction() as t:
        t[b"k"] = b"in src"
        t.delete_range(prefix=b"z")
    assert src[b"k"] == b"in src"


def test_bank_transfers_keep_the_total_over_8_threads(db):
    accounts = 20
    for i in range(accounts):
        db[b"acct%02d" % i] = b"1000"
    conflicts = [0]
    done = [0]
    lock = threading.Lock()

    def worker(seed):
        rng = random.Random(seed)
        for _ in range(150):
            a, b = rng.sample(range(accounts), 2)
            amount = rng.randint(1, 50)
            while True:
                try:
                    with db.transaction() as t:
                        ka, kb = b"acct%02d" % a, b"acct%02d" % b
                        va, vb = int(t[ka]), int(t[kb])
                        t[ka] = str(va - amount)
                        t[kb] = str(vb + amount)
                    break
                except flexdb.ConflictError:
                    with lock:
                        conflicts[0] += 1
            with lock:
                done[0] += 1

    def auditor():
        # Every snapshot sees a consistent total.
        for _ in range(50):
            with db.snapshot() as s:
                assert sum(int(v) for v in s.values(prefix=b"acct")) == accounts * 1000

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    threads.append(threading.Thread(target=auditor))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert done[0] == 8 * 150
    assert sum(int(v) for v in db.values(prefix=b"acct")) == accounts * 1000


def test_threads_share_one_store(db):
    def writer(n):
        for i in range(2000):
            db[b"t%d-%05d" % (n, i)] = b"v"
            assert db[b"t%d-%05d" % (n, i)] == b"v"

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(db)) == 16000


def test_close_while_threads_read(path):
    db = flexdb.open(path, memtable_mb=8)
    for i in range(1000):
        db[b"%04d" % i] = b"v"
    errors = []

    def reader():
        try:
            while True:
                db.get(b"0001")
                list(db.keys(prefix=b"00"))
        except flexdb.ClosedError:
            pass
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    db.close()
    for t in threads:
        t.join()
    assert errors == []
