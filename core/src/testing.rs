//! Test support shared by the modules' unit tests (compiled only for tests).

/// xorshift64: a small seeded generator for deterministic test sequences.
pub(crate) struct XorShift64(pub(crate) u64);

impl XorShift64 {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in 0..n (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(crate) fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Every `export const NAME = <number>;` line of a TypeScript mirror (layout constants), as
/// (name, value); lines whose value is not a plain decimal number are skipped.
pub(crate) fn ts_numeric_constants(src: &str) -> Vec<(String, f64)> {
    src.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("export const ")?;
            let (name, value) = rest.split_once(" = ")?;
            let value = value.trim_end_matches(';').parse::<f64>().ok()?;
            Some((name.to_string(), value))
        })
        .collect()
}
