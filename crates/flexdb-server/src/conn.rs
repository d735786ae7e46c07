//! One client connection: read requests, run every complete one in the
//! buffer (pipelining), write the replies in order.
//!
//! Invariants: the bytes buffered plus those held by the frame in
//! progress never exceed the client's query-buffer limit (over it, or on
//! any protocol error: the replies owed so far, an error reply, and the
//! connection closes; other clients are untouched); replies leave in the
//! order their requests came; replies are written out at least every
//! `OUT_CHUNK` bytes, so a long pipeline does not pile up output; engine
//! calls run on the worker thread, one request at a time, and the wait
//! backpressure asks of their writes is awaited, never slept on the
//! worker (`Db::with_pace_deferred`); the client's
//! watches and registry entry are removed however the connection ends.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::commands::dispatch;
use crate::resp::{Limits, Parser, ProtocolError, Reply};
use crate::state::{ClientInfo, Session, Shared};

/// Replies are written out once this many bytes are pending.
const OUT_CHUNK: usize = 1 << 20;
/// Bytes read at once at least.
const READ_CHUNK: usize = 16 * 1024;
/// An idle buffer larger than this is given back.
const IDLE_KEEP: usize = 64 * 1024;

/// Removes a client from the registry and the count however its task
/// ends.
struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shared.clients.lock().remove(&self.id);
        self.shared.connected.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one accepted connection until it closes (the accept loop has
/// counted it in `Shared::connected`).
pub async fn serve(shared: Arc<Shared>, mut stream: TcpStream, addr: SocketAddr, id: u64) {
    let _ = stream.set_nodelay(true);
    let info = Arc::new(ClientInfo {
        addr,
        name: Mutex::new(Vec::new()),
        db: Default::default(),
        since: Instant::now(),
        last_cmd: Mutex::new("NULL"),
        killed: Default::default(),
        wake: Default::default(),
    });
    shared.clients.lock().insert(id, info.clone());
    let _registered = Registered {
        shared: &shared,
        id,
    };
    let authed = shared.runtime.read().requirepass.is_none();
    let mut session = Session::new(id, info.clone(), authed);
    if let Err(e) = session_loop(&shared, &mut stream, &mut session, &info).await {
        tracing::debug!(client = id, "connection ended: {e}");
    }
    session.unwatch(&shared);
}

async fn session_loop(
    shared: &Shared,
    stream: &mut TcpStream,
    session: &mut Session,
    info: &ClientInfo,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut parser = Parser::new();
    loop {
        if shared.shutting_down.load(Ordering::SeqCst) || info.killed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let limits = if session.authed {
            shared.runtime.read().limits
        } else {
            Limits::unauthenticated()
        };
        // Every complete request in the buffer.
        let mut requests = Vec::new();
        let mut consumed = 0;
        let mut failure: Option<ProtocolError> = None;
        loop {
            match parser.next(&buf[consumed..], &mut consumed, &limits) {
                Ok(Some(req)) => requests.push(req),
                Ok(None) => break,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        buf.drain(..consumed);
        if failure.is_none() && buf.len() + parser.held() > limits.max_query_buffer {
            failure = Some(ProtocolError("query buffer limit exceeded".into()));
        }
        run_requests(shared, stream, session, &requests).await?;
        if let Some(e) = failure {
            let mut out = Vec::new();
            Reply::err(e).encode(&mut out, session.proto);
            stream.write_all(&out).await?;
            return Ok(());
        }
        if session.quit {
            return Ok(());
        }
        if buf.is_empty() && buf.capacity() > IDLE_KEEP {
            buf = Vec::new();
        }
        buf.reserve(READ_CHUNK);
        tokio::select! {
            r = stream.read_buf(&mut buf) => {
                let n = r?;
                if n == 0 {
                    return Ok(());
                }
                shared.stats.net_in.fetch_add(n as u64, Ordering::Relaxed);
            }
            _ = info.wake.notified() => {}
        }
    }
}

/// Runs `requests` in order, writing their replies as they pile up.
async fn run_requests(
    shared: &Shared,
    stream: &mut TcpStream,
    session: &mut Session,
    requests: &[Vec<Vec<u8>>],
) -> std::io::Result<()> {
    let mut next = 0;
    while next < requests.len() && !session.quit {
        // On this worker thread: the store's calls are short (a write under
        // `always` waits for its log sync; `--threads` sets how many such
        // waits may overlap). `block_in_place` would hand the worker's other
        // connections to a new thread per call: measured, 500 connections
        // grew the process by ~80 MB of thread stacks and heaps.
        // No lock is held across an await: each request runs to its end.
        // Backpressure's wait for the writes is not slept on the worker
        // (it would stop every connection on it): it is awaited after the
        // replies, before this connection's next requests run.
        let (out, wait) = shared.db.with_pace_deferred(|| {
            let mut out = Vec::new();
            while next < requests.len() && out.len() < OUT_CHUNK && !session.quit {
                if let Some(reply) = dispatch(shared, session, &requests[next]) {
                    reply.encode(&mut out, session.proto);
                }
                next += 1;
            }
            out
        });
        shared
            .stats
            .net_out
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        stream.write_all(&out).await?;
        if !wait.is_zero() {
            shared.stats.pace_waits.fetch_add(1, Ordering::Relaxed);
            let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
            shared.stats.pace_wait_us.fetch_add(us, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
        }
    }
    Ok(())
}
