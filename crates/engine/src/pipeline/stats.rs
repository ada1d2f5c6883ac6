//! Timing and GPU counters of one generation, for `--json` and `wick bench`.

use crate::gpu::CounterSnapshot;
pub use crate::pipeline::speculative::SpeculativeStats;

#[derive(Clone, Debug, Default)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    /// Leading prompt tokens whose K/V the cache already held, not prefilled
    /// again (OpenAI's `usage.prompt_tokens_details.cached_tokens`).
    pub cached_tokens: usize,
    pub generated_tokens: usize,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
    /// From the start of prefill to the first sampled token.
    pub time_to_first_token: f64,
    /// GPU counters over all decode steps (not prefill).
    pub decode_counters: CounterSnapshot,
    /// Decode steps that ran (the first token comes from prefill).
    pub decode_steps: usize,
    /// CPU time spent recording and submitting decode steps, in total
    /// (0 where the pipeline does not measure it).
    pub cpu_record_seconds: f64,
    /// Decode tokens per queue submit; 0 means not reported, read as 1
    /// (see [`tokens_per_submit`](Self::tokens_per_submit)).
    pub tokens_per_submit: usize,
    /// Stored weight bytes one decode step reads (`Decoder::weight_bytes_per_token`).
    pub weight_bytes_per_token: u64,
    /// Under a grammar: the grammar's own work.
    pub grammar: Option<GrammarStats>,
    /// With speculative decoding: what was drafted and kept.
    pub speculative: Option<SpeculativeStats>,
}

/// What following a grammar cost and gave (`Pipeline::start_generation`).
#[derive(Clone, Debug, Default)]
pub struct GrammarStats {
    /// CPU seconds spent computing masks and advancing the grammar.
    pub mask_seconds: f64,
    /// Masks computed (one per sampled token).
    pub masks: usize,
    /// Of the tokens generated, how many the grammar forced.
    pub forced_tokens: usize,
}

impl GrammarStats {
    /// Milliseconds of grammar work per sampled token.
    pub fn mask_ms_per_token(&self) -> f64 {
        if self.masks == 0 {
            0.0
        } else {
            self.mask_seconds * 1e3 / self.masks as f64
        }
    }
}

impl GenerationStats {
    pub(crate) fn add_mask_seconds(&mut self, seconds: f64) {
        if let Some(g) = &mut self.grammar {
            g.mask_seconds += seconds;
        }
    }
    /// Prompt tokens that ran through prefill.
    pub fn prefilled_tokens(&self) -> usize {
        self.prompt_tokens - self.cached_tokens
    }
    pub fn prefill_tok_s(&self) -> f64 {
        rate(self.prefilled_tokens(), self.prefill_seconds)
    }
    pub fn decode_tok_s(&self) -> f64 {
        rate(self.decode_steps, self.decode_seconds)
    }
    /// Decode tokens per queue submit: at least 1.
    pub fn tokens_per_submit(&self) -> usize {
        self.tokens_per_submit.max(1)
    }
    /// CPU milliseconds spent recording and submitting one decode step, averaged.
    pub fn cpu_record_ms_per_step(&self) -> f64 {
        if self.decode_steps == 0 {
            0.0
        } else {
            self.cpu_record_seconds * 1e3 / self.decode_steps as f64
        }
    }
    /// Per decode step, averaged.
    pub fn per_decode_step(&self, value: u64) -> f64 {
        if self.decode_steps == 0 {
            0.0
        } else {
            value as f64 / self.decode_steps as f64
        }
    }
}

fn rate(n: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}
