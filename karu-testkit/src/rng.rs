//! A deterministic pseudo-random sequence for tests that draw their cases from a seed, so that
//! a failing case reproduces from its seed alone.

/// SplitMix64: a seed in, the same sequence out on every machine.
///
/// ```
/// use karu_testkit::Rng;
/// let mut a = Rng::new(7);
/// let mut b = Rng::new(7);
/// assert_eq!(a.range(10, 20), b.range(10, 20));
/// assert!((10..20).contains(&Rng::new(8).range(10, 20)));
/// ```
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The sequence of `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `[low, high)` (`low < high`).
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low)
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next_u64() as usize % items.len()]
    }

    /// `true` about `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}
