//! A chat reply with tools: free decoding parsed as it streams (`"auto"`),
//! or decoding under the tools' grammar (`"required"`, a named function).

use crate::completion::Completion;
use crate::constrain::GrammarCompiler;
use crate::engine::Engine;
use crate::error::WickError;
use crate::pipeline::sampling::SamplingParams;
use crate::pipeline::stopping::StopCriteria;
use crate::tools::{ToolEvent, ToolReply, ToolSet};

pub struct ToolCompletion {
    /// The generation: ids, the raw text (calls in the model's syntax),
    /// finish reason and stats.
    pub completion: Completion,
    /// The text as content and calls.
    pub reply: ToolReply,
}

impl From<Completion> for ToolCompletion {
    /// A reply without tools: all of its text is content.
    fn from(completion: Completion) -> ToolCompletion {
        let reply = ToolReply {
            content: Some(completion.text.clone()),
            tool_calls: Vec::new(),
        };
        ToolCompletion { completion, reply }
    }
}

impl Engine {
    /// Generates a reply to `prompt` (a conversation rendered with
    /// `tools.template_tools()`), handing `on_event` its content and call
    /// deltas as they settle; false from it stops. Free decoding runs as
    /// `Engine::complete` (prefix reuse, stop strings). Forced calls run
    /// under the tools' grammar (stop strings do not apply: the grammar
    /// ends it). `compiler`:
    /// the model's grammar compiler, if the caller keeps one; else one is
    /// built for this call when a grammar is needed.
    #[allow(clippy::too_many_arguments)]
    pub async fn complete_with_tools(
        &mut self,
        prompt: &[u32],
        sampling: &SamplingParams,
        stop: StopCriteria,
        stop_strings: &[String],
        tools: &ToolSet,
        compiler: Option<&GrammarCompiler>,
        on_event: &mut dyn FnMut(&ToolEvent) -> bool,
    ) -> Result<ToolCompletion, WickError> {
        let mut stream = tools.stream();
        let mut reply = ToolReply::default();
        let mut listening = true;
        let mut hand_on = |events: Vec<ToolEvent>, reply: &mut ToolReply| {
            for e in &events {
                reply.apply(e);
                if listening {
                    listening = on_event(e);
                }
            }
            listening
        };
        let completion = if tools.constrained() {
            let built;
            let compiler = match compiler {
                Some(c) => c,
                None => {
                    let vocab = self.pipeline.model().config.vocab_size;
                    built = GrammarCompiler::new(&self.tokenizer, vocab)?;
                    &built
                }
            };
            let Some(grammar) = tools.grammar(compiler, &self.tokenizer)? else {
                return Err(WickError::InvalidOption(
                    "this tool_choice does not force calls".into(),
                ));
            };
            let constraint = compiler.compile(&grammar)?;
            // The grammar ends a forced call: a stop string would cut it.
            let mut on_text = |piece: &str| hand_on(stream.push(piece), &mut reply);
            self.complete(prompt, sampling, stop, &[], Some(constraint), &mut on_text)
                .await?
        } else {
            let mut on_text = |piece: &str| hand_on(stream.push(piece), &mut reply);
            self.complete(prompt, sampling, stop, stop_strings, None, &mut on_text)
                .await?
        };
        hand_on(stream.finish(), &mut reply);
        reply.finish();
        Ok(ToolCompletion { completion, reply })
    }
}
