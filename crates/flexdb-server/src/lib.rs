//! flexdb-server: a Redis-protocol (RESP2/RESP3) server over a FlexDB
//! store, so Redis clients, tools and benchmarks drive the store
//! unchanged.
//!
//! Layers, each knowing only those below it: `resp` (bytes to requests,
//! replies to bytes: no commands, no store), `commands` (Redis semantics
//! on the store's keyspaces, deadlines, batches and range deletes),
//! `conn` (one client: pipelining, limits), `server` (listener, clients,
//! durability schedule, shutdown). The store never learns it is behind a
//! Redis protocol: the server uses only its public API.

pub mod commands;
pub mod config;
pub mod conn;
pub mod cursor;
pub mod glob;
pub mod locks;
pub mod resp;
pub mod server;
pub mod state;
pub mod watch;

/// The Redis version clients are told (the command set follows it).
pub const REDIS_VERSION: &str = "7.2.0";
