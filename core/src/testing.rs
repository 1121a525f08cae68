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
