//! The built app: files of the dist directory, `index.html` for `/` and the SPA routes `/r/...`.
//!
//! Which file a request names is decided here, by Tutti's own rule: [`path_segments`] decodes
//! the path strictly and refuses anything that could leave the directory (it is the code the
//! fuzz target `path` runs), the app's routes map to `index.html`, and the file found must
//! still lie inside the canonical root once symlinks are resolved. Anything else is a 400 or a
//! 404 with a short text body, as the browser tests expect.
//!
//! Serving that one file is `tower-http`'s [`ServeFile`]: streamed from disk in chunks (never
//! the whole file in memory), `Range` requests (206 with `Content-Range`, 416 when no byte of
//! the range exists), validators (`ETag` and `Last-Modified`, 304 for `If-None-Match` and
//! `If-Modified-Since`, 412 for `If-Match` / `If-Unmodified-Since`). Precompressed `.br` /
//! `.gz` siblings are not served: the build writes none, and each would be a second file
//! opened by a name this module's checks never saw. Those are protocol
//! details with many corner cases, which a widely used implementation gets right and keeps
//! right. `ServeFile` is handed the resolved path and never decodes the request path itself, so
//! no second decoding rule runs (`ServeDir` would bring its own, and know nothing of the SPA
//! routes). On its response we set what is Tutti's choice: the MIME type from
//! [`mime_type`] (the table shared with the dev server; `.wasm` must be `application/wasm`) and
//! Cache-Control by [`cache_control`]; the router adds the security headers to every response.

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tower_http::services::ServeFile;

use crate::headers::mime_type;

/// Where the files are; `root` is canonical so that symlinks cannot lead out of it.
#[derive(Clone)]
pub struct Dist {
    root: PathBuf,
}

impl Dist {
    /// Checks that `dir` holds an index.html.
    pub fn open(dir: &Path) -> Result<Self, String> {
        let hint = "Build the app first with `npm run build`, or point --dist (TUTTI_DIST) at \
                    the directory that holds it.";
        let root = dir.canonicalize().map_err(|e| {
            format!(
                "The app directory {} cannot be read ({e}). {hint}",
                dir.display()
            )
        })?;
        if !root.join("index.html").is_file() {
            return Err(format!("{} has no index.html. {hint}", root.display()));
        }
        Ok(Self { root })
    }
}

/// Why a request path cannot name a file.
#[derive(Debug, PartialEq, Eq)]
pub enum BadPath {
    /// Malformed or an attempt to leave the directory: 400.
    Invalid,
}

/// Decodes a request path into its segments, refusing anything that could escape the root:
/// `..` and `.` segments (also percent-encoded), backslashes, NUL, invalid UTF-8.
pub fn path_segments(raw: &str) -> Result<Vec<String>, BadPath> {
    let decoded = percent_decode(raw).ok_or(BadPath::Invalid)?;
    if decoded.contains('\\') || decoded.contains('\0') || !decoded.starts_with('/') {
        return Err(BadPath::Invalid);
    }
    let mut segments = Vec::new();
    for seg in decoded.split('/').skip(1) {
        match seg {
            "." | ".." => return Err(BadPath::Invalid),
            "" => {}
            s if s.contains(':') => return Err(BadPath::Invalid),
            s => segments.push(s.to_owned()),
        }
    }
    Ok(segments)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            // Two hex digits exactly: `from_str_radix` alone would also take a sign ("%+5").
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn text(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Cache-Control of a file that is revalidated on every use.
const NO_CACHE: &str = "no-cache";
/// Cache-Control of a content-hashed build asset: its name changes when its bytes do.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// Cache-Control for a file of the dist directory, by its path segments. Only the hashed build
/// assets under `assets/` are immutable. Everything else is revalidated: the pages, and above all
/// the service worker (`sw.js`) and the web app manifest, whose fixed names are how browsers find a
/// new release. A cached sw.js would keep every installed copy on the old version, so these two
/// are never immutable, wherever they sit.
pub fn cache_control(segments: &[String]) -> &'static str {
    let Some(name) = segments.last() else {
        return NO_CACHE;
    };
    let name = name.to_ascii_lowercase();
    let pwa_file = name == "sw.js" || name.ends_with(".webmanifest");
    if segments.len() > 1 && segments[0] == "assets" && !pwa_file {
        IMMUTABLE
    } else {
        NO_CACHE
    }
}

/// Serves GET and HEAD for every path no other route took.
pub async fn serve(State(dist): State<Dist>, request: Request) -> Response {
    let method = request.method();
    if method != Method::GET && method != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed.\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let raw = request.uri().path();
    let Ok(segments) = path_segments(raw) else {
        return text(StatusCode::BAD_REQUEST, "Bad path.\n");
    };
    // The app's routes (route.ts): `/`, `/r/<room>` and `/recordings`.
    let spa = segments.is_empty()
        || (segments[0] == "r" && raw.starts_with("/r/"))
        || (segments.len() == 1 && segments[0] == "recordings");
    let relative: PathBuf = if spa {
        PathBuf::from("index.html")
    } else {
        segments.iter().collect()
    };
    let path = dist.root.join(&relative);
    // Resolve symlinks and make sure the file is still inside the root.
    let resolved = match tokio::fs::canonicalize(&path).await {
        Ok(p) if p.starts_with(&dist.root) => p,
        _ => return text(StatusCode::NOT_FOUND, "Not found.\n"),
    };
    match tokio::fs::metadata(&resolved).await {
        Ok(m) if m.is_file() => {}
        _ => return text(StatusCode::NOT_FOUND, "Not found.\n"),
    }
    let extension = relative
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let cache = if spa {
        NO_CACHE
    } else {
        cache_control(&segments)
    };
    let file = ServeFile::new(&resolved).try_call(request).await;
    // An error here is the file vanishing or becoming unreadable since the checks above.
    let Ok(response) = file else {
        return text(StatusCode::NOT_FOUND, "Not found.\n");
    };
    let (mut parts, body) = response.into_parts();
    if parts.status.is_success() {
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(mime_type(&extension)),
        );
    }
    // Also on 304 and 416: a revalidated response keeps the caching rule of the full one.
    parts
        .headers
        .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    Response::from_parts(parts, Body::new(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_escapes() {
        for bad in [
            "/..",
            "/../etc/passwd",
            "/assets/../../x",
            "/%2e%2e/x",
            "/%2E%2E/x",
            "/.%2e/x",
            "/a%2f..%2fb",
            "/a\\b",
            "/a%5cb",
            "/a%00b",
            "/a%zz",
            "/%ff",
            "/./x",
            "/C:/x",
            // Not two hex digits (found by the fuzz target `path`).
            "/s%+B-g",
            "/%+2e%+2e/x",
            "/a%+f",
            "/a%-1",
            "/a%1",
        ] {
            assert_eq!(path_segments(bad), Err(BadPath::Invalid), "{bad}");
        }
    }

    #[test]
    fn only_hashed_assets_are_immutable() {
        let seg = |p: &str| path_segments(p).expect("test path is valid");
        for (path, cache) in [
            ("/assets/index-B29PAUK8.js", IMMUTABLE),
            ("/assets/tutti_wasm_bg-BtmrJKVy.wasm", IMMUTABLE),
            ("/sw.js", NO_CACHE),
            ("/manifest.webmanifest", NO_CACHE),
            ("/assets/sw.js", NO_CACHE),
            ("/assets/app.webmanifest", NO_CACHE),
            ("/index.html", NO_CACHE),
            ("/icons/icon-192.png", NO_CACHE),
            ("/assets", NO_CACHE),
            ("/", NO_CACHE),
        ] {
            assert_eq!(cache_control(&seg(path)), cache, "{path}");
        }
    }

    #[test]
    fn splits_good_paths() {
        assert_eq!(path_segments("/"), Ok(vec![]));
        assert_eq!(
            path_segments("/assets/app-1a2b.js"),
            Ok(vec!["assets".to_owned(), "app-1a2b.js".to_owned()])
        );
        assert_eq!(
            path_segments("/a%20b//c"),
            Ok(vec!["a b".to_owned(), "c".to_owned()])
        );
    }
}
