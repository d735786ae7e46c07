"""No memory leak over a million operations through the binding."""

import gc
import os
import threading

import flexdb


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def churn(db, rounds):
    """About 10 binding calls (objects, errors, iterators) per round."""
    for i in range(rounds):
        k = b"k%05d" % (i % 20000)
        db[k] = b"v" * 64
        db.get(k)
        k in db
        db.get(b"missing", None)
        try:
            db[b"missing"]
        except KeyError:
            pass
        try:
            db[1] = b"x"
        except TypeError:
            pass
        db.delete(k + b"x")
        if i % 50 == 0:
            for _ in db.range(start=k, stop=k + b"\xff"):
                pass
            with db.snapshot() as s:
                s.get(k)
            with db.batch() as b:
                b[k] = b"w"
            with db.transaction() as t:
                t[k] = t.get(k, b"")


def test_rss_stays_flat_over_a_million_operations(path):
    # The store's own caches and write buffer are bounded by these options.
    db = flexdb.open(path, memtable_mb=8, cache_mb=16)
    try:
        churn(db, 20_000)  # warm-up: caches, write buffers, allocator pools
        gc.collect()
        before = rss_bytes()
        churn(db, 100_000)  # about 10^6 calls
        gc.collect()
        growth = rss_bytes() - before
        assert growth < 50 * 1024 * 1024, f"RSS grew by {growth / 2**20:.1f} MiB"
    finally:
        db.close()


def test_objects_are_freed(path):
    import weakref  # noqa: F401 - pyclasses without weakref support: count objects instead

    db = flexdb.open(path, memtable_mb=8)
    try:
        gc.collect()
        start = len(gc.get_objects())
        for _ in range(1000):
            db.items()
            db.snapshot().close()
            db.transaction().rollback()
            db.batch()
        gc.collect()
        assert len(gc.get_objects()) - start < 100
    finally:
        db.close()
    assert threading.active_count() >= 1
