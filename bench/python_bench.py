#!/usr/bin/env python3
"""Times FlexDB's Python binding against other embedded stores from Python.

One run, one machine, the same keys for every store: N random puts (each
its own write, visible when the call returns, not synced), N random gets
of present keys, one full ordered scan, and S range scans of 50 pairs from
random keys. Stores that are not installed are skipped, saying so.

    python bench/python_bench.py [--n 1000000] [--scans 100000] [--dir DIR]

Each store uses its documented fast settings:
- flexdb: defaults (writes not synced).
- lmdb: writemap, sync/metasync off, one write transaction per put, one
  read transaction reused for the gets and each scan; cursors for scans.
- rocksdict: defaults (WAL on, not synced); items(from_key=...) for scans.
- plyvel: defaults (not synced); iterator(start=...) for scans.
- sqlite3: a (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID table,
  journal_mode=WAL, synchronous=NORMAL, autocommit per put.
"""

import argparse
import itertools
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time

VALUE = b"v" * 100


def keys_for(n, seed):
    rng = random.Random(seed)
    ids = list(range(n))
    rng.shuffle(ids)
    return [b"key%013d" % i for i in ids]


class Flex:
    name = "flexdb"

    def __init__(self, path):
        import flexdb

        self.db = flexdb.open(path)

    def put_all(self, keys):
        put = self.db.put
        for k in keys:
            put(k, VALUE)

    def get_all(self, keys):
        get = self.db.get
        for k in keys:
            if get(k) is None:
                raise AssertionError(k)

    def scan(self):
        n = 0
        for _ in self.db.items():
            n += 1
        return n

    def ranges(self, starts, length):
        rng = self.db.range
        n = 0
        for s in starts:
            for _ in rng(start=s, limit=length):
                n += 1
        return n

    def close(self):
        self.db.close()


class Lmdb:
    name = "lmdb"

    def __init__(self, path):
        import lmdb

        self.env = lmdb.open(
            path, map_size=8 << 30, writemap=True, sync=False, metasync=False
        )

    def put_all(self, keys):
        begin = self.env.begin
        for k in keys:
            with begin(write=True) as txn:
                txn.put(k, VALUE)

    def get_all(self, keys):
        with self.env.begin(buffers=False) as txn:
            get = txn.get
            for k in keys:
                if get(k) is None:
                    raise AssertionError(k)

    def scan(self):
        n = 0
        with self.env.begin() as txn:
            for _ in txn.cursor().iternext():
                n += 1
        return n

    def ranges(self, starts, length):
        n = 0
        with self.env.begin() as txn:
            cur = txn.cursor()
            for s in starts:
                if not cur.set_range(s):
                    continue
                for _ in itertools.islice(cur.iternext(), length):
                    n += 1
        return n

    def close(self):
        self.env.close()


class RocksDict:
    name = "rocksdict"

    def __init__(self, path):
        import rocksdict

        self.db = rocksdict.Rdict(path)

    def put_all(self, keys):
        db = self.db
        for k in keys:
            db[k] = VALUE

    def get_all(self, keys):
        get = self.db.get
        for k in keys:
            if get(k) is None:
                raise AssertionError(k)

    def scan(self):
        n = 0
        for _ in self.db.items():
            n += 1
        return n

    def ranges(self, starts, length):
        n = 0
        items = self.db.items
        for s in starts:
            for _ in itertools.islice(items(from_key=s), length):
                n += 1
        return n

    def close(self):
        self.db.close()


class Plyvel:
    name = "plyvel"

    def __init__(self, path):
        import plyvel

        self.db = plyvel.DB(path, create_if_missing=True)

    def put_all(self, keys):
        put = self.db.put
        for k in keys:
            put(k, VALUE)

    def get_all(self, keys):
        get = self.db.get
        for k in keys:
            if get(k) is None:
                raise AssertionError(k)

    def scan(self):
        n = 0
        for _ in self.db.iterator():
            n += 1
        return n

    def ranges(self, starts, length):
        n = 0
        it = self.db.iterator
        for s in starts:
            for _ in itertools.islice(it(start=s), length):
                n += 1
        return n

    def close(self):
        self.db.close()


class Sqlite:
    name = "sqlite3"

    def __init__(self, path):
        os.makedirs(path, exist_ok=True)
        self.db = sqlite3.connect(os.path.join(path, "kv.db"), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")

    def put_all(self, keys):
        ex = self.db.execute
        for k in keys:
            ex("INSERT OR REPLACE INTO kv VALUES (?, ?)", (k, VALUE))

    def get_all(self, keys):
        ex = self.db.execute
        for k in keys:
            if ex("SELECT v FROM kv WHERE k = ?", (k,)).fetchone() is None:
                raise AssertionError(k)

    def scan(self):
        n = 0
        for _ in self.db.execute("SELECT k, v FROM kv ORDER BY k"):
            n += 1
        return n

    def ranges(self, starts, length):
        n = 0
        ex = self.db.execute
        q = "SELECT k, v FROM kv WHERE k >= ? ORDER BY k LIMIT %d" % length
        for s in starts:
            for _ in ex(q, (s,)):
                n += 1
        return n

    def close(self):
        self.db.close()


STORES = [Flex, Lmdb, RocksDict, Plyvel, Sqlite]


def timed(f, *args):
    t = time.perf_counter()
    r = f(*args)
    return time.perf_counter() - t, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--scans", type=int, default=100_000)
    ap.add_argument("--length", type=int, default=50)
    ap.add_argument("--dir", default=None, help="where the stores go (a temporary directory)")
    ap.add_argument("--only", default=None, help="comma-separated store names")
    args = ap.parse_args()

    put_keys = keys_for(args.n, 1)
    get_keys = keys_for(args.n, 2)
    rng = random.Random(3)
    starts = [b"key%013d" % rng.randrange(args.n) for _ in range(args.scans)]
    base = tempfile.mkdtemp(prefix="flexdb-pybench-", dir=args.dir)
    results = {}
    try:
        for cls in STORES:
            if args.only and cls.name not in args.only.split(","):
                continue
            path = os.path.join(base, cls.name)
            try:
                store = cls(path)
            except ImportError as e:
                print(f"{cls.name}: skipped ({e})", file=sys.stderr)
                continue
            r = {}
            r["puts"], _ = timed(store.put_all, put_keys)
            r["gets"], _ = timed(store.get_all, get_keys)
            r["scan"], n = timed(store.scan)
            if n != args.n:
                raise AssertionError(f"{cls.name}: scan saw {n} pairs, not {args.n}")
            r["ranges"], n = timed(store.ranges, starts, args.length)
            store.close()
            results[cls.name] = r
            print(
                f"{cls.name}: puts {r['puts']:.2f} s, gets {r['gets']:.2f} s, "
                f"scan {r['scan']:.2f} s, ranges {r['ranges']:.2f} s",
                file=sys.stderr,
            )
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    ops = [
        ("puts", args.n, f"{args.n:,} random puts"),
        ("gets", args.n, f"{args.n:,} random gets"),
        ("scan", args.n, f"full scan ({args.n:,} pairs)"),
        ("ranges", args.scans, f"{args.scans:,} scans of {args.length}"),
    ]
    names = list(results)
    print(f"| operation | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for op, count, label in ops:
        cells = []
        flex = results.get("flexdb", {}).get(op)
        for name in names:
            t = results[name][op]
            per = t / count * 1e9
            cell = f"{t:.2f} s ({per:,.0f} ns/op)"
            if flex is not None and name != "flexdb":
                cell += f", {t / flex:.2f}x flexdb"
            cells.append(cell)
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
