//! Headers on every response, mirroring app/http-headers.mjs (keep the two identical).

use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;

/// Content-Security-Policy, identical to CONTENT_SECURITY_POLICY in app/http-headers.mjs.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; \
script-src 'self' 'wasm-unsafe-eval'; \
worker-src 'self' blob:; \
connect-src 'self'; \
style-src 'self' 'unsafe-inline'; \
img-src 'self' data: blob:; \
media-src 'self' blob:; \
font-src 'self'; \
manifest-src 'self'; \
object-src 'none'; \
base-uri 'self'; \
form-action 'self'; \
frame-ancestors 'none'";

/// SECURITY_HEADERS of app/http-headers.mjs. COOP + COEP make the page cross-origin
/// isolated, which SharedArrayBuffer (and so the audio engine) needs.
pub const SECURITY_HEADERS: [(&str, &str); 6] = [
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-embedder-policy", "require-corp"),
    ("cross-origin-resource-policy", "same-origin"),
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
];

/// MIME_TYPES of app/http-headers.mjs: extension (lower case, no dot) to type.
pub fn mime_type(extension: &str) -> &'static str {
    match extension {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json; charset=utf-8",
        "wasm" => "application/wasm",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "webmanifest" => "application/manifest+json",
        "txt" => "text/plain; charset=utf-8",
        "wav" => "audio/wav",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// Adds the security headers (and `Cache-Control: no-cache` if none was set) to a response.
pub async fn add_security_headers(mut response: Response) -> Response {
    let headers: &mut HeaderMap = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    response
}

/// `Strict-Transport-Security` for a server that speaks TLS: browsers that saw it once use
/// HTTPS for this host for a year, so a network attacker cannot strip TLS from a later visit.
pub const HSTS: &str = "max-age=31536000";

/// Adds [`HSTS`] (only on the TLS listener: browsers ignore it over plain HTTP).
pub async fn add_hsts(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::STRICT_TRANSPORT_SECURITY,
        HeaderValue::from_static(HSTS),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CSP must stay identical to the one the dev server sends.
    #[test]
    fn csp_matches_headers_mjs() {
        let mjs = include_str!("../../app/http-headers.mjs");
        let start = mjs.find("CONTENT_SECURITY_POLICY = [").map(|i| i + 27);
        let end = mjs.find("].join('; ')");
        let (Some(start), Some(end)) = (start, end) else {
            panic!("headers.mjs no longer has the CSP array")
        };
        let parts: Vec<&str> = mjs[start..end]
            .lines()
            .map(|l| l.trim().trim_end_matches(',').trim_matches('"'))
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(parts.join("; "), CONTENT_SECURITY_POLICY);
        for (ext, mime) in [
            ("wasm", "application/wasm"),
            ("webmanifest", "application/manifest+json"),
        ] {
            assert!(mjs.contains(&format!("'.{ext}': '{mime}'")));
            assert_eq!(mime_type(ext), mime);
        }
    }
}
