//! What a sampling step is asked to do (`SamplingParams`, checked by
//! `validate`), and the constants both samplers share: the GPU's
//! (`kernels::sample`) and the CPU reference (`pipeline::sampling`, which
//! re-exports these), whose steps that module's doc lists.

#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy (argmax).
    pub temperature: f32,
    /// 0 means no top-k cut.
    pub top_k: usize,
    /// 1.0 means no nucleus cut.
    pub top_p: f32,
    /// 0 means no min-p cut.
    pub min_p: f32,
    /// 1 means off.
    pub repetition_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    /// How many of the latest tokens the penalties look at (the GPU history
    /// ring's capacity).
    pub penalty_last_n: usize,
    /// (token id, bias) pairs added to the logits; repeated ids add up; ids
    /// past the vocabulary are ignored.
    pub logit_bias: Vec<(u32, f32)>,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 64,
            logit_bias: Vec::new(),
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
    #[error("min_p must be in [0, 1], got {0}")]
    MinP(f32),
    #[error("repetition penalty must be a finite number > 0, got {0}")]
    RepetitionPenalty(f32),
    #[error("frequency penalty must be finite, got {0}")]
    FrequencyPenalty(f32),
    #[error("presence penalty must be finite, got {0}")]
    PresencePenalty(f32),
    #[error("penalties are on but penalty_last_n is 0: they need a history window")]
    PenaltyWindow,
    #[error("logit bias for token {id} must be finite or -inf, got {bias}")]
    LogitBias { id: u32, bias: f32 },
}

/// Logits at or below this are banned (as the softmax kernel masks them).
pub const MASKED: f32 = -1e30;
/// What a ban writes: finite, so no kernel relies on IEEE infinities.
pub const BANNED: f32 = -3.0e38;
/// Weights are integers q = floor(w * 2^31), w = exp((z - z_max) / T) <= 1.
pub const Q_SCALE: f64 = 2147483648.0;

impl SamplingParams {
    pub fn validate(&self) -> Result<(), SamplingError> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(SamplingError::Temperature(self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SamplingError::TopP(self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(SamplingError::MinP(self.min_p));
        }
        let rep = self.repetition_penalty;
        if !(rep.is_finite() && rep > 0.0) {
            return Err(SamplingError::RepetitionPenalty(rep));
        }
        if !self.frequency_penalty.is_finite() {
            return Err(SamplingError::FrequencyPenalty(self.frequency_penalty));
        }
        if !self.presence_penalty.is_finite() {
            return Err(SamplingError::PresencePenalty(self.presence_penalty));
        }
        if self.penalties_on() && self.penalty_last_n == 0 {
            return Err(SamplingError::PenaltyWindow);
        }
        for &(id, bias) in &self.logit_bias {
            if !(bias.is_finite() || bias == f32::NEG_INFINITY) {
                return Err(SamplingError::LogitBias { id, bias });
            }
        }
        Ok(())
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0 || self.top_k == 1
    }

    pub fn penalties_on(&self) -> bool {
        self.repetition_penalty != 1.0
            || self.frequency_penalty != 0.0
            || self.presence_penalty != 0.0
    }

    /// 1 / T, computed once in f32 so the GPU and the CPU scale alike
    /// (capped so a tiny T gives a huge finite factor, never inf).
    pub fn inv_temperature(&self) -> f32 {
        (1.0 / self.temperature).min(f32::MAX)
    }

    /// The penalty's divisor as a factor: GPU division need not be correctly
    /// rounded, multiplication is, on both sides.
    pub fn inv_repetition_penalty(&self) -> f32 {
        1.0 / self.repetition_penalty
    }

    /// The logit bias with repeated ids summed (in list order) and sorted by
    /// id: the form the GPU takes, ids distinct.
    pub fn merged_bias(&self) -> Vec<(u32, f32)> {
        let mut b = self.logit_bias.clone();
        b.sort_by_key(|&(id, _)| id); // stable: duplicates keep list order
        b.dedup_by(|later, first| {
            let same = later.0 == first.0;
            if same {
                first.1 += later.1;
            }
            same
        });
        b
    }
}

/// `x` in [0, 1] as a 24-bit fraction (1.0 is 2^24).
pub fn fixed24(x: f32) -> u32 {
    (x as f64 * 16777216.0).round() as u32
}
