//! The server over real TLS (the test certificate of tests/common/tls): HSTS on HTTPS responses, and the
//! plain-HTTP listener of `--http-redirect-port` sending every request to HTTPS.

mod common;

use std::time::Duration;

use common::{http, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A free port on loopback (bound then released; the server binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("test setup: a free port")
}

#[tokio::test]
async fn https_carries_hsts_and_plain_http_is_redirected() {
    let dir = common::tls_dir();
    let redirect_port = free_port();
    let server = TestServer::start(|c| {
        c.tls_cert = Some(dir.join("test-cert.pem"));
        c.tls_key = Some(dir.join("test-key.pem"));
        c.http_redirect_port = Some(redirect_port);
    })
    .await;
    assert!(server.url.starts_with("https://"), "{}", server.url);

    // HTTPS, trusting only the test CA.
    let connector = common::tls_client();
    let tcp = TcpStream::connect(server.addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a DNS name");
    let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .expect("send");
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut raw))
        .await
        .expect("response within 5 s");
    let text = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    assert!(
        text.contains("strict-transport-security: max-age=31536000"),
        "{text}"
    );

    // Plain HTTP on the redirect port: a 308 to the same path on HTTPS, same host.
    let plain = std::net::SocketAddr::from(([127, 0, 0, 1], redirect_port));
    let r = http(plain, "GET", "/r/warm-cello?x=1").await;
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location"),
        Some(format!("https://127.0.0.1:{}/r/warm-cello?x=1", server.addr.port()).as_str())
    );
    assert_eq!(r.header("strict-transport-security"), None);
}

#[tokio::test]
async fn a_redirect_port_without_tls_is_refused() {
    let dist = common::TempDist::new();
    let mut c = tutti_server::Config::with_dist(&dist.dist);
    c.port = 0;
    c.http_redirect_port = Some(free_port());
    let e = tutti_server::Server::bind(c)
        .await
        .err()
        .map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("--tls-cert")));
}
