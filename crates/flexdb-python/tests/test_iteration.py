"""Ordered iteration, ranges, snapshots, and iterating while writing."""

import threading

import pytest

import flexdb


def fill(db, n=200):
    for i in range(n):
        db[b"k%04d" % i] = b"v%d" % i


def test_keys_values_items_order(db):
    fill(db)
    keys = [b"k%04d" % i for i in range(200)]
    assert list(db) == keys
    assert list(db.keys()) == keys
    assert list(db.values()) == [b"v%d" % i for i in range(200)]
    assert list(db.items()) == [(k, b"v%d" % i) for i, k in enumerate(keys)]
    assert list(db.keys(reverse=True)) == keys[::-1]


def test_range_bounds_and_prefix(db):
    fill(db)
    assert [k for k, _ in db.range(b"k0010", b"k0013")] == [b"k0010", b"k0011", b"k0012"]
    assert [k for k, _ in db.range(start=b"k0198")] == [b"k0198", b"k0199"]
    assert [k for k, _ in db.range(stop=b"k0002")] == [b"k0000", b"k0001"]
    assert [k for k, _ in db.range(b"k0005", b"k0002")] == []
    assert len(list(db.range(prefix=b"k01"))) == 100
    assert [k for k, _ in db.range(prefix=b"k01", start=b"k0195")] == [b"k0195", b"k0196", b"k0197", b"k0198", b"k0199"]
    assert [k for k, _ in db.range(prefix=b"k01", stop=b"k0102")] == [b"k0100", b"k0101"]
    assert [k for k, _ in db.range(b"k0010", b"k0013", reverse=True)] == [b"k0012", b"k0011", b"k0010"]
    assert list(db.keys(prefix="k000", reverse=True))[:2] == [b"k0009", b"k0008"]
    with pytest.raises(TypeError):
        db.range(start=5)


def test_limit_yields_at_most_that_many_from_every_reader(db):
    fill(db)
    keys = [b"k%04d" % i for i in range(200)]
    assert list(db.keys(limit=3)) == keys[:3]
    assert list(db.keys(limit=0)) == []
    assert list(db.keys(limit=1000)) == keys
    assert list(db.values(start=b"k0198", limit=5)) == [b"v198", b"v199"]
    assert [k for k, _ in db.items(reverse=True, limit=2)] == keys[:-3:-1]
    assert [k for k, _ in db.range(b"k0010", b"k0100", limit=70)] == keys[10:80]
    db[b"k0001"] = b"new"
    with db.snapshot() as s:
        assert list(s.items(limit=2)) == [(b"k0000", b"v0"), (b"k0001", b"new")]
    with db.transaction() as t:
        t[b"a"] = b"own"
        assert list(t.keys(limit=2)) == [b"a", b"k0000"]
        assert list(t.range(start=b"k0199", limit=5)) == [(b"k0199", b"v199")]
    users = db.keyspace("users")
    users[b"u1"] = b"1"
    users[b"u2"] = b"2"
    assert list(users.keys(limit=1)) == [b"u1"]
    with pytest.raises(OverflowError):
        db.keys(limit=-1)


def test_prefix_of_ff_bytes(db):
    db[b"\xff\xff"] = b"1"
    db[b"\xff\xff\x00"] = b"2"
    db[b"\xfe"] = b"3"
    assert list(db.keys(prefix=b"\xff\xff")) == [b"\xff\xff", b"\xff\xff\x00"]
    assert list(db.keys(prefix=b"")) == [b"\xfe", b"\xff\xff", b"\xff\xff\x00"]


def test_iterators_are_lazy_snapshots(db):
    fill(db, 3000)
    it = db.items()
    first = next(it)
    # Writes while iterating: neither seen nor breaking the iterator.
    db.delete_range()
    for i in range(3000):
        db[b"new%04d" % i] = b"x"
    rest = list(it)
    assert first == (b"k0000", b"v0")
    assert len(rest) == 2999
    assert all(k.startswith(b"k") for k, _ in rest)
    assert list(db.keys(prefix=b"k")) == []


def test_iterate_while_writing_each_step(db):
    fill(db, 2000)
    seen = []
    for k in db.keys():
        seen.append(k)
        db[b"z" + k] = b"added during the scan"
        del db[k]
    assert seen == [b"k%04d" % i for i in range(2000)]
    assert len(list(db)) == 2000


def test_iterator_close_and_repr(db):
    fill(db, 10)
    it = db.keys()
    assert next(it) == b"k0000"
    it.close()
    assert list(it) == []
    assert "keys" in repr(db.keys())


def test_concurrent_next_on_one_iterator(db):
    fill(db, 20000)
    it = db.keys()
    out = []
    lock = threading.Lock()

    def run():
        local = []
        for k in it:
            local.append(k)
        with lock:
            out.extend(local)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == sorted(b"k%04d" % i for i in range(20000))


def test_snapshot(db):
    db[b"k"] = b"old"
    with db.snapshot() as s:
        db[b"k"] = b"new"
        db[b"j"] = b"added"
        assert s[b"k"] == b"old"
        assert s.get(b"j") is None and s.get(b"j", 1) == 1
        assert b"j" not in s
        assert list(s) == [b"k"]
        assert list(s.items()) == [(b"k", b"old")]
        assert list(s.values(reverse=True)) == [b"old"]
        with pytest.raises(KeyError):
            s[b"j"]
        it = s.keys()
    with pytest.raises(flexdb.ClosedError):
        s.get(b"k")
    # An iterator made from a snapshot outlives the snapshot's close.
    assert list(it) == [b"k"]


def test_snapshot_of_keyspace(db):
    logs = db.keyspace("logs")
    logs[b"k"] = b"1"
    s = db.snapshot()
    logs[b"k"] = b"2"
    assert s.keyspace(logs)[b"k"] == b"1"
    assert s.keyspace(db).get(b"k") is None
    s.close()
    s.close()


def test_iteration_over_committed_and_fresh_pairs_matches_a_model(db):
    # Pairs lent from the space (after a flush) and from the MemTable,
    # overwritten and deleted across both, forward and backward, in
    # chunks of every size around the engine's 64.
    import random

    rng = random.Random(7)
    model = {}
    for i in range(3000):
        k = b"k%05d" % rng.randrange(5000)
        model[k] = db[k] = b"v%d" % i * rng.randrange(1, 40)
    db.flush()
    for i in range(2000):
        k = b"k%05d" % rng.randrange(5000)
        if rng.random() < 0.3:
            model.pop(k, None)
            db.pop(k, None)
        else:
            model[k] = db[k] = b"w%d" % i
    keys = sorted(model)
    assert list(db.items()) == [(k, model[k]) for k in keys]
    assert list(db.values(reverse=True)) == [model[k] for k in reversed(keys)]
    for _ in range(50):
        start = b"k%05d" % rng.randrange(5000)
        n = rng.choice([1, 50, 63, 64, 65, 200])
        got = []
        for k, v in db.range(start=start):
            got.append((k, v))
            if len(got) == n:
                break
        want = [(k, model[k]) for k in keys if k >= start][:n]
        assert got == want
    it = db.keys(prefix=b"k0")
    assert list(it) == [k for k in keys if k.startswith(b"k0")]
    # An exhausted iterator stays exhausted.
    assert list(it) == []
    with pytest.raises(StopIteration):
        next(it)
