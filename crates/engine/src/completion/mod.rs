//! Text completions: a generation whose text is streamed as the engine's
//! detokenizer settles it (`StreamDecoder`: whole characters only) and cut at
//! stop strings (`StopStrings`: never emitted, even in part). The ids and the
//! stop tokens work as in `Pipeline::generate`; this adds the text.

pub mod openai;
mod tools;
pub use tools::ToolCompletion;

use crate::constrain::Constraint;
use crate::engine::Engine;
use crate::error::WickError;
use crate::pipeline::sampling::SamplingParams;
use crate::pipeline::stats::GenerationStats;
use crate::pipeline::stop_strings::StopStrings;
use crate::pipeline::stopping::{FinishReason, StopCriteria};
use crate::tokenizer::StreamDecoder;

pub struct Completion {
    /// Every generated id, the one that completed a stop string included.
    pub ids: Vec<u32>,
    /// The text, up to (not including) the stop string where one was found.
    pub text: String,
    pub finish_reason: FinishReason,
    /// The stop string that ended it, if one did.
    pub stop_string: Option<String>,
    pub stats: GenerationStats,
}

impl Engine {
    /// Generates from `prompt`, under `grammar` where one is given (reusing
    /// the cached prefix, as `Pipeline::start_generation` does), until a stop
    /// token, a stop string, the grammar's end, `stop.max_tokens` or the end
    /// of the context. `on_text` sees each piece of text as it becomes safe
    /// to show (special tokens skipped) and returns false to stop early.
    #[allow(clippy::too_many_arguments)]
    pub async fn complete(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: StopCriteria,
        stop_strings: &[String],
        grammar: Option<Constraint>,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Completion, WickError> {
        let mut filter = StopStrings::new(stop_strings)?;
        let mut decoder = StreamDecoder::new(&self.tokenizer, true);
        let mut text = String::new();
        // Once `on_text` has said stop, it is not called again.
        let mut listening = true;
        let mut emit = |piece: String, text: &mut String| {
            text.push_str(&piece);
            if listening && !piece.is_empty() {
                listening = on_text(&piece);
            }
            listening
        };
        let pipeline = &mut self.pipeline;
        let mut g = pipeline
            .start_generation(prompt, sampling, stop, grammar)
            .await?;
        while let Some(id) = pipeline.next_token(&mut g).await? {
            let piece = filter.push(&decoder.push(id)?);
            if filter.matched().is_some() {
                g.stop_at_string();
            }
            if !emit(piece, &mut text) {
                g.cancel();
            }
        }
        let mut finish_reason = g.finish_reason().unwrap_or(FinishReason::Cancelled);
        if filter.matched().is_none() {
            // An unfinished character, then what was held back for a stop
            // string (which the flushed character may still complete).
            let mut tail = filter.push(&decoder.finish()?);
            if filter.matched().is_some() {
                finish_reason = FinishReason::Stop;
            }
            tail.push_str(&filter.finish());
            emit(tail, &mut text);
        }
        Ok(Completion {
            ids: g.ids().to_vec(),
            text,
            finish_reason,
            stop_string: filter.matched().map(str::to_string),
            stats: g.stats().clone(),
        })
    }
}
