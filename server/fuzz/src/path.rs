//! Properties of `statics::path_segments` on any request path, against a reference that spells
//! out the rule: a path is refused exactly when its percent-encoding is malformed (RFC 3986:
//! `%` then two hex digits) or decodes to invalid UTF-8, when it does not start with `/`, holds a
//! backslash or NUL, or has a `.` or `..` segment or a segment with `:`. Otherwise its segments
//! are the non-empty parts between slashes. Whatever it accepts joins under the app directory
//! as plain names only, and only hashed assets (never the service worker or the manifest) are
//! cached as immutable. The server decodes request paths with this function only: the file it
//! picks is handed to tower-http's `ServeFile` as a path, never the request's own path.

use std::path::{Component, Path, PathBuf};

use tutti_server::statics::{cache_control, path_segments};

pub fn check_path(raw: &str) {
    let expected = reference_segments(raw);
    let got = path_segments(raw).ok();
    assert_eq!(got, expected, "segments of {raw:?}");
    let Some(segments) = got else { return };

    let relative: PathBuf = segments.iter().collect();
    assert!(
        relative.components().all(|c| matches!(c, Component::Normal(_))),
        "{raw:?} gives {relative:?}"
    );
    assert_eq!(relative.components().count(), segments.len());
    let root = Path::new("dist");
    assert!(root.join(&relative).starts_with(root));

    if cache_control(&segments).contains("immutable") {
        let name = segments.last().map(|s| s.to_ascii_lowercase());
        let name = name.as_deref().unwrap_or("");
        assert!(
            segments.len() > 1 && segments[0] == "assets",
            "{raw:?} immutable"
        );
        assert!(
            name != "sw.js" && !name.ends_with(".webmanifest"),
            "{raw:?} immutable"
        );
    }
}

/// The rule of the module docs, written independently of the server's code.
fn reference_segments(raw: &str) -> Option<Vec<String>> {
    let decoded = strict_percent_decode(raw)?;
    let refused = !decoded.starts_with('/') || decoded.contains(['\\', '\0']);
    let parts: Vec<&str> = decoded.split('/').skip(1).filter(|s| !s.is_empty()).collect();
    let bad_part = parts
        .iter()
        .any(|p| *p == "." || *p == ".." || p.contains(':'));
    if refused || bad_part {
        return None;
    }
    Some(parts.into_iter().map(str::to_owned).collect())
}

fn strict_percent_decode(raw: &str) -> Option<String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut rest = raw.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let [hi, lo, ..] = *tail else { return None };
            let digit = |c: u8| char::from(c).to_digit(16);
            out.push(u8::try_from(digit(hi)? * 16 + digit(lo)?).ok()?);
            rest = &tail[2..];
        } else {
            out.push(b);
            rest = tail;
        }
    }
    String::from_utf8(out).ok()
}
