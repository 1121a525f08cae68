//! Static files, headers, traversal and /api/config, against an in-process server.

mod common;

use common::{http, TestServer, INDEX, WASM};

const CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self' \
blob:; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: \
blob:; media-src 'self' blob:; font-src 'self'; manifest-src 'self'; object-src 'none'; \
base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

fn assert_security_headers(r: &common::HttpResponse, what: &str) {
    for (name, value) in [
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-embedder-policy", "require-corp"),
        ("cross-origin-resource-policy", "same-origin"),
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
    ] {
        assert_eq!(r.header(name), Some(value), "{name} on {what}");
    }
}

#[tokio::test]
async fn files_spa_routes_and_404_carry_headers_and_types() {
    let server = TestServer::start(|_| {}).await;
    let cases = [
        ("/", 200, "text/html; charset=utf-8", "no-cache"),
        ("/index.html", 200, "text/html; charset=utf-8", "no-cache"),
        ("/r/jam", 200, "text/html; charset=utf-8", "no-cache"),
        (
            "/r/jam/deeper?x=1",
            200,
            "text/html; charset=utf-8",
            "no-cache",
        ),
        (
            "/assets/app-1a2b3c.js",
            200,
            "text/javascript; charset=utf-8",
            "public, max-age=31536000, immutable",
        ),
        (
            "/assets/engine-4d5e.wasm",
            200,
            "application/wasm",
            "public, max-age=31536000, immutable",
        ),
        (
            "/manifest.webmanifest",
            200,
            "application/manifest+json",
            "no-cache",
        ),
        ("/sw.js", 200, "text/javascript; charset=utf-8", "no-cache"),
        ("/nope.js", 404, "text/plain; charset=utf-8", "no-cache"),
        ("/assets", 404, "text/plain; charset=utf-8", "no-cache"),
        ("/r", 404, "text/plain; charset=utf-8", "no-cache"),
    ];
    for (path, status, mime, cache) in cases {
        let r = http(server.addr, "GET", path).await;
        assert_eq!(r.status, status, "{path}");
        assert_eq!(r.header("content-type"), Some(mime), "{path}");
        assert_eq!(r.header("cache-control"), Some(cache), "{path}");
        assert_security_headers(&r, path);
    }
    assert_eq!(
        http(server.addr, "GET", "/r/x").await.body,
        INDEX.as_bytes()
    );
    assert_eq!(
        http(server.addr, "GET", "/assets/engine-4d5e.wasm")
            .await
            .body,
        WASM
    );

    let head = http(server.addr, "HEAD", "/assets/engine-4d5e.wasm").await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("application/wasm"));
    assert!(head.body.is_empty());
    assert_security_headers(&head, "HEAD");

    // A plain GET on /ws (no upgrade) is refused, with the headers too.
    let refused = http(server.addr, "GET", "/ws").await;
    assert!(refused.status >= 400, "{}", refused.status);
    assert_security_headers(&refused, "/ws refusal");
}

/// The service worker and the manifest are how an installed app finds a new release: they must
/// be revalidated on every use (never the year-long caching of hashed assets), with the MIME
/// types browsers require and the isolation headers, for GET, HEAD and with a query.
#[tokio::test]
async fn service_worker_and_manifest_are_revalidated() {
    let server = TestServer::start(|_| {}).await;
    for (path, mime, body) in [
        ("/sw.js", "text/javascript; charset=utf-8", &b"self"[..]),
        ("/sw.js?v=2", "text/javascript; charset=utf-8", &b"self"[..]),
        (
            "/manifest.webmanifest",
            "application/manifest+json",
            &b"{}"[..],
        ),
    ] {
        for method in ["GET", "HEAD"] {
            let r = http(server.addr, method, path).await;
            let what = format!("{method} {path}");
            assert_eq!(r.status, 200, "{what}");
            assert_eq!(r.header("content-type"), Some(mime), "{what}");
            assert_eq!(r.header("cache-control"), Some("no-cache"), "{what}");
            assert_security_headers(&r, &what);
            let expected: &[u8] = if method == "GET" { body } else { b"" };
            assert_eq!(r.body, expected, "{what}");
        }
    }
}

#[tokio::test]
async fn traversal_is_refused() {
    let server = TestServer::start(|_| {}).await;
    for path in [
        "/../secret.txt",
        "/assets/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/assets/%2e%2e/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/..%5csecret.txt",
        "/..\\secret.txt",
        "/index.html%00.js",
        "/r/../../secret.txt",
    ] {
        let r = http(server.addr, "GET", path).await;
        assert!(matches!(r.status, 400 | 404), "{path} gave {}", r.status);
        assert!(
            !String::from_utf8_lossy(&r.body).contains("secret"),
            "{path} leaked"
        );
        assert_security_headers(&r, path);
    }
}

#[tokio::test]
async fn api_config_reports_ice_servers_and_limits() {
    let ice = r#"[{"urls":"stun:stun.example.org:3478"},{"urls":["turn:turn.example.org:3478"],"username":"u","credential":"p"}]"#;
    let server = TestServer::start(|c| {
        c.ice_servers = ice.into();
        c.room_cap = 5;
    })
    .await;
    let r = http(server.addr, "GET", "/api/config").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_security_headers(&r, "/api/config");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON body");
    let expected: serde_json::Value = serde_json::from_str(ice).expect("test JSON");
    assert_eq!(v["iceServers"], expected);
    assert_eq!(v["roomCap"], 5);
    assert_eq!(v["heartbeatMs"], 1000);
}

/// Why the server refuses to start with `config` (it must refuse).
async fn bind_error(config: tutti_server::Config) -> String {
    match tutti_server::Server::bind(config).await {
        Ok(_) => panic!("the server started with a configuration it must refuse"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn bad_start_configurations_are_refused_clearly() {
    let missing = tutti_server::Config::with_dist("/nonexistent/tutti-dist");
    let e = bind_error(missing).await;
    assert!(e.contains("npm run build"), "{e}");

    let server = TestServer::start(|_| {}).await;
    let dist = common::TempDist::new();
    let mut clash = tutti_server::Config::with_dist(&dist.dist);
    clash.data_dir = dist.base.join("data");
    clash.port = server.addr.port();
    let e = bind_error(clash).await;
    assert!(
        e.contains(&server.addr.port().to_string()) && e.contains("--port"),
        "{e}"
    );

    let mut bad_ice = tutti_server::Config::with_dist(&dist.dist);
    bad_ice.ice_servers = "[{\"urls\":\"http://x\"}]".into();
    bind_error(bad_ice).await;

    // A data directory that is a file, and a damaged database.
    let mut not_a_dir = tutti_server::Config::with_dist(&dist.dist);
    not_a_dir.port = 0;
    not_a_dir.data_dir = dist.base.join("secret.txt");
    let e = bind_error(not_a_dir).await;
    assert!(
        e.contains("data directory") && e.contains("--no-persist"),
        "{e}"
    );
    let damaged = dist.base.join("damaged");
    std::fs::create_dir_all(&damaged).expect("test dir");
    std::fs::write(damaged.join("rooms.sqlite3"), [7u8; 4096]).expect("junk");
    let mut junk = tutti_server::Config::with_dist(&dist.dist);
    junk.port = 0;
    junk.data_dir = damaged;
    let e = bind_error(junk).await;
    assert!(e.contains("rooms.sqlite3") && e.contains("damaged"), "{e}");
}

#[tokio::test]
async fn turn_credentials_are_time_limited_hmacs_of_the_shared_secret() {
    use base64::Engine as _;
    use hmac::Mac as _;
    let secret = "a-secret-shared-with-coturn";
    let server = TestServer::start(|c| {
        c.turn_urls = "turn:turn.example.org:3478,turns:turn.example.org:5349".into();
        c.turn_secret = Some(secret.into());
        c.turn_ttl_secs = 600;
    })
    .await;
    let r = http(server.addr, "GET", "/api/config").await;
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON body");
    let turn = &v["iceServers"][0];
    assert_eq!(
        turn["urls"],
        serde_json::json!(["turn:turn.example.org:3478", "turns:turn.example.org:5349"])
    );
    let username = turn["username"].as_str().unwrap_or_default();
    let (expiry, user) = username.split_once(':').unwrap_or_default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let expiry: u64 = expiry.parse().unwrap_or_default();
    assert!(
        (now + 595..=now + 605).contains(&expiry),
        "expiry {expiry}, now {now}"
    );
    assert_eq!(user, "tutti");
    // What coturn computes to check it: base64(HMAC-SHA1(static-auth-secret, username)).
    let mut mac =
        hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(username.as_bytes());
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    assert_eq!(turn["credential"], expected);

    // Urls without a secret, or a short secret, do not start.
    let dist = common::TempDist::new();
    let mut no_secret = tutti_server::Config::with_dist(&dist.dist);
    no_secret.turn_urls = "turn:t".into();
    let e = bind_error(no_secret).await;
    assert!(e.contains("--turn-secret"), "{e}");
    let mut short = tutti_server::Config::with_dist(&dist.dist);
    short.turn_urls = "turn:t".into();
    short.turn_secret = Some("short".into());
    bind_error(short).await;
}
