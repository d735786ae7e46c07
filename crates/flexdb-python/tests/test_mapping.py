"""The mapping API: every method, its errors, and the argument types."""

import pytest

import flexdb


def test_set_get_delete(db):
    db[b"a"] = b"1"
    assert db[b"a"] == b"1"
    assert b"a" in db
    del db[b"a"]
    assert b"a" not in db
    with pytest.raises(KeyError):
        db[b"a"]
    with pytest.raises(KeyError):
        del db[b"a"]


def test_str_is_utf8_and_results_are_bytes(db):
    db["ключ"] = "значение"
    assert db["ключ".encode()] == "значение".encode()
    assert db.get("ключ") == "значение".encode()
    assert isinstance(db["ключ"], bytes)
    assert "ключ" in db


@pytest.mark.parametrize("bad", [1, 1.5, None, object(), bytearray(b"x"), memoryview(b"x"), [b"x"]])
def test_other_types_are_type_errors(db, bad):
    with pytest.raises(TypeError):
        db[bad] = b"v"
    with pytest.raises(TypeError):
        db[b"k"] = bad
    with pytest.raises(TypeError):
        db.get(bad)
    with pytest.raises(TypeError):
        bad in db
    with pytest.raises(TypeError):
        db.put(b"k", bad)
    assert list(db) == []


def test_get_default(db):
    assert db.get(b"missing") is None
    assert db.get(b"missing", 7) == 7
    db.put(b"k", b"v")
    assert db.get(b"k", 7) == b"v"


def test_put_delete(db):
    db.put(b"k", b"v")
    db.delete(b"k")
    db.delete(b"k")  # absent: no error
    assert db.get(b"k") is None


def test_empty_key_and_value(db):
    db[b""] = b""
    assert db[b""] == b""
    assert list(db.items()) == [(b"", b"")]


def test_binary_keys_order(db):
    keys = [bytes([i, j]) for i in (0, 1, 127, 128, 255) for j in (0, 255)]
    for k in reversed(keys):
        db[k] = k
    assert list(db) == sorted(keys)


def test_pop(db):
    db[b"k"] = b"v"
    assert db.pop(b"k") == b"v"
    assert b"k" not in db
    with pytest.raises(KeyError):
        db.pop(b"k")
    assert db.pop(b"k", None) is None
    assert db.pop(b"k", b"d") == b"d"
    with pytest.raises(TypeError):
        db.pop(b"k", 1, 2)


def test_setdefault(db):
    assert db.setdefault(b"k", b"first") == b"first"
    assert db.setdefault(b"k", b"second") == b"first"
    assert db[b"k"] == b"first"
    with pytest.raises(TypeError):
        db.setdefault(b"j", 5)


def test_update_mapping_pairs_and_atomicity(db):
    db.update({b"a": b"1", "b": "2"})
    db.update([(b"c", b"3"), [b"d", b"4"]])
    db.update(x for x in [(b"e", b"5")])
    assert dict(db.items()) == {b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4", b"e": b"5"}
    # A bad pair anywhere: nothing of that update is written.
    with pytest.raises(TypeError):
        db.update([(b"f", b"6"), (b"g", 7)])
    with pytest.raises(TypeError):
        db.update([(b"h", b"8", b"extra")])
    assert b"f" not in db and b"h" not in db


def test_compare_and_swap(db):
    assert db.compare_and_swap(b"lock", None, b"me")
    assert not db.compare_and_swap(b"lock", None, b"you")
    assert not db.compare_and_swap(b"lock", b"you", b"x")
    assert db[b"lock"] == b"me"
    assert db.compare_and_swap(b"lock", b"me", None)
    assert b"lock" not in db


def test_delete_range(db):
    for i in range(100):
        db[b"log:%03d" % i] = b"x"
    db[b"other"] = b"y"
    db.delete_range(b"log:010", b"log:090")
    assert len(list(db.keys(prefix=b"log:"))) == 20
    db.delete_range(prefix=b"log:")
    assert list(db) == [b"other"]
    db.delete_range(b"b", b"a")  # empty: nothing
    db.delete_range()
    assert list(db) == []


def test_ttl(db):
    db.put(b"t", b"v", ttl=100)
    left = db.ttl(b"t")
    assert 99 < left <= 100
    db.put_with_ttl(b"u", b"v", 0.2)
    db[b"p"] = b"v"
    assert db.ttl(b"p") is None
    with pytest.raises(KeyError):
        db.ttl(b"missing")
    assert db.persist(b"t")
    assert db.ttl(b"t") is None
    assert db.expire(b"t", 50)
    assert not db.expire(b"missing", 50)
    import time

    time.sleep(0.4)
    assert b"u" not in db
    assert db.get(b"u") is None
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(flexdb.InvalidArgumentError):
            db.put(b"x", b"v", ttl=bad)
    with pytest.raises(TypeError):
        db.put(b"x", b"v", ttl="soon")


def test_limits_are_invalid_argument(db):
    with pytest.raises(flexdb.InvalidArgumentError) as e:
        db[b"k" * (flexdb.MAX_KEY_LEN + 1)] = b"v"
    assert "exceeds the limit" in str(e.value)
    assert isinstance(e.value, flexdb.Error)
    db[b"k" * flexdb.MAX_KEY_LEN] = b"v"
    assert db[b"k" * flexdb.MAX_KEY_LEN] == b"v"


def test_large_value_32_mib(db):
    big = bytes(range(256)) * (32 * 1024 * 1024 // 256)
    db[b"big"] = big
    assert db[b"big"] == big
    assert list(db.values()) == [big]
    db.flush()
    assert db[b"big"] == big


def test_stats_check_sync_flush(db):
    for i in range(1000):
        db[b"%04d" % i] = b"v"
    db.sync()
    db.flush()
    s = db.stats()
    assert isinstance(s, dict)
    assert s["pairs"] == 1000
    assert isinstance(s["snapshot_oldest_age"], float)
    c = db.check()
    assert c["ok"] is True and c["problems"] == [] and c["pairs"] == 1000


def test_exception_hierarchy():
    for name in [
        "ClosedError",
        "CorruptionError",
        "IoError",
        "NoSpaceError",
        "StoppedError",
        "LockedError",
        "ConflictError",
        "InvalidArgumentError",
        "NotFoundError",
        "AlreadyExistsError",
        "NotAStoreError",
        "ReadOnlyError",
        "NeedsUpgradeError",
        "UnstableError",
    ]:
        cls = getattr(flexdb, name)
        assert issubclass(cls, flexdb.Error), name
        assert cls.__doc__
    assert issubclass(flexdb.Error, Exception)


def test_open_errors(tmp_path):
    with pytest.raises(flexdb.NotFoundError) as e:
        flexdb.open(str(tmp_path / "none"), create=False)
    assert "no FlexDB store here" in str(e.value)
    p = str(tmp_path / "s")
    flexdb.open(p).close()
    with pytest.raises(flexdb.AlreadyExistsError):
        flexdb.open(p, error_if_exists=True)
    f = tmp_path / "file"
    f.write_bytes(b"not a store")
    with pytest.raises(flexdb.Error):
        flexdb.open(str(f))
    with pytest.raises(flexdb.InvalidArgumentError):
        flexdb.open(str(tmp_path / "tiny"), memtable_mb=0)
    # Far beyond the machine's memory: refused, not an abort.
    with pytest.raises(flexdb.InvalidArgumentError):
        flexdb.open(str(tmp_path / "huge"), cache_mb=2**40)
    with pytest.raises(flexdb.InvalidArgumentError):
        flexdb.open(str(tmp_path / "huge"), memtable_mb=2**40)
    with pytest.raises(OverflowError):
        flexdb.open(str(tmp_path / "negative"), cache_mb=-1)


def test_close_is_idempotent_and_closed_raises(path):
    db = flexdb.DB(path)
    db[b"k"] = b"v"
    it = db.items()
    snap = db.snapshot()
    ks = db.keyspace("other")
    assert not db.closed
    db.close()
    db.close()
    assert db.closed
    for call in [
        lambda: db[b"k"],
        lambda: db.get(b"k"),
        lambda: db.put(b"k", b"v"),
        lambda: b"k" in db,
        lambda: list(db),
        lambda: db.stats(),
        lambda: db.batch(),
        lambda: db.snapshot(),
        lambda: db.transaction(),
        lambda: ks[b"k"],
        lambda: next(it),
        lambda: snap.get(b"k"),
    ]:
        with pytest.raises(flexdb.ClosedError):
            call()
    assert "closed" in repr(db)


def test_context_manager_closes_and_reopen_keeps_data(path):
    with flexdb.open(path) as db:
        db[b"k"] = b"v"
        db.put(b"t", b"v", ttl=3600)
    assert db.closed
    with flexdb.open(path, create=False) as db:
        assert db[b"k"] == b"v"
        assert db.ttl(b"t") > 3500


def test_keyspaces(db):
    users = db.keyspace("users")
    users[b"alice"] = b"1"
    db[b"alice"] = b"default"
    assert users[b"alice"] == b"1"
    assert db[b"alice"] == b"default"
    assert users.name == "users" and db.name == "default"
    assert isinstance(db, flexdb.Keyspace)
    assert db.keyspaces() == ["default", "users"]
    assert list(users.items()) == [(b"alice", b"1")]
    with users.batch() as b:
        b[b"bob"] = b"2"
        b.put(b"carol", b"3", keyspace=db)
    assert list(users) == [b"alice", b"bob"]
    assert db[b"carol"] == b"3"
    assert db.keyspace("default")[b"alice"] == b"default"
    assert db.drop_keyspace("users")
    assert not db.drop_keyspace("users")
    with pytest.raises(flexdb.InvalidArgumentError):
        users[b"alice"]
    with pytest.raises(flexdb.InvalidArgumentError):
        db.keyspace("")


def test_docstrings_and_help():
    for obj in [flexdb, flexdb.DB, flexdb.open, flexdb.DB.get, flexdb.Keyspace.range, flexdb.Batch, flexdb.Transaction.commit]:
        assert obj.__doc__, obj
    import pydoc

    text = pydoc.plain(pydoc.render_doc(flexdb.DB))
    assert "compare_and_swap" in text
    assert "read_only" in text
