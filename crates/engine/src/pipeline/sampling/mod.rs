//! Token sampling on the CPU, and the reference the GPU sampler
//! (`kernels::sample`) is tested against: both make the same decisions in the
//! same integer arithmetic, so they can differ only where an `exp` rounding
//! lands within ~1e-7 of a boundary (see `Decision::margin`).
//!
//! The steps, with llama.cpp's definitions, in this order:
//! 1. logit bias: `z = logit + bias` (a bias <= -1e30, `-inf` included, bans);
//! 2. penalties over the last `penalty_last_n` tokens, once per distinct token
//!    present `c` times: `z <= 0 ? z * rep : z / rep`, then
//!    `z -= c * frequency + presence`;
//! 3. with an allowed-token bitmask (constrained decoding), every token
//!    whose bit is clear is banned;
//! 4. greedy when temperature is 0 or top_k is 1: the largest `z`, lowest id on
//!    ties; otherwise
//! 5. weights `w = exp((z - z_max) / T)` held as integers `q = floor(w * 2^31)`
//!    (a token more than ~21.5 * T below the best gets q = 0 and is never
//!    drawn: at most vocab * 2^-31 of the best token's weight is lost);
//! 6. top-k: keep z >= the k-th largest z (ties at the cut all kept);
//! 7. top-p: of those, keep z >= the largest cut whose mass (sum of q over
//!    z >= cut) is >= top_p * the mass kept by top-k: the smallest prefix in
//!    descending order reaching top_p, with ties at the cut all kept;
//! 8. min-p: keep q >= min_p * q_max;
//! 9. draw: `r = floor(u * W)` over the kept mass `W`, and the first kept id in
//!    ascending id order whose running mass exceeds `r`.
//!
//! top_p and min_p act as 24-bit fractions (`fixed24`) and `u` is used to 24
//! bits, so every cut and the draw are exact integer comparisons. Entries
//! <= -1e30 count as banned; logits must not be NaN or +inf.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use crate::kernels::sample::params::{
    fixed24, SamplingError, SamplingParams, BANNED, MASKED, Q_SCALE,
};

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

/// The f32 order as u32 order: banned entries map to 0, below everything;
/// -0 and +0 map alike.
pub fn order_key(z: f32) -> u32 {
    if z <= MASKED {
        return 0;
    }
    let b = if z == 0.0 { 0 } else { z.to_bits() };
    if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// The logit whose `order_key` is `k` (k > 0).
pub fn key_value(k: u32) -> f32 {
    f32::from_bits(if k >> 31 == 1 { k & 0x7fff_ffff } else { !k })
}

/// A sampled id and how close the decision came to going another way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub id: u32,
    /// The smallest relative distance of the top-p, min-p and draw
    /// comparisons from flipping (infinite for greedy). Rounding differences
    /// in the GPU's f32 `exp` (~1e-7 relative) can flip a result only when
    /// this is that small.
    pub margin: f64,
}

/// Buffers reused between tokens.
#[derive(Default)]
pub(crate) struct Work {
    z: Vec<f32>,
    keys: Vec<u32>,
    q: Vec<u64>,
    order: Vec<u32>,
}

mod reference;
pub(crate) use reference::decide;
pub use reference::is_allowed;

/// The reference decision for one logits row given the penalty window
/// `history` and the uniform `u` (allocates; for tests and one-offs).
pub fn reference(params: &SamplingParams, logits: &[f32], history: &[u32], u: f32) -> Decision {
    decide(
        params,
        &params.merged_bias(),
        logits,
        history,
        u,
        None,
        &mut Work::default(),
    )
}

/// As `reference`, choosing only among the tokens `mask` allows (bit
/// `i % 32` of word `i / 32` set).
pub fn reference_masked(
    params: &SamplingParams,
    logits: &[f32],
    history: &[u32],
    u: f32,
    mask: &[u32],
) -> Decision {
    let bias = params.merged_bias();
    decide(
        params,
        &bias,
        logits,
        history,
        u,
        Some(mask),
        &mut Work::default(),
    )
}

pub struct Sampler {
    params: SamplingParams,
    bias: Vec<(u32, f32)>,
    rng: ChaCha8Rng,
    /// The last `penalty_last_n` tokens, oldest first.
    history: VecDeque<u32>,
    work: Work,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Result<Sampler, SamplingError> {
        params.validate()?;
        Ok(Sampler {
            rng: ChaCha8Rng::seed_from_u64(params.seed),
            bias: params.merged_bias(),
            params,
            history: VecDeque::new(),
            work: Work::default(),
        })
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// The next uniform number in [0, 1) (a multiple of 2^-24) from the
    /// seeded stream. `sample` takes exactly one per token, greedy or not; a
    /// GPU sampler fed these numbers (`randoms[step]`) draws the same tokens.
    pub fn next_uniform(&mut self) -> f32 {
        self.rng.gen::<f32>()
    }

    /// The next `n` numbers `next_uniform` would give, without taking them
    /// (a verifying pass takes only as many as it keeps tokens: `skip`).
    pub fn peek_uniforms(&self, n: usize) -> Vec<f32> {
        let mut rng = self.rng.clone();
        (0..n).map(|_| rng.gen::<f32>()).collect()
    }

    /// Takes `n` numbers unused.
    pub fn skip(&mut self, n: usize) {
        for _ in 0..n {
            self.next_uniform();
        }
    }

    /// Appends tokens to the penalty window (the prompt before the first
    /// sample; `sample` appends what it samples).
    pub fn accept(&mut self, ids: &[u32]) {
        let cap = self.params.penalty_last_n;
        for &id in ids {
            if cap == 0 {
                return;
            }
            if self.history.len() == cap {
                self.history.pop_front();
            }
            self.history.push_back(id);
        }
    }

    /// The penalty window, oldest first.
    pub fn history(&self) -> impl Iterator<Item = u32> + '_ {
        self.history.iter().copied()
    }

    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let u = self.next_uniform();
        self.sample_with(logits, u)
    }

    /// Samples with a given uniform `u` instead of the next from the stream,
    /// and appends the token to the window.
    pub fn sample_with(&mut self, logits: &[f32], u: f32) -> u32 {
        self.decide_and_accept(logits, u, None)
    }

    /// Samples the next token among those `mask` allows (the CPU form of
    /// constrained decoding's step), and appends it to the window.
    pub fn sample_masked(&mut self, logits: &[f32], mask: &[u32]) -> u32 {
        let u = self.next_uniform();
        self.decide_and_accept(logits, u, Some(mask))
    }

    fn decide_and_accept(&mut self, logits: &[f32], u: f32, mask: Option<&[u32]>) -> u32 {
        let window = self.history.make_contiguous();
        let (params, bias) = (&self.params, &self.bias);
        let d = decide(params, bias, logits, window, u, mask, &mut self.work);
        self.accept(&[d.id]);
        d.id
    }
}

#[cfg(test)]
mod tests;
