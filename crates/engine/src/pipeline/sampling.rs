//! Token sampling on the CPU: greedy, temperature, top-k, top-p, seeded.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy (argmax).
    pub temperature: f32,
    /// 0 means no top-k cut.
    pub top_k: usize,
    /// 1.0 means no nucleus cut.
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplingError {
    #[error("temperature must be a finite number >= 0, got {0}")]
    Temperature(f32),
    #[error("top_p must be in (0, 1], got {0}")]
    TopP(f32),
}

impl SamplingParams {
    pub fn validate(&self) -> Result<(), SamplingError> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(SamplingError::Temperature(self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SamplingError::TopP(self.top_p));
        }
        Ok(())
    }
}

pub struct Sampler {
    params: SamplingParams,
    rng: ChaCha8Rng,
    /// Reused between tokens: (logit, id) candidates.
    candidates: Vec<(f32, u32)>,
}

/// Index of the largest finite logit (the lowest id on ties, as llama.cpp).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Result<Sampler, SamplingError> {
        params.validate()?;
        Ok(Sampler {
            rng: ChaCha8Rng::seed_from_u64(params.seed),
            params,
            candidates: Vec::new(),
        })
    }

    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let p = &self.params;
        if p.temperature == 0.0 || p.top_k == 1 {
            return argmax(logits);
        }
        let c = &mut self.candidates;
        c.clear();
        c.extend(logits.iter().enumerate().map(|(i, &l)| (l, i as u32)));
        let by_logit_desc =
            |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if p.top_k > 0 && p.top_k < c.len() {
            c.select_nth_unstable_by(p.top_k - 1, by_logit_desc);
            c.truncate(p.top_k);
        }
        c.sort_unstable_by(by_logit_desc);
        // Softmax at temperature, in f64 so long tails do not vanish.
        let max = c[0].0 as f64;
        let t = p.temperature as f64;
        let weights: Vec<f64> = c
            .iter()
            .map(|&(l, _)| ((l as f64 - max) / t).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut keep = weights.len();
        if p.top_p < 1.0 {
            let mut acc = 0.0;
            for (i, w) in weights.iter().enumerate() {
                acc += w / total;
                if acc >= p.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
        }
        let kept_total: f64 = weights[..keep].iter().sum();
        let mut r = self.rng.gen::<f64>() * kept_total;
        for (i, w) in weights[..keep].iter().enumerate() {
            r -= w;
            if r <= 0.0 {
                return c[i].1;
            }
        }
        c[keep - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_is_argmax_with_lowest_id_on_ties() {
        let mut s = Sampler::new(SamplingParams::default()).unwrap();
        assert_eq!(s.sample(&[0.1, 3.0, 3.0, -1.0]), 1);
    }

    #[test]
    fn same_seed_same_tokens_and_cuts_respected() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let params = SamplingParams {
            temperature: 0.9,
            top_k: 5,
            top_p: 0.9,
            seed: 42,
        };
        let run = |params: &SamplingParams| {
            let mut s = Sampler::new(params.clone()).unwrap();
            (0..50).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        let a = run(&params);
        assert_eq!(a, run(&params));
        let mut top5: Vec<u32> = (0..100).collect();
        top5.sort_by(|&x, &y| {
            logits[y as usize]
                .total_cmp(&logits[x as usize])
                .then(x.cmp(&y))
        });
        assert!(a.iter().all(|id| top5[..5].contains(id)), "{a:?}");
        assert!(
            a.iter().any(|&id| id != a[0]),
            "temperature 0.9 should vary"
        );
    }

    #[test]
    fn invalid_options_are_typed_errors() {
        let bad_t = SamplingParams {
            temperature: -1.0,
            ..Default::default()
        };
        assert_eq!(
            Sampler::new(bad_t).err(),
            Some(SamplingError::Temperature(-1.0))
        );
        let bad_p = SamplingParams {
            top_p: 0.0,
            ..Default::default()
        };
        assert_eq!(Sampler::new(bad_p).err(), Some(SamplingError::TopP(0.0)));
    }
}
