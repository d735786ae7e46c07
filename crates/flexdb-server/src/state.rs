//! What every connection shares (the store, its sixteen databases, the
//! locks, watches, cursors, clients and counters) and what one connection
//! keeps for itself (its session).
//!
//! Invariants: database `n` (0–15) is the keyspace `DB_NAMES[n]` (0 is the
//! store's default keyspace, so a store written by the library's plain
//! `put` is database 0); handles are opened once at start and never
//! dropped, so no command ever opens or drops a keyspace; a client is in
//! the registry exactly while its connection task runs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use flexdb::{Db, Keyspace};
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::config::{AppendFsync, Config, Runtime};
use crate::cursor::Cursors;
use crate::locks::Locks;
use crate::watch::{Dirty, Watches};

/// How many databases SELECT reaches.
pub const DATABASES: usize = 16;

/// The keyspace of database `n`.
pub fn db_name(n: usize) -> String {
    if n == 0 {
        flexdb::DEFAULT_KEYSPACE.to_string()
    } else {
        format!("db{n}")
    }
}

/// A connected client as CLIENT LIST shows it.
pub struct ClientInfo {
    /// The peer's address.
    pub addr: SocketAddr,
    /// Its name (CLIENT SETNAME).
    pub name: Mutex<Vec<u8>>,
    /// Its current database.
    pub db: AtomicU64,
    /// When it connected.
    pub since: Instant,
    /// Its last command's name.
    pub last_cmd: Mutex<&'static str>,
    /// Set by CLIENT KILL: the connection closes.
    pub killed: AtomicBool,
    /// Woken by CLIENT KILL.
    pub wake: Notify,
}

/// Counters for INFO.
#[derive(Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused (maxclients).
    pub rejected: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Reads that found their key.
    pub hits: AtomicU64,
    /// Reads that found none.
    pub misses: AtomicU64,
    /// Bytes read from clients.
    pub net_in: AtomicU64,
    /// Bytes written to clients.
    pub net_out: AtomicU64,
    /// Times a connection waited, before running its next requests, for
    /// writes the store slowed (backpressure: `conn::run_requests`).
    pub pace_waits: AtomicU64,
    /// Microseconds those waits took together.
    pub pace_wait_us: AtomicU64,
}

impl Stats {
    /// Zeroes every counter (`CONFIG RESETSTAT`). Each is zeroed on its
    /// own: an event counted while this runs may survive or be lost, as
    /// in Redis.
    pub fn reset(&self) {
        for c in [
            &self.connections,
            &self.rejected,
            &self.commands,
            &self.hits,
            &self.misses,
            &self.net_in,
            &self.net_out,
            &self.pace_waits,
            &self.pace_wait_us,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// The server's shared state.
pub struct Shared {
    /// The store.
    pub db: Db,
    /// Database n's keyspace.
    pub dbs: Vec<Keyspace>,
    /// The flags it started with.
    pub config: Config,
    /// Settings CONFIG SET changes.
    pub runtime: RwLock<Runtime>,
    /// Key locks.
    pub locks: Locks,
    /// Watched keys.
    pub watches: Watches,
    /// SCAN cursors.
    pub cursors: Cursors,
    /// Connected clients by id.
    pub clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
    /// Connections accepted and not yet closed (counted at accept, so a
    /// burst of connections cannot pass `maxclients`).
    pub connected: std::sync::atomic::AtomicUsize,
    /// The last client id given.
    pub next_id: AtomicU64,
    /// Counters.
    pub stats: Stats,
    /// When the server started.
    pub started: Instant,
    /// Unix time of the last SAVE (or the start).
    pub last_save: AtomicU64,
    /// Set once shutdown began: connections finish what they have read
    /// and close.
    pub shutting_down: AtomicBool,
    /// Becomes `true` when shutdown begins.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// The address listened on.
    pub local_addr: SocketAddr,
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Milliseconds since the Unix epoch.
pub fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Shared {
    /// Opens the store in the configured directory with its sixteen
    /// databases.
    pub fn open(config: Config, local_addr: SocketAddr) -> Result<Shared, flexdb::Error> {
        let dir = config.store_dir();
        if let Err(source) = std::fs::create_dir_all(&dir) {
            return Err(flexdb::Error::Io { file: dir, source });
        }
        let opts = flexdb::Options::new()
            .create_if_missing(true)
            .cache_bytes(config.cache_mb.saturating_mul(1024 * 1024))
            .memtable_bytes(config.memtable_mb.saturating_mul(1024 * 1024))
            .max_frozen_memtables(usize::from(config.max_frozen_memtables))
            .mmap_reads(config.mmap_reads == crate::config::YesNo::Yes)
            .sync_writes(config.appendfsync == AppendFsync::Always);
        let db = Db::open(&dir, opts)?;
        let dbs = (0..DATABASES)
            .map(|n| db.keyspace(&db_name(n)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Shared {
            db,
            dbs,
            runtime: RwLock::new(Runtime::from_config(&config)),
            config,
            locks: Locks::new(),
            watches: Watches::default(),
            cursors: Cursors::default(),
            clients: Mutex::new(BTreeMap::new()),
            connected: Default::default(),
            next_id: AtomicU64::new(0),
            stats: Stats::default(),
            started: Instant::now(),
            last_save: AtomicU64::new(unix_now()),
            shutting_down: AtomicBool::new(false),
            shutdown: tokio::sync::watch::Sender::new(false),
            local_addr,
        })
    }

    /// Begins shutdown: the listener stops accepting and every
    /// connection closes once its commands in flight are answered.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.shutdown.send_replace(true);
        for c in self.clients.lock().values() {
            c.wake.notify_one();
        }
    }
}

/// One connection's state.
pub struct Session {
    /// Its client id.
    pub id: u64,
    /// Its entry in the registry.
    pub info: Arc<ClientInfo>,
    /// The selected database.
    pub db: usize,
    /// Whether it has authenticated (or no password is required).
    pub authed: bool,
    /// The protocol version of its replies (2 or 3).
    pub proto: u8,
    /// Commands queued since MULTI (`None`: not in MULTI).
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// Whether a command queued since MULTI was refused (EXEC aborts).
    pub multi_failed: bool,
    /// The keys it watches.
    pub watched: Vec<(usize, Vec<u8>)>,
    /// The watched keys that were live when watched: EXEC fails if one
    /// is gone without a write (it expired), as in Redis 7.
    pub watched_live: Vec<(usize, Vec<u8>)>,
    /// Set when a watched key is written.
    pub dirty: Dirty,
    /// Set by QUIT: close after the reply.
    pub quit: bool,
}

impl Session {
    /// A session for client `id`.
    pub fn new(id: u64, info: Arc<ClientInfo>, authed: bool) -> Session {
        Session {
            id,
            info,
            db: 0,
            authed,
            proto: 2,
            multi: None,
            multi_failed: false,
            watched: Vec::new(),
            watched_live: Vec::new(),
            dirty: Arc::new(AtomicBool::new(false)),
            quit: false,
        }
    }

    /// Drops every watch (UNWATCH, EXEC, DISCARD, disconnect).
    pub fn unwatch(&mut self, shared: &Shared) {
        shared.watches.unwatch(self.id, &self.watched);
        self.watched.clear();
        self.watched_live.clear();
        self.dirty.store(false, Ordering::SeqCst);
    }
}
