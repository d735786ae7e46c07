//! The Redis serialization protocol: requests in (`parse`), replies out
//! (`write`). Knows nothing of commands or of the store.

pub mod parse;
pub mod write;

pub use parse::{Parser, ProtocolError};
pub use write::Reply;

/// The sizes a request may reach; over one, the request is a protocol
/// error and its connection is closed.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The longest bulk string (Redis's `proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// The most elements of a multibulk frame.
    pub max_multibulk_len: usize,
    /// The most bytes one connection may have buffered, unparsed or held
    /// by the frame in progress (Redis's `client-query-buffer-limit`).
    pub max_query_buffer: usize,
}

impl Limits {
    /// The limits before a client has authenticated (as Redis: small
    /// frames only, so an unauthenticated peer cannot make the server
    /// hold much).
    pub fn unauthenticated() -> Self {
        Limits {
            max_bulk_len: 16 * 1024,
            max_multibulk_len: 10,
            max_query_buffer: 1024 * 1024,
        }
    }
}
