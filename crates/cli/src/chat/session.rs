//! A conversation with one loaded model. Each turn renders the model's chat
//! template over the whole history and generates on the same pipeline, whose
//! prefix reuse keeps the history's K/V: a turn prefills only what the last
//! one did not leave in the cache (the new message and the template's
//! framing around it).

use serde_json::Value;
use wick::completion::Completion;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stats::GenerationStats;
use wick::pipeline::stopping::StopCriteria;
use wick::tokenizer::chat_template::ChatTemplate;
use wick::{Engine, WickError};

use super::messages::message;

#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error(
        "the conversation takes {prompt_tokens} tokens with its reply's opening and the context \
         holds {ctx_len}: no room for a reply"
    )]
    ContextFull {
        prompt_tokens: usize,
        ctx_len: usize,
    },
    #[error(transparent)]
    Engine(#[from] WickError),
}

impl ChatError {
    /// Whether the model can no longer be trusted to answer (the GPU failed),
    /// as opposed to a turn the user can change (a shorter message, /reset).
    pub fn is_fatal(&self) -> bool {
        matches!(self, ChatError::Engine(WickError::Gpu(_)))
    }
}

/// How each reply is generated.
pub struct ReplySettings {
    pub sampling: SamplingParams,
    pub stop_strings: Vec<String>,
    /// At most this many tokens a reply; `None`: until the end of the turn
    /// or of the context.
    pub max_tokens: Option<usize>,
    /// More template variables: a JSON object (`{"enable_thinking": false}`).
    pub kwargs: String,
}

pub struct ChatSession {
    engine: Engine,
    template: ChatTemplate,
    settings: ReplySettings,
    /// Messages kept across every reset (the `--system` message).
    preamble: Vec<Value>,
    history: Vec<Value>,
    last_stats: Option<GenerationStats>,
}

impl ChatSession {
    /// A session over the model's own chat template.
    pub fn new(
        engine: Engine,
        settings: ReplySettings,
        preamble: Vec<Value>,
    ) -> Result<ChatSession, WickError> {
        let template = ChatTemplate::from_gguf(&engine.gguf, &engine.tokenizer)?;
        Ok(ChatSession {
            engine,
            template,
            settings,
            history: preamble.clone(),
            preamble,
            last_stats: None,
        })
    }

    /// Appends messages to the history (a conversation read from a file).
    pub fn extend(&mut self, messages: impl IntoIterator<Item = Value>) {
        self.history.extend(messages);
    }

    /// One turn: `text` as the user's message, then the reply, streamed to
    /// `on_text`. A turn that fails leaves the history as it was.
    pub fn turn(
        &mut self,
        text: &str,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Completion, ChatError> {
        self.history.push(message("user", text));
        let reply = self.reply(on_text);
        if reply.is_err() {
            self.history.pop();
        }
        reply
    }

    /// The assistant's reply to the history, appended to it.
    pub fn reply(
        &mut self,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Completion, ChatError> {
        let prompt_ids = self.prompt_ids()?;
        let ctx_len = self.engine.pipeline.ctx_len();
        if prompt_ids.len() >= ctx_len {
            return Err(ChatError::ContextFull {
                prompt_tokens: prompt_ids.len(),
                ctx_len,
            });
        }
        let stop = StopCriteria {
            stop_ids: self.engine.tokenizer.stop_ids(),
            // Unbounded, the reply ends at the end of the context.
            max_tokens: self.settings.max_tokens.unwrap_or(ctx_len),
        };
        let completion = pollster::block_on(self.engine.complete(
            &prompt_ids,
            &self.settings.sampling,
            stop,
            &self.settings.stop_strings,
            on_text,
        ))?;
        self.history.push(message("assistant", &completion.text));
        self.last_stats = Some(completion.stats.clone());
        Ok(completion)
    }

    /// The history rendered with the assistant's turn opened, as ids.
    fn prompt_ids(&self) -> Result<Vec<u32>, WickError> {
        let messages = Value::from(self.history.clone()).to_string();
        let text = self
            .template
            .render_json_with_kwargs(&messages, true, &self.settings.kwargs)?;
        Ok(self.template.encode(&self.engine.tokenizer, &text)?)
    }

    /// Forgets the conversation (but the `--system` message) and the cache's
    /// contents, so the next turn starts from nothing.
    pub fn reset(&mut self) {
        self.history = self.preamble.clone();
        self.engine.pipeline.reset();
        self.last_stats = None;
    }

    /// The last reply's numbers, if there was one since the start or reset.
    pub fn last_stats(&self) -> Option<&GenerationStats> {
        self.last_stats.as_ref()
    }

    /// Positions of the KV cache the conversation fills, and its length.
    pub fn context_used(&self) -> (usize, usize) {
        (
            self.engine.pipeline.position(),
            self.engine.pipeline.ctx_len(),
        )
    }
}
