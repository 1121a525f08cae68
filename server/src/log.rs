//! One line per event on stderr, prefixed with a UTC timestamp (`2026-11-21T14:03:07Z`).

use std::time::{SystemTime, UNIX_EPOCH};

/// Writes `message` to stderr after the current UTC time.
pub fn event(message: &str) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    eprintln!("{} {message}", utc_timestamp(secs));
}

/// Formats seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), Howard Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A peer id shortened for logs: its first 6 chars and an ellipsis.
pub fn short_peer(peer: &str) -> String {
    let head: String = peer.chars().take(6).collect();
    format!("{head}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        // `date -u -d @951782400` → 2000-02-29 00:00:00 (a leap day).
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00Z");
        // `date -u -d @1795269787` → 2026-11-21T14:03:07Z.
        assert_eq!(utc_timestamp(1_795_269_787), "2026-11-21T14:03:07Z");
    }
}
