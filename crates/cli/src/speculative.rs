//! `--speculative` and `--draft-tokens`: how generating commands draft.

use wick::pipeline::speculative::{Speculation, DEFAULT_DRAFT_TOKENS};
use wick::pipeline::Pipeline;

#[derive(clap::Args, Clone, Debug)]
pub struct SpeculativeArgs {
    /// Draft tokens and verify several in one pass over the weights: off,
    /// or lookup (the tokens that followed the last earlier occurrence of
    /// the text's last few tokens: prompt lookup decoding). The output is
    /// the same as without drafting.
    #[arg(long, value_name = "KIND", default_value = "off")]
    pub speculative: Speculation,
    /// Most tokens drafted a pass (with --speculative).
    #[arg(long, value_name = "K", default_value_t = DEFAULT_DRAFT_TOKENS)]
    pub draft_tokens: usize,
}

impl SpeculativeArgs {
    /// What the flags ask for.
    pub fn speculation(&self) -> Speculation {
        match self.speculative {
            Speculation::Off => Speculation::Off,
            Speculation::Lookup { .. } => Speculation::Lookup {
                draft_tokens: self.draft_tokens,
            },
        }
    }

    /// Sets it on `pipeline` (refused where the drafts do not fit a step),
    /// compiling what a pass uses unless the load skipped its warm-up.
    pub fn apply(
        &self,
        pipeline: &mut Pipeline,
        warm_up: bool,
    ) -> Result<(), wick::pipeline::PipelineError> {
        pollster::block_on(pipeline.set_speculation(self.speculation(), warm_up))
    }
}

/// A generation's drafting stats as the JSON reports write them.
pub fn stats_json(s: &wick::pipeline::speculative::SpeculativeStats) -> serde_json::Value {
    serde_json::json!({
        "drafter": s.drafter,
        "passes": s.passes,
        "drafted": s.drafted,
        "accepted": s.accepted,
        "acceptance_rate": s.acceptance_rate(),
        "tokens_per_pass": s.tokens_per_pass(),
        "plain_steps": s.plain_steps,
    })
}
