//! Speculative decoding: several tokens per pass over the weights.
//!
//! A drafter proposes the next few tokens cheaply; one step runs the last
//! sampled token and the drafts through the model at once (`verify`),
//! samples a token after every row on the GPU, and keeps the
//! drafts up to the first one that differs from what was sampled before it,
//! plus that sampled token. The cache positions past the kept rows are
//! given back and overwritten by the next step.
//!
//! Drafts are deterministic (a lookup, or a draft model's argmax), so the
//! acceptance rule of Leviathan et al. reduces to "sample from the model and
//! keep the draft where they agree": each kept token is the one the model
//! samples at its position from the same random number plain decoding would
//! use there (`Sampler::peek_uniforms`), so with temperature or without, a
//! seed gives the tokens plain decoding gives. Exact passes (GPUs' default)
//! compute each row as a decode step would, so the logits and the cache
//! are decode's bit for bit. Batched passes (CPU adapters' default) run as
//! a prompt chunk, whose kernels sum in other orders: logits differ in the
//! last bits, and a token whose two best logits tie within that rounding
//! can go either way.
//!
//! Drafters: `lookup` (the tokens that followed the last earlier match of
//! the sequence's last n-gram: prompt lookup decoding), and `draft` (a
//! smaller model with the same vocabulary, greedy: `draft_model`).

pub mod draft_model;
pub mod lookup;
pub mod verify;

use std::fmt;
use std::str::FromStr;

/// Most tokens one pass drafts: a pass samples one token a row, so its rows
/// (the drafts and the token before them) fit the sampler's random numbers,
/// the token ring and the logits buffer (`MAX_LOGIT_ROWS`).
pub const MAX_DRAFT_TOKENS: usize = 16;

/// Default drafted tokens a pass: with the token before them, 8 rows, what
/// one workgroup of the several-row matmul takes on every adapter (two
/// token tiles of 4, `kernels::matmul::linear::prefill_token_tiles`, or
/// where weights are textures one wide tile of 8, `WIDE_TILE_M`); a ninth
/// row doubles that work (docs/performance.md: 7 against 8).
pub const DEFAULT_DRAFT_TOKENS: usize = 7;

/// How a generation drafts tokens, if at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Speculation {
    /// One token a decode step (the default).
    #[default]
    Off,
    /// Prompt lookup: up to `draft_tokens` tokens that followed the last
    /// earlier occurrence of the sequence's last n-gram.
    Lookup { draft_tokens: usize },
    /// A draft model (`Pipeline::set_draft_model`): its `draft_tokens`
    /// greedy tokens.
    Draft { draft_tokens: usize },
}

impl Speculation {
    /// Tokens a pass drafts at most (0 when off).
    pub fn draft_tokens(self) -> usize {
        match self {
            Speculation::Off => 0,
            Speculation::Lookup { draft_tokens } | Speculation::Draft { draft_tokens } => {
                draft_tokens
            }
        }
    }

    /// Checks the draft length against what a pass of a pipeline with
    /// `step_rows`-row steps can verify.
    pub fn check(self, step_rows: usize) -> Result<(), String> {
        let k = self.draft_tokens();
        if self == Speculation::Off {
            return Ok(());
        }
        let most = MAX_DRAFT_TOKENS.min(step_rows.saturating_sub(1));
        if k == 0 || k > most {
            return Err(format!(
                "draft tokens must be 1..={most} (a pass verifies the drafts and the token before them in one step of at most {step_rows} rows, and at most {MAX_DRAFT_TOKENS} drafts), got {k}"
            ));
        }
        Ok(())
    }
}

impl FromStr for Speculation {
    type Err = String;
    /// "off", or "lookup" with the default draft length.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" | "none" => Ok(Speculation::Off),
            "lookup" => Ok(Speculation::Lookup {
                draft_tokens: DEFAULT_DRAFT_TOKENS,
            }),
            "draft" => Ok(Speculation::Draft {
                draft_tokens: DEFAULT_DRAFT_TOKENS,
            }),
            other => Err(format!(
                "unknown speculative decoding '{other}' (expected off, lookup or draft)"
            )),
        }
    }
}

impl fmt::Display for Speculation {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Speculation::Off => write!(f, "off"),
            Speculation::Lookup { .. } => write!(f, "lookup"),
            Speculation::Draft { .. } => write!(f, "draft"),
        }
    }
}

/// What drafting did in one generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpeculativeStats {
    /// Which drafter ("lookup", "draft").
    pub drafter: String,
    /// Whether the passes ran their rows as decode steps would (bit for
    /// bit plain decoding's output) or as a prompt chunk
    /// (`Pipeline::set_exact_passes`).
    pub exact: bool,
    /// Passes that verified drafts (each one step over the weights).
    pub passes: usize,
    /// Tokens drafted over all passes.
    pub drafted: usize,
    /// Drafted tokens the model agreed with (kept).
    pub accepted: usize,
    /// Tokens the passes gave: the accepted drafts and one sampled token each.
    pub tokens: usize,
    /// Decode steps that ran without drafts (no match for the lookup).
    pub plain_steps: usize,
    /// Seconds in verifying passes, and in the plain steps.
    pub pass_seconds: f64,
    pub plain_seconds: f64,
}

impl SpeculativeStats {
    /// Accepted drafts over drafted ones (0 when none were drafted).
    pub fn acceptance_rate(&self) -> f64 {
        match self.drafted {
            0 => 0.0,
            d => self.accepted as f64 / d as f64,
        }
    }
    /// Tokens a verifying pass gave on average.
    pub fn tokens_per_pass(&self) -> f64 {
        match self.passes {
            0 => 0.0,
            p => self.tokens as f64 / p as f64,
        }
    }
}
