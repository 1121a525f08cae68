//! The compiled binary: the URL line on stdout, a WebSocket round trip, SIGTERM → exit 0, and
//! clear refusals of bad configurations.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Client, TempDist};

const BIN: &str = env!("CARGO_BIN_EXE_tutti-server");

fn command(dist: &std::path::Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--dist")
        .arg(dist)
        .arg("--data-dir")
        .arg(dist.with_file_name("data"))
        .env_remove("PORT")
        .env_remove("TUTTI_ADDR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[tokio::test]
async fn prints_its_url_serves_and_exits_0_on_sigterm() {
    let dist = TempDist::new();
    let mut child = command(&dist.dist)
        .args(["--port", "0"])
        .spawn()
        .expect("the binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("reads the URL line");
    let url = line
        .trim_end()
        .strip_prefix("Tutti is running at http://127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let port: u16 = url.trim_end_matches('/').parse().expect("a port number");
    assert_ne!(port, 0);
    assert!(url.ends_with('/'));

    let mut a = Client::connect(([127, 0, 0, 1], port).into()).await;
    a.join("jam", "Ana", 'a', '1', None).await;

    let started = Instant::now();
    let pid = child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let (code, texts) = a.closed().await;
    assert_eq!(code, Some(1001));
    assert!(texts.iter().any(|t| t["code"] == "shutting-down"));
    let status = tokio::task::spawn_blocking(move || {
        let status = child.wait();
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        (status, err)
    })
    .await
    .expect("wait task");
    let (status, stderr) = status;
    assert_eq!(status.expect("exit status").code(), Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        stderr.contains("join room=jam peer=aaaaaa… name=\"Ana\" members=1"),
        "{stderr}"
    );
    assert!(stderr.contains("received SIGTERM"), "{stderr}");
    // Lines start with a UTC timestamp like 2026-11-21T14:03:07Z.
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.len() > 21 && first.as_bytes()[10] == b'T' && &first[19..21] == "Z ",
        "{first}"
    );
}

fn run_to_end(mut cmd: Command) -> (Option<i32>, String, String) {
    let out = cmd.output().expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn refuses_bad_configurations_with_clear_messages() {
    let dist = TempDist::new();

    let missing = command(&dist.base.join("nope"));
    let (code, stdout, stderr) = run_to_end(missing);
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty());
    assert!(stderr.contains("npm run build"), "{stderr}");

    let mut ice = command(&dist.dist);
    ice.arg("--ice-servers").arg("[{\"urls\": 5}");
    let (code, _, stderr) = run_to_end(ice);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("--ice-servers"), "{stderr}");

    let mut half_tls = command(&dist.dist);
    half_tls.env("TUTTI_TLS_CERT", dist.base.join("cert.pem"));
    let (code, _, stderr) = run_to_end(half_tls);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("--tls-key"), "{stderr}");

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = taken.local_addr().expect("its address").port().to_string();
    let mut clash = command(&dist.dist);
    clash.args(["--port", &port]);
    let (code, _, stderr) = run_to_end(clash);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(&port) && stderr.contains("PORT="),
        "{stderr}"
    );

    let mut help = Command::new(BIN);
    help.arg("--help");
    let (code, stdout, _) = run_to_end(help);
    assert_eq!(code, Some(0));
    for flag in [
        "--addr",
        "--port",
        "--dist",
        "--tls-cert",
        "--tls-key",
        "--room-cap",
        "--ice-servers",
        "--max-message-bytes",
        "--rate",
        "--burst",
        "--heartbeat-ms",
        "--heartbeat-timeout-ms",
        "--max-connections",
        "--data-dir",
        "--no-persist",
        "--room-retention-hours",
        "--password-free-failures",
        "--password-backoff-ms",
        "--password-backoff-max-ms",
        "TUTTI_DATA_DIR",
        "TUTTI_ICE_SERVERS",
        "PORT",
    ] {
        assert!(stdout.contains(flag), "--help lacks {flag}");
    }
}
