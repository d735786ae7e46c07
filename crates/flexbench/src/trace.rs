//! Where the engines' diagnostic events go: the libraries emit them through
//! `tracing` and never print; this binary installs the one subscriber that
//! writes them to stderr, when asked.
//!
//! Invariant: without `--trace`, `FLEXDB_TRACE` or `RUST_LOG`, no
//! subscriber is installed, so the libraries' `tracing::enabled!` checks
//! answer no and they gather none of the figures that only tracing needs.

use tracing_subscriber::EnvFilter;

/// The filter `--trace` stands for.
const TRACE_FILTER: &str = "flexdb=debug,flexspace=debug";

/// Installs the stderr subscriber if `flag`, `FLEXDB_TRACE` or `RUST_LOG`
/// asks for one.
pub fn install(flag: bool) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(f) if !f.is_empty() => f,
        _ if flag || std::env::var_os("FLEXDB_TRACE").is_some() => TRACE_FILTER.to_owned(),
        _ => return,
    };
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_target(true)
        .finish();
    // Only fails if a subscriber is already installed, which is then kept.
    let _ = tracing::subscriber::set_global_default(subscriber);
}
