//! The message size distribution.
//!
//! Total message size (header block + body, LF line endings) at `size_scale` 1.0 is drawn
//! from a two-component log-normal mixture, matching published mailbox statistics (most mail
//! 1-100 kB, median about 10 kB, a few percent carrying attachments of hundreds of kB to
//! several MB):
//!
//! | component | share | median | sigma (ln) | role |
//! |---|---|---|---|---|
//! | text mail | 96.5 % | 9.5 kB | 1.0 | plain, HTML, small inline images |
//! | attachment mail | 3.5 % | 250 kB | 1.2 | PDFs, photos, archives |
//!
//! Draws are clamped to [600 B, 12 MiB]; the drawn sizes have p50 ≈ 9.9 kB, p90 ≈ 43 kB,
//! p99 ≈ 0.5 MB. The generator aims each message at its draw; messages smaller than their
//! header block plus a minimal body come out larger, so written mail measures (10,000
//! messages, `maildex-corpus --users 4 --messages 2500 --seed 9`): p10 ≈ 4.7 kB,
//! p50 ≈ 10.5 kB, p90 ≈ 43 kB, p99 ≈ 540 kB, max ≈ 9 MB, mean ≈ 35 kB.
//!
//! `size_scale` multiplies the drawn size (floor 600 B), so 0.1 gives a roughly ten times
//! smaller corpus for quick tests; header blocks are not scaled, so tiny scales mostly
//! shrink bodies.

use rand::Rng;

/// Lower clamp of a drawn size: below this even a bare notification would not fit.
pub const MIN_SIZE: usize = 600;
/// Upper clamp of a drawn size at scale 1.0 (a 12 MiB message: an ~8.5 MB attachment).
pub const MAX_SIZE: usize = 12 * 1024 * 1024;

/// One standard normal draw (Box-Muller).
fn normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Draws a target total message size in bytes for `scale` (see the module docs for the
/// distribution). The generator aims each message at this size.
pub fn sample_size<R: Rng + ?Sized>(rng: &mut R, scale: f64) -> usize {
    let (median, sigma) = if rng.gen_bool(0.035) {
        (250_000.0, 1.2)
    } else {
        (9_500.0, 1.0)
    };
    let raw = (median * (sigma * normal(rng)).exp()).clamp(MIN_SIZE as f64, MAX_SIZE as f64);
    let scaled = raw
        * if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
    (scaled as usize).max(MIN_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn drawn_sizes_follow_the_documented_quantiles() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
        let mut v: Vec<usize> = (0..20_000).map(|_| sample_size(&mut rng, 1.0)).collect();
        v.sort_unstable();
        let q = |p: f64| v[((v.len() - 1) as f64 * p) as usize];
        assert!((8_500..=11_500).contains(&q(0.5)), "p50 {}", q(0.5));
        assert!((25_000..=60_000).contains(&q(0.9)), "p90 {}", q(0.9));
        assert!(q(0.99) > 100_000, "p99 {}", q(0.99));
        assert!(*v.last().unwrap() > 2_000_000, "max {}", v.last().unwrap());
        let small = v
            .iter()
            .filter(|&&s| (1_000..=100_000).contains(&s))
            .count();
        assert!(
            small * 100 / v.len() >= 90,
            "only {small} of {} within 1-100 kB",
            v.len()
        );
    }

    #[test]
    fn scale_shrinks_sizes() {
        let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut b = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let big: usize = (0..2000).map(|_| sample_size(&mut a, 1.0)).sum();
        let small: usize = (0..2000).map(|_| sample_size(&mut b, 0.1)).sum();
        assert!(small * 5 < big, "{small} vs {big}");
    }
}
