//! The built app as the compiled server sends it: byte ranges, revalidation (ETag and
//! Last-Modified with 304s), no precompressed siblings, large files, with Tutti's types,
//! caching rules and security headers on every kind of response, and the path rules (SPA
//! routes, 404s, refused traversal and malformed escapes) in front of them.

mod common;

use std::net::SocketAddr;

use common::{http, http_with, BinaryServer, HttpResponse, TempDist, INDEX, WASM};

/// The test dist's `assets/app-1a2b3c.js`.
const APP_JS: &[u8] = b"console.log(1)";
const JS: &str = "text/javascript; charset=utf-8";
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

fn assert_security_headers(r: &HttpResponse, what: &str) {
    for (name, value) in [
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-embedder-policy", "require-corp"),
        ("cross-origin-resource-policy", "same-origin"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
    ] {
        assert_eq!(r.header(name), Some(value), "{name} on {what}");
    }
    let csp = r.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.starts_with("default-src 'self';"),
        "CSP on {what}: {csp}"
    );
}

/// A GET of `path` asking for the byte range `range` (a `Range` header value).
async fn get_range(addr: SocketAddr, path: &str, range: &str) -> HttpResponse {
    http_with(addr, "GET", path, &[("Range", range)]).await
}

#[tokio::test]
async fn byte_ranges_give_206_or_416() {
    let server = BinaryServer::start(&[]);
    let path = "/assets/app-1a2b3c.js";

    let full = http(server.addr, "GET", path).await;
    assert_eq!(full.status, 200);
    assert_eq!(full.header("accept-ranges"), Some("bytes"));
    assert_eq!(full.body, APP_JS);

    // First, middle, suffix and open-ended ranges of the 14 bytes.
    for (range, content_range, body) in [
        ("bytes=0-6", "bytes 0-6/14", &b"console"[..]),
        ("bytes=8-10", "bytes 8-10/14", b"log"),
        ("bytes=-3", "bytes 11-13/14", b"(1)"),
        ("bytes=12-", "bytes 12-13/14", b"1)"),
        // A last byte past the end is cut to the end.
        ("bytes=11-99", "bytes 11-13/14", b"(1)"),
    ] {
        let r = get_range(server.addr, path, range).await;
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(r.header("content-range"), Some(content_range), "{range}");
        assert_eq!(
            r.header("content-length"),
            Some(body.len().to_string().as_str()),
            "{range}"
        );
        assert_eq!(r.body, body, "{range}");
        assert_eq!(r.header("content-type"), Some(JS), "{range}");
        assert_eq!(r.header("cache-control"), Some(IMMUTABLE), "{range}");
        assert_security_headers(&r, range);
    }

    // The wasm engine, by range, keeps its type.
    let r = get_range(server.addr, "/assets/engine-4d5e.wasm", "bytes=0-3").await;
    assert_eq!((r.status, &r.body[..]), (206, &WASM[..4]));
    assert_eq!(r.header("content-type"), Some("application/wasm"));

    // No byte of the range exists: 416 with the length, and the headers still.
    for range in ["bytes=14-", "bytes=100-200"] {
        let r = get_range(server.addr, path, range).await;
        assert_eq!(r.status, 416, "{range}");
        assert_eq!(r.header("content-range"), Some("bytes */14"), "{range}");
        assert!(r.body.is_empty(), "{range}");
        assert_security_headers(&r, range);
    }
    assert_eq!(server.stop().await.0, Some(0));
}

#[tokio::test]
async fn validators_give_304_and_changes_give_200() {
    let server = BinaryServer::start(&[]);
    for (path, mime, cache) in [
        ("/sw.js", JS, "no-cache"),
        ("/assets/app-1a2b3c.js", JS, IMMUTABLE),
        ("/r/jam", "text/html; charset=utf-8", "no-cache"),
    ] {
        let first = http(server.addr, "GET", path).await;
        assert_eq!(first.status, 200, "{path}");
        assert_eq!(first.header("content-type"), Some(mime), "{path}");
        let etag = first.header("etag").expect("an ETag").to_owned();
        let modified = first
            .header("last-modified")
            .expect("a Last-Modified")
            .to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        assert!(modified.ends_with(" GMT"), "{modified}");

        for (name, value) in [
            ("If-None-Match", etag.as_str()),
            ("If-None-Match", &format!("\"other\", {etag}")),
            ("If-Modified-Since", modified.as_str()),
        ] {
            let what = format!("{path} {name}: {value}");
            let r = http_with(server.addr, "GET", path, &[(name, value)]).await;
            assert_eq!(r.status, 304, "{what}");
            assert!(r.body.is_empty(), "{what}");
            assert_eq!(r.header("etag"), Some(etag.as_str()), "{what}");
            assert_eq!(r.header("cache-control"), Some(cache), "{what}");
            assert_security_headers(&r, &what);
        }

        // A different version, or an older copy, gets the file again.
        for (name, value) in [
            ("If-None-Match", "\"something-else\""),
            ("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT"),
        ] {
            let r = http_with(server.addr, "GET", path, &[(name, value)]).await;
            assert_eq!(r.status, 200, "{path} {name}: {value}");
            assert_eq!(r.body, first.body, "{path} {name}: {value}");
        }
    }
    assert_eq!(server.stop().await.0, Some(0));
}

#[tokio::test]
async fn path_rules_hold_in_front_of_the_files() {
    let server = BinaryServer::start(&[]);
    // The app's routes are index.html; files are themselves; the rest is 404.
    for (path, status, body) in [
        ("/", 200, INDEX.as_bytes()),
        ("/r/jam", 200, INDEX.as_bytes()),
        ("/r/jam/deeper?x=1", 200, INDEX.as_bytes()),
        ("/recordings", 200, INDEX.as_bytes()),
        ("/index.html", 200, INDEX.as_bytes()),
        ("/manifest.webmanifest", 200, b"{}"),
        ("/nope.js", 404, b"Not found.\n"),
        ("/assets", 404, b"Not found.\n"),
        ("/assets/", 404, b"Not found.\n"),
        ("/r", 404, b"Not found.\n"),
        ("/recordings/x", 404, b"Not found.\n"),
    ] {
        let r = http(server.addr, "GET", path).await;
        assert_eq!((r.status, &r.body[..]), (status, body), "{path}");
        assert_security_headers(&r, path);
    }
    let r = http(server.addr, "GET", "/manifest.webmanifest").await;
    assert_eq!(
        r.header("content-type"),
        Some("application/manifest+json"),
        "manifest type"
    );

    // Escapes and malformed escapes are refused before any file is looked at.
    for path in [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/assets/%2e%2e/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/..%5csecret.txt",
        "/index.html%00.js",
        "/a%zz",
        "/a%1",
        "/%ff",
    ] {
        let r = http(server.addr, "GET", path).await;
        assert_eq!(
            (r.status, &r.body[..]),
            (400, &b"Bad path.\n"[..]),
            "{path}"
        );
        assert_security_headers(&r, path);
    }
    // A Range cannot widen what a refused path reaches.
    let r = get_range(server.addr, "/%2e%2e/secret.txt", "bytes=0-").await;
    assert_eq!(r.status, 400);

    let r = http(server.addr, "POST", "/index.html").await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    assert_eq!(server.stop().await.0, Some(0));
}

/// A file much larger than a read chunk comes out whole, and any range of it exactly; a
/// symlink that leads out of the directory is not followed.
#[tokio::test]
async fn large_files_and_symlinks() {
    let dist = TempDist::new();
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(dist.dist.join("assets/big-5f6a.wasm"), &big).expect("write big file");
    #[cfg(unix)]
    std::os::unix::fs::symlink(dist.base.join("secret.txt"), dist.dist.join("leak.txt"))
        .expect("symlink");
    let server = BinaryServer::start_on(&dist.dist, &dist.base.join("data"), &[]);

    let r = http(server.addr, "GET", "/assets/big-5f6a.wasm").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("3000000"));
    assert!(r.body == big, "the whole file, byte for byte");

    let r = get_range(
        server.addr,
        "/assets/big-5f6a.wasm",
        "bytes=1234567-2345677",
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some("bytes 1234567-2345677/3000000")
    );
    assert!(
        r.body == big[1_234_567..=2_345_677],
        "the range, byte for byte"
    );

    let head = http(server.addr, "HEAD", "/assets/big-5f6a.wasm").await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("3000000"));
    assert!(head.body.is_empty());

    #[cfg(unix)]
    {
        let r = http(server.addr, "GET", "/leak.txt").await;
        assert_eq!(r.status, 404);
        assert!(!String::from_utf8_lossy(&r.body).contains("secret"));
    }
    assert_eq!(server.stop().await.0, Some(0));
}

/// A `.gz` beside a file is never sent in its place: only the file the path names is served.
#[tokio::test]
async fn precompressed_siblings_are_not_served() {
    let dist = TempDist::new();
    std::fs::write(dist.dist.join("assets/app-1a2b3c.js.gz"), b"gzipped").expect("write .gz");
    let server = BinaryServer::start_on(&dist.dist, &dist.base.join("data"), &[]);
    let path = "/assets/app-1a2b3c.js";
    for accept in [None, Some("gzip"), Some("br, gzip")] {
        let headers: Vec<(&str, &str)> =
            accept.map(|a| ("Accept-Encoding", a)).into_iter().collect();
        let r = http_with(server.addr, "GET", path, &headers).await;
        assert_eq!(r.status, 200, "{accept:?}");
        assert_eq!(r.header("content-encoding"), None, "{accept:?}");
        assert_eq!(r.body, APP_JS, "{accept:?}");
        assert_eq!(r.header("content-type"), Some(JS));
    }
    assert_eq!(server.stop().await.0, Some(0));
}
