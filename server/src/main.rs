//! `tutti-server`: see `tutti-server --help` and the crate docs.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use tutti_server::{Config, Server};

#[tokio::main]
async fn main() -> ExitCode {
    tutti_server::memory::tune();
    tutti_server::log::init();
    let config = Config::parse();
    let all_interfaces = config.addr.is_unspecified();
    let server = match Server::bind(config).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("tutti-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Test harnesses wait for exactly this line on stdout.
    println!("Tutti is running at {}", server.url());
    let _ = std::io::stdout().flush();
    if all_interfaces {
        tracing::info!(
            "listening on all interfaces, port {} (reachable from other machines on the network)",
            server.local_addr().port()
        );
    }
    match server.run(shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tutti-server: the server failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("received SIGINT"),
        () = terminate => tracing::info!("received SIGTERM"),
    }
}
