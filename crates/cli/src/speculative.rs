//! `--speculative`, `--draft-tokens` and `--draft-model`: how generating
//! commands draft.

use std::path::PathBuf;

use wick::pipeline::speculative::{Speculation, DEFAULT_DRAFT_TOKENS};
use wick::pipeline::PipelineOptions;
use wick::Engine;

#[derive(clap::Args, Clone, Debug)]
pub struct SpeculativeArgs {
    /// Draft tokens and verify several in one pass over the weights: off;
    /// lookup (the tokens that followed the last earlier occurrence of the
    /// text's last few tokens: prompt lookup decoding); or draft (a smaller
    /// model with the same vocabulary, --draft-model). The output is the
    /// same as without drafting.
    #[arg(long, value_name = "KIND", default_value = "off")]
    pub speculative: Speculation,
    /// Most tokens drafted a pass (with --speculative).
    #[arg(long, value_name = "K", default_value_t = DEFAULT_DRAFT_TOKENS)]
    pub draft_tokens: usize,
    /// The draft model of --speculative draft: a GGUF file whose vocabulary
    /// is the model's (Qwen2.5 0.5B for Qwen2.5 1.5B).
    #[arg(long, value_name = "FILE")]
    pub draft_model: Option<PathBuf>,
    /// How a verifying pass runs its rows: exact (each as a decode step
    /// would: greedy output bit for bit plain decoding's) or batched (as a
    /// prompt chunk: cheaper on CPU adapters, but where two tokens' logits
    /// tie within rounding the output can part from plain decoding's).
    /// Default: exact on GPUs, batched on CPU adapters.
    #[arg(long, value_name = "FORM")]
    pub verify: Option<VerifyForm>,
}

/// `--verify`: how a verifying pass runs its rows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyForm {
    Exact,
    Batched,
}

impl SpeculativeArgs {
    /// What the flags ask for.
    pub fn speculation(&self) -> Speculation {
        let draft_tokens = self.draft_tokens;
        match self.speculative {
            Speculation::Off => Speculation::Off,
            Speculation::Lookup { .. } => Speculation::Lookup { draft_tokens },
            Speculation::Draft { .. } => Speculation::Draft { draft_tokens },
        }
    }

    /// Loads the draft model where one is asked for (on `engine`'s GPU
    /// context, with its context length) and sets the drafting on
    /// `engine` (refused where the drafts do not fit a step), compiling
    /// what a pass uses unless the load skipped its warm-up.
    pub fn apply(&self, engine: &mut Engine, warm_up: bool, quiet: bool) -> crate::CliResult {
        let speculation = self.speculation();
        match (speculation, &self.draft_model) {
            (Speculation::Draft { .. }, None) => {
                return Err("--speculative draft needs --draft-model FILE".into())
            }
            (Speculation::Draft { .. }, Some(path)) => {
                let opts = PipelineOptions {
                    ctx_len: Some(engine.pipeline.ctx_len()),
                    warm_up,
                    ..Default::default()
                };
                let ctx = engine.pipeline.ctx().clone();
                let draft = crate::load::load_file_on(ctx, path, &opts, quiet)?;
                engine.set_draft_model(draft.engine)?;
            }
            (_, Some(_)) => return Err("--draft-model applies with --speculative draft".into()),
            (_, None) => {}
        }
        if let Some(form) = self.verify {
            if speculation.draft_tokens() == 0 {
                return Err("--verify applies with --speculative lookup or draft".into());
            }
            let exact = form == VerifyForm::Exact;
            pollster::block_on(engine.pipeline.set_exact_passes(exact))?;
        }
        pollster::block_on(engine.pipeline.set_speculation(speculation, warm_up))?;
        Ok(())
    }
}

/// A generation's drafting stats as the JSON reports write them.
pub fn stats_json(s: &wick::pipeline::speculative::SpeculativeStats) -> serde_json::Value {
    serde_json::json!({
        "drafter": s.drafter,
        "verify": if s.exact { "exact" } else { "batched" },
        "passes": s.passes,
        "drafted": s.drafted,
        "accepted": s.accepted,
        "acceptance_rate": s.acceptance_rate(),
        "tokens_per_pass": s.tokens_per_pass(),
        "plain_steps": s.plain_steps,
        "pass_seconds": s.pass_seconds,
        "plain_seconds": s.plain_seconds,
    })
}
