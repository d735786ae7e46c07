"""FlexDB: an embedded, ordered key-value store.

Open a store with ``flexdb.open(path)`` (or ``flexdb.DB(path)``); it maps
bytes keys to bytes values in key order, on disk in the directory
``path``::

    import flexdb

    with flexdb.open("/tmp/store") as db:
        db[b"fruit:apple"] = b"red"
        with db.batch() as b:          # atomic
            b[b"fruit:pear"] = b"green"
        for key, value in db.range(prefix=b"fruit:"):
            print(key, value)

See ``help(flexdb.DB)``, ``help(flexdb.Keyspace)`` and docs/PYTHON.md.
"""

from ._flexdb import (
    DB,
    MAX_KEY_LEN,
    MAX_VALUE_LEN,
    AlreadyExistsError,
    Batch,
    ClosedError,
    ConflictError,
    CorruptionError,
    Error,
    InvalidArgumentError,
    IoError,
    Iterator,
    Keyspace,
    LockedError,
    NeedsUpgradeError,
    NoSpaceError,
    NotAStoreError,
    NotFoundError,
    ReadOnlyError,
    Snapshot,
    StoppedError,
    Transaction,
    TransactionKeyspace,
    UnstableError,
    __version__,
    open,
)

__all__ = [
    "DB",
    "MAX_KEY_LEN",
    "MAX_VALUE_LEN",
    "AlreadyExistsError",
    "Batch",
    "ClosedError",
    "ConflictError",
    "CorruptionError",
    "Error",
    "InvalidArgumentError",
    "IoError",
    "Iterator",
    "Keyspace",
    "LockedError",
    "NeedsUpgradeError",
    "NoSpaceError",
    "NotAStoreError",
    "NotFoundError",
    "ReadOnlyError",
    "Snapshot",
    "StoppedError",
    "Transaction",
    "TransactionKeyspace",
    "UnstableError",
    "__version__",
    "open",
]
