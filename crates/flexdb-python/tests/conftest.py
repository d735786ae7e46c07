"""Shared fixtures of the flexdb Python tests."""

import pytest

import flexdb


@pytest.fixture
def path(tmp_path):
    """A fresh directory for a store."""
    return str(tmp_path / "store")


@pytest.fixture
def db(path):
    """An open store with a small write buffer, closed after the test."""
    store = flexdb.open(path, memtable_mb=8, cache_mb=32)
    yield store
    store.close()
