//! The server over real TLS (a certificate made for the test): HSTS on HTTPS responses, and the
//! plain-HTTP listener of `--http-redirect-port` sending every request to HTTPS.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{http, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Cert {
    dir: std::path::PathBuf,
    der: Vec<u8>,
}

impl Cert {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("tutti-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("test setup: temp dir");
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()])
            .expect("test setup: make a certificate");
        std::fs::write(dir.join("cert.pem"), cert.cert.pem()).expect("test setup: cert");
        std::fs::write(dir.join("key.pem"), cert.key_pair.serialize_pem()).expect("test setup");
        Self {
            dir,
            der: cert.cert.der().to_vec(),
        }
    }
}

impl Drop for Cert {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free port on loopback (bound then released; the server binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("test setup: a free port")
}

#[tokio::test]
async fn https_carries_hsts_and_plain_http_is_redirected() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = Cert::new();
    let redirect_port = free_port();
    let server = TestServer::start(|c| {
        c.tls_cert = Some(cert.dir.join("cert.pem"));
        c.tls_key = Some(cert.dir.join("key.pem"));
        c.http_redirect_port = Some(redirect_port);
    })
    .await;
    assert!(server.url.starts_with("https://"), "{}", server.url);

    // HTTPS, trusting only the test's certificate.
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(cert.der.clone().into())
        .expect("test setup: trust the certificate");
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
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
