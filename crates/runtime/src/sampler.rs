//! Sampling: masked logits (an `f32` slice, disallowed tokens at −∞) → one token id.
//!
//! The choice is a data-carrying enum: greedy (temperature 0) or a temperature with optional
//! top-k and top-p (nucleus) cuts, drawn from a seeded RNG so that a run repeats exactly. Tokens
//! at −∞ never win: greedy skips them and the softmax gives them zero weight. All-−∞ logits are
//! an error, not a draw.
//!
//! On a GPU the logits stay there: [`sample_on_device`] draws greedy (an argmax) and plain
//! temperature sampling (Gumbel-max: the argmax of `logits / T` plus Gumbel noise, which is an
//! exact draw from the softmax) with tensor ops, so only the token id comes back. Top-k and top-p
//! need a sort of the whole row, which candle's CUDA kernels cannot do for a 150K-entry row;
//! those rows are copied to the host and cut there ([`Sampler::sample`]).

use candle_core::{DType, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The highest logit (ties: the lowest id).
    Greedy,
    /// Softmax over `logits / temperature`, cut to the `top_k` best and then to the smallest set
    /// whose probability reaches `top_p`.
    Random {
        /// Softmax temperature, > 0.
        temperature: f32,
        /// Keep only this many best tokens.
        top_k: Option<usize>,
        /// Keep the best tokens until their probability reaches this (0 < p ≤ 1).
        top_p: Option<f32>,
    },
}

impl Sampling {
    /// The sampling for these flags: greedy at temperature 0.
    pub fn from_flags(temperature: f32, top_k: Option<usize>, top_p: Option<f32>) -> Self {
        if temperature <= 0.0 {
            Sampling::Greedy
        } else {
            Sampling::Random {
                temperature,
                top_k: top_k.filter(|&k| k > 0),
                top_p: top_p.filter(|&p| p < 1.0),
            }
        }
    }
}

/// A sampler with its RNG.
#[derive(Debug, Clone)]
pub struct Sampler {
    sampling: Sampling,
    rng: StdRng,
    scratch: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler seeded with `seed`.
    pub fn new(sampling: Sampling, seed: u64) -> Self {
        Sampler {
            sampling,
            rng: StdRng::seed_from_u64(seed),
            scratch: Vec::new(),
        }
    }

    /// The next token, or `None` when every logit is −∞ (or NaN).
    pub fn sample(&mut self, logits: &[f32]) -> Option<u32> {
        match self.sampling {
            Sampling::Greedy => argmax(logits),
            Sampling::Random {
                temperature,
                top_k,
                top_p,
            } => self.draw(logits, temperature, top_k, top_p),
        }
    }

    fn draw(
        &mut self,
        logits: &[f32],
        temperature: f32,
        top_k: Option<usize>,
        top_p: Option<f32>,
    ) -> Option<u32> {
        let best = argmax(logits)?;
        let max = logits[best as usize];
        let cand = &mut self.scratch;
        cand.clear();
        cand.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, l)| l.is_finite())
                .map(|(i, &l)| (i as u32, ((l - max) / temperature).exp())),
        );
        if let Some(k) = top_k.filter(|&k| k < cand.len()) {
            cand.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            cand.truncate(k);
        }
        if let Some(p) = top_p {
            cand.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let total: f32 = cand.iter().map(|c| c.1).sum();
            let mut acc = 0.0;
            let keep = cand
                .iter()
                .position(|c| {
                    acc += c.1;
                    acc >= p * total
                })
                .map_or(cand.len(), |i| i + 1);
            cand.truncate(keep);
        }
        let total: f32 = cand.iter().map(|c| c.1).sum();
        let mut x = self.rng.random::<f32>() * total;
        for &(id, w) in cand.iter() {
            if x < w {
                return Some(id);
            }
            x -= w;
        }
        cand.last().map(|c| c.0)
    }
}

impl Sampling {
    /// Whether [`sample_on_device`] can draw this.
    pub fn on_device(self) -> bool {
        matches!(
            self,
            Sampling::Greedy
                | Sampling::Random {
                    top_k: None,
                    top_p: None,
                    ..
                }
        )
    }
}

/// Draws a token from a logits row `(vocab,)` on its own device; refused tokens are −∞. Greedy
/// takes the argmax; a temperature without cuts takes the argmax of `logits / T − log(−log U)`
/// with `U` uniform on the device (seeded with `Device::set_seed`). Errors for top-k / top-p
/// ([`Sampling::on_device`] is false).
pub fn sample_on_device(logits: &Tensor, sampling: Sampling) -> candle_core::Result<u32> {
    let logits = logits.to_dtype(DType::F32)?;
    let scores = match sampling {
        Sampling::Greedy => logits,
        Sampling::Random {
            temperature,
            top_k: None,
            top_p: None,
        } => {
            let u = Tensor::rand(f32::MIN_POSITIVE, 1.0f32, logits.shape(), logits.device())?;
            let gumbel = u.log()?.neg()?.log()?.neg()?;
            ((logits / f64::from(temperature))? + gumbel)?
        }
        Sampling::Random { .. } => {
            candle_core::bail!("top-k / top-p sampling is done on the host, not the device")
        }
    };
    scores.argmax(0)?.to_scalar::<u32>()
}

/// Index of the largest finite logit (the lowest on ties): the largest value over 16 lanes
/// (a loop the compiler vectorizes; a 152K-token row in tens of µs), then its first position.
fn argmax(logits: &[f32]) -> Option<u32> {
    let finite_max = |m: f32, v: f32| if v > m && v != f32::INFINITY { v } else { m };
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = logits.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = finite_max(*m, v);
        }
    }
    let best = lanes
        .iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &v| finite_max(m, v));
    if best == f32::NEG_INFINITY {
        return None;
    }
    logits.iter().position(|&v| v == best).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEG: f32 = f32::NEG_INFINITY;

    #[test]
    fn argmax_matches_a_plain_scan() {
        let plain = |l: &[f32]| {
            let mut best = (f32::NEG_INFINITY, None);
            for (i, &v) in l.iter().enumerate() {
                if v > best.0 && v != f32::INFINITY {
                    best = (v, Some(i as u32));
                }
            }
            best.1
        };
        for n in [0, 1, 15, 16, 17, 1000, 1003] {
            let mut row: Vec<f32> = (0..n).map(|i| ((i * 7919) % 101) as f32 / 7.0).collect();
            assert_eq!(argmax(&row), plain(&row), "n={n}");
            if n > 3 {
                row[1] = f32::INFINITY;
                row[2] = f32::NAN;
                row[n - 1] = 1e6;
                assert_eq!(argmax(&row), plain(&row), "n={n}");
                row.iter_mut().for_each(|v| *v = NEG);
                assert_eq!(argmax(&row), None);
            }
        }
    }

    #[test]
    fn greedy_skips_masked_and_takes_lowest_tie() {
        let mut s = Sampler::new(Sampling::Greedy, 0);
        assert_eq!(s.sample(&[1.0, NEG, 3.0, 3.0]), Some(2));
        assert_eq!(s.sample(&[NEG, NEG]), None);
    }

    #[test]
    fn random_never_draws_masked_and_repeats_with_seed() {
        let logits = [0.5, NEG, 0.1, 2.0, NEG];
        let sampling = Sampling::from_flags(1.0, None, None);
        let draw = |seed| {
            let mut s = Sampler::new(sampling, seed);
            (0..200)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert!(a.iter().all(|&t| t == 0 || t == 2 || t == 3));
        assert!(a.contains(&0) && a.contains(&3));
        assert_eq!(a, draw(7));
    }

    #[test]
    fn device_draws_match_the_host() {
        let dev = candle_core::Device::Cpu;
        let logits = [0.5f32, NEG, 0.1, 2.0, NEG, 1.9];
        let t = Tensor::new(&logits[..], &dev).unwrap();
        assert_eq!(sample_on_device(&t, Sampling::Greedy).unwrap(), 3);
        let warm = Sampling::from_flags(1.0, None, None);
        assert!(warm.on_device());
        assert!(!Sampling::from_flags(1.0, Some(2), None).on_device());
        let mut counts = [0usize; 6];
        for _ in 0..4000 {
            counts[sample_on_device(&t, warm).unwrap() as usize] += 1;
        }
        assert_eq!(
            counts[1] + counts[4],
            0,
            "a refused token was drawn: {counts:?}"
        );
        let z: f32 = logits
            .iter()
            .filter(|l| l.is_finite())
            .map(|l| l.exp())
            .sum();
        for (i, &l) in logits.iter().enumerate().filter(|(_, l)| l.is_finite()) {
            let p = l.exp() / z;
            let seen = counts[i] as f32 / 4000.0;
            assert!(
                (seen - p).abs() < 0.04,
                "token {i}: {seen} drawn, softmax {p}"
            );
        }
        let cut = Sampling::from_flags(1.0, None, Some(0.5));
        assert!(sample_on_device(&t, cut).is_err());
    }

    #[test]
    fn top_k_and_top_p_cut() {
        let logits = [3.0, 2.9, 0.0, -5.0];
        let mut k1 = Sampler::new(Sampling::from_flags(1.0, Some(1), None), 1);
        assert!((0..50).all(|_| k1.sample(&logits) == Some(0)));
        let mut p = Sampler::new(Sampling::from_flags(1.0, None, Some(0.5)), 1);
        assert!((0..50).all(|_| p.sample(&logits) == Some(0)));
        let mut p2 = Sampler::new(Sampling::from_flags(1.0, None, Some(0.9)), 1);
        assert!((0..200).all(|_| matches!(p2.sample(&logits), Some(0 | 1))));
    }
}
