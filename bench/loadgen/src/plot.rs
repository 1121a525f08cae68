//! The sweep's picture: CPU per client-second and delivery against the number of clients, one
//! line per server and mode ([`series`]), as a standalone SVG (two panels side by side, log-scaled client axis).
//!
//! Written by hand: two line charts need a few dozen SVG elements, not a plotting library.

use std::fmt::Write;

/// One point of a server's line.
#[derive(Clone, Debug)]
pub struct Point {
    pub server: String,
    pub clients: usize,
    pub cpu_ms_per_client_s: f64,
    pub delivery_pct: f64,
}

/// The line a row belongs to: its server, and `-forward` after it in forward mode.
pub fn series(server: &str, mode: &str) -> String {
    if mode == "forward" {
        format!("{server}-forward")
    } else {
        server.to_owned()
    }
}

const W: f64 = 420.0;
const H: f64 = 300.0;
const PAD_L: f64 = 60.0;
const PAD_R: f64 = 20.0;
const PAD_T: f64 = 56.0;
const PAD_B: f64 = 50.0;
const COLOURS: [&str; 4] = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a"];

/// A panel: its label, the value range, and the value of a point.
type Panel = (&'static str, f64, f64, fn(&Point) -> f64);

/// The SVG of `points`, titled `title`.
pub fn svg(points: &[Point], title: &str) -> String {
    let mut servers: Vec<&str> = Vec::new();
    for p in points {
        if !servers.contains(&p.server.as_str()) {
            servers.push(&p.server);
        }
    }
    let max_n = points.iter().map(|p| p.clients).max().unwrap_or(1).max(2) as f64;
    let min_n = points.iter().map(|p| p.clients).min().unwrap_or(1).max(1) as f64;
    let max_cpu = points
        .iter()
        .map(|p| p.cpu_ms_per_client_s)
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    let min_delivery = points
        .iter()
        .map(|p| p.delivery_pct)
        .filter(|v| v.is_finite())
        .fold(99.0, f64::min)
        .floor();
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">"#,
        2.0 * W,
        H + 30.0
    );
    let _ = write!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = write!(
        out,
        r#"<text x="{}" y="18" font-size="14" text-anchor="middle">{}</text>"#,
        W,
        escape(title)
    );
    let panels: [Panel; 2] = [
        ("CPU ms per client-second", 0.0, max_cpu * 1.1, |p| {
            p.cpu_ms_per_client_s
        }),
        ("delivery %", min_delivery, 100.0, |p| p.delivery_pct),
    ];
    for (panel, (label, lo, hi, value)) in panels.iter().enumerate() {
        let x0 = panel as f64 * W;
        let (left, right, top, bottom) = (x0 + PAD_L, x0 + W - PAD_R, PAD_T, H - PAD_B + 20.0);
        let x_of = |n: f64| {
            left + (n.ln() - min_n.ln()) / (max_n.ln() - min_n.ln()).max(1e-9) * (right - left)
        };
        let y_of =
            |v: f64| bottom - (v.clamp(*lo, *hi) - lo) / (hi - lo).max(1e-9) * (bottom - top);
        let _ = write!(
            out,
            r##"<rect x="{left}" y="{top}" width="{}" height="{}" fill="none" stroke="#999"/>"##,
            right - left,
            bottom - top
        );
        for k in 0..=4 {
            let v = lo + (hi - lo) * f64::from(k) / 4.0;
            let y = y_of(v);
            let _ = write!(
                out,
                r##"<line x1="{left}" x2="{right}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                left - 4.0,
                y + 4.0,
                if hi - lo < 10.0 {
                    format!("{v:.1}")
                } else {
                    format!("{v:.0}")
                }
            );
        }
        let mut ticks: Vec<usize> = points.iter().map(|p| p.clients).collect();
        ticks.sort_unstable();
        ticks.dedup();
        for n in ticks {
            let x = x_of(n as f64);
            let _ = write!(
                out,
                r#"<text x="{x:.1}" y="{}" text-anchor="middle">{n}</text>"#,
                bottom + 16.0
            );
        }
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">clients (log scale)</text><text x="{}" y="{}" text-anchor="middle">{label}</text>"#,
            (left + right) / 2.0,
            bottom + 34.0,
            (left + right) / 2.0,
            top - 6.0
        );
        for (i, server) in servers.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let mut line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.server == *server && value(p).is_finite())
                .map(|p| (x_of(p.clients as f64), y_of(value(p))))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            let path: Vec<String> = line.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = write!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
                path.join(" ")
            );
            for (x, y) in &line {
                let _ = write!(
                    out,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#
                );
            }
            let _ = write!(
                out,
                r#"<text x="{}" y="{}" fill="{colour}">{}</text>"#,
                left + 8.0,
                top + 16.0 + 14.0 * i as f64,
                escape(server)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(server: &str, clients: usize, cpu: f64, delivery: f64) -> Point {
        Point {
            server: server.into(),
            clients,
            cpu_ms_per_client_s: cpu,
            delivery_pct: delivery,
        }
    }

    #[test]
    fn one_line_per_server_in_each_panel_with_a_point_per_row() {
        let rows = [
            p("tutti-hub", 10, 12.0, 100.0),
            p("tutti-hub", 100, 5.0, 99.99),
            p("jacktrip", 10, 35.0, 100.0),
            p("jacktrip", 30, 48.0, 87.5),
        ];
        let s = svg(&rows, "a <sweep>");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<polyline").count(), 4);
        assert_eq!(s.matches("<circle").count(), 8);
        assert!(s.contains("a &lt;sweep&gt;") && !s.contains("<sweep>"));
        assert!(!s.contains("NaN") && !s.contains("inf"));
    }

    #[test]
    fn forward_rows_are_a_third_line() {
        assert_eq!(series("tutti-hub", "mix"), "tutti-hub");
        let forward = series("tutti-hub", "forward");
        assert_eq!(forward, "tutti-hub-forward");
        let rows = [
            p("tutti-hub", 10, 12.0, 100.0),
            p("jacktrip", 10, 35.0, 100.0),
            p(&forward, 10, 30.0, 100.0),
            p(&forward, 20, 31.0, 99.0),
        ];
        let s = svg(&rows, "t");
        assert_eq!(s.matches("<polyline").count(), 6);
        assert!(s.contains(">tutti-hub-forward<"));
    }

    #[test]
    fn a_single_point_or_none_still_draws() {
        assert!(svg(&[p("x", 5, f64::NAN, 100.0)], "t").contains("</svg>"));
        assert!(svg(&[], "t").contains("</svg>"));
    }
}
