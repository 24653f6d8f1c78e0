//! Bounded retries with exponential backoff and full jitter
//! (delay = random(0, min(cap, base * 2^attempt))), so that many nodes retrying after the same
//! throttle spread out instead of hitting the API together again.

use rand::Rng;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
    pub max_retries: u32,
}

impl Backoff {
    /// The ceiling of the delay before retry number `attempt` (0 = first retry).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(31));
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A random delay in [0, ceiling(attempt)].
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling(attempt).as_secs_f64();
        Duration::from_secs_f64(rng.random_range(0.0..=ceiling))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn ceiling_doubles_then_caps() {
        let b = Backoff { base: Duration::from_millis(100), cap: Duration::from_secs(1), max_retries: 5 };
        let c: Vec<u128> = (0..6).map(|a| b.ceiling(a).as_millis()).collect();
        assert_eq!(c, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.ceiling(1000), Duration::from_secs(1), "no overflow");
    }

    #[test]
    fn delays_are_full_jitter_under_the_ceiling() {
        let b = Backoff { base: Duration::from_millis(100), cap: Duration::from_secs(10), max_retries: 5 };
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let delays: Vec<Duration> = (0..1000).map(|_| b.delay(3, &mut rng)).collect();
        assert!(delays.iter().all(|d| *d <= Duration::from_millis(800)));
        let mean = delays.iter().map(Duration::as_secs_f64).sum::<f64>() / 1000.0;
        assert!((0.3..0.5).contains(&mean), "mean {mean} should be near 0.4 s");
        assert!(delays.iter().any(|d| *d < Duration::from_millis(80)), "jitter reaches near zero");
    }
}
