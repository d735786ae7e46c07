//! The `flexdb-server` binary: parse flags, start logging and the tokio
//! runtime, run the server; exit non-zero with a message when it cannot.

use clap::Parser as _;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let args = match flexdb_server::config::with_config_file(std::env::args().collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("flexdb-server: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let config = flexdb_server::config::Config::parse_from(args);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads())
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flexdb-server: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(flexdb_server::server::run(config)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flexdb-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
