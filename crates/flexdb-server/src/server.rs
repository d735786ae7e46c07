//! The listener and the server's life: open the store, accept clients
//! (up to `maxclients`), sync the log once a second under `everysec`, and
//! shut down on SIGTERM, SIGINT or SHUTDOWN.
//!
//! Invariants: shutdown stops accepting first, then waits (up to
//! `DRAIN_TIMEOUT`) for every connection to answer the requests it has
//! read, then closes the store (which writes its memory tables and syncs
//! its log); a refused client gets `-ERR max number of clients reached`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::config::{AppendFsync, Config};
use crate::state::Shared;

/// How long shutdown waits for connections to finish.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The store could not be opened or closed.
    #[error("store: {0}")]
    Store(#[from] flexdb::Error),
    /// Another I/O failure (signals, the port file).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Runs the server until it is shut down.
pub async fn run(config: Config) -> Result<(), ServerError> {
    let addr = format!("{}:{}", config.bind, config.port);
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|source| ServerError::Bind {
            addr: addr.clone(),
            source,
        })?;
    let local = listener.local_addr()?;
    let dir = config.store_dir();
    let port_file = config.port_file.clone();
    let shared = Arc::new(tokio::task::block_in_place(|| Shared::open(config, local))?);
    if let Some(path) = port_file {
        std::fs::write(path, format!("{}\n", local.port()))?;
    }
    tracing::info!(
        "flexdb-server listening on {local}, store in {}",
        dir.display()
    );
    println!("flexdb-server listening on {local}");

    let syncer = (shared.config.appendfsync == AppendFsync::Everysec).then(|| {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let db = shared.clone();
                match tokio::task::spawn_blocking(move || db.db.sync()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::error!("everysec sync failed: {e}"),
                    Err(e) => tracing::error!("everysec sync task failed: {e}"),
                }
            }
        })
    });
    {
        let shared = shared.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("signal received: shutting down");
            shared.begin_shutdown();
        });
    }

    let mut conns = JoinSet::new();
    let mut stop = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let (mut stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors and the like: back off, keep serving.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                shared.stats.connections.fetch_add(1, Ordering::Relaxed);
                if shared.connected.load(Ordering::SeqCst) >= shared.runtime.read().maxclients {
                    shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(async move {
                        let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                    });
                    continue;
                }
                shared.connected.fetch_add(1, Ordering::SeqCst);
                let id = shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
                conns.spawn(crate::conn::serve(shared.clone(), stream, peer, id));
            }
        }
    }
    drop(listener);
    shared.begin_shutdown();
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("connections still open after {DRAIN_TIMEOUT:?}: closing anyway");
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    }
    if let Some(s) = syncer {
        s.abort();
        let _ = s.await;
    }
    match Arc::try_unwrap(shared) {
        Ok(shared) => tokio::task::block_in_place(|| shared.db.close())?,
        Err(shared) => tokio::task::block_in_place(|| {
            shared.db.flush()?;
            shared.db.sync()
        })?,
    }
    tracing::info!("flexdb-server stopped");
    Ok(())
}

/// Waits for SIGTERM or SIGINT.
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!("cannot watch signals: only SHUTDOWN stops the server");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
