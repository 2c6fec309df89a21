//! The generator the tests that make commands share.

/// A small deterministic generator (xorshift64*), so a failure can be
/// replayed from its seed; the second field counts the parentheses a
/// generator is inside.
pub struct Rng(pub u64, pub u32);

impl Rng {
    /// Runs `f` inside parentheses (a subshell or a substitution).
    pub fn parens(&mut self, f: impl FnOnce(&mut Rng) -> String) -> String {
        self.1 += 1;
        let out = f(self);
        self.1 -= 1;
        out
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}
