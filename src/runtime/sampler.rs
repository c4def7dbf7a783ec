//! Sampling: masked logits (an `f32` slice, disallowed tokens at −∞) → one token id.
//!
//! The choice is a data-carrying enum: greedy (temperature 0) or a temperature with optional
//! top-k and top-p (nucleus) cuts, drawn from a seeded RNG so that a run repeats exactly. Tokens
//! at −∞ never win: greedy skips them and the softmax gives them zero weight. All-−∞ logits are
//! an error, not a draw.

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

/// Index of the largest finite logit (the lowest on ties).
fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best = f32::NEG_INFINITY;
    let mut at = None;
    for (i, &l) in logits.iter().enumerate() {
        if l > best && l != f32::INFINITY {
            best = l;
            at = Some(i as u32);
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEG: f32 = f32::NEG_INFINITY;

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
