//! A conversation with one loaded model. Each turn renders the model's chat
//! template over the whole history and generates on the same pipeline, whose
//! prefix reuse keeps the history's K/V: a turn prefills only what the last
//! one did not leave in the cache (the new message and the template's
//! framing around it).

use serde_json::Value;
use wick::completion::openai::messages::message;
use wick::completion::openai::Message;
use wick::completion::ToolCompletion;
use wick::constrain::GrammarCompiler;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stats::GenerationStats;
use wick::pipeline::stopping::StopCriteria;
use wick::tokenizer::chat_template::ChatTemplate;
use wick::tools::{messages_for_template, ToolChoice, ToolEvent, ToolSet};
use wick::{Engine, WickError};

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
    #[error("no tool call is waiting for a result")]
    NoPendingCall,
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
    /// OpenAI's `tools` array (`Value::Null`: none) and `tool_choice`.
    pub tools: Value,
    pub tool_choice: ToolChoice,
}

pub struct ChatSession {
    engine: Engine,
    template: ChatTemplate,
    settings: ReplySettings,
    /// Messages kept across every reset (the `--system` message).
    preamble: Vec<Value>,
    history: Vec<Value>,
    last_stats: Option<GenerationStats>,
    tools: Option<ToolSet>,
    /// Built at the first reply that forces calls, then kept.
    compiler: Option<GrammarCompiler>,
    /// Ids of the last reply's calls not yet answered by `tool_result`.
    pending_calls: Vec<String>,
}

impl ChatSession {
    /// A session over the model's own chat template, whose tool-call
    /// format the tools' calls follow.
    pub fn new(
        engine: Engine,
        settings: ReplySettings,
        preamble: Vec<Value>,
    ) -> Result<ChatSession, WickError> {
        let template = ChatTemplate::from_gguf(&engine.gguf, &engine.tokenizer)?;
        let tools = ToolSet::new(
            &settings.tools,
            settings.tool_choice.clone(),
            template.source(),
        )?;
        Ok(ChatSession {
            engine,
            template,
            settings,
            history: preamble.clone(),
            preamble,
            last_stats: None,
            tools,
            compiler: None,
            pending_calls: Vec::new(),
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
    ) -> Result<ToolCompletion, ChatError> {
        self.history.push(message("user", text));
        let reply = self.reply(on_text);
        if reply.is_err() {
            self.history.pop();
        }
        reply
    }

    /// A tool's result for the oldest call of the last reply not yet
    /// answered; once every call has its result, the reply to them.
    /// `None` (no reply yet) while calls are still unanswered.
    pub fn tool_result(
        &mut self,
        content: &str,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Option<ToolCompletion>, ChatError> {
        if self.pending_calls.is_empty() {
            return Err(ChatError::NoPendingCall);
        }
        let id = self.pending_calls.remove(0);
        self.history.push(serde_json::json!({
            "role": "tool", "tool_call_id": id, "content": content,
        }));
        if !self.pending_calls.is_empty() {
            return Ok(None);
        }
        let reply = self.reply(on_text);
        if reply.is_err() {
            // As a failed turn: the result can be given again.
            self.history.pop();
            self.pending_calls.insert(0, id);
        }
        reply.map(Some)
    }

    /// The assistant's reply to the history, appended to it. Content
    /// streams to `on_text`; calls come whole in the result.
    pub fn reply(
        &mut self,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<ToolCompletion, ChatError> {
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
        let s = &self.settings;
        let out = match &self.tools {
            Some(tools) => {
                if tools.constrained() && self.compiler.is_none() {
                    let vocab = self.engine.pipeline.model().config.vocab_size;
                    let compiler = GrammarCompiler::new(&self.engine.tokenizer, vocab)
                        .map_err(WickError::from)?;
                    self.compiler = Some(compiler);
                }
                let mut on_event = |e: &ToolEvent| match e {
                    ToolEvent::Content(text) => on_text(text),
                    ToolEvent::Call(_) => true,
                };
                pollster::block_on(self.engine.complete_with_tools(
                    &prompt_ids,
                    &s.sampling,
                    stop,
                    &s.stop_strings,
                    tools,
                    self.compiler.as_ref(),
                    &mut on_event,
                ))?
            }
            None => pollster::block_on(self.engine.complete(
                &prompt_ids,
                &s.sampling,
                stop,
                &s.stop_strings,
                None,
                on_text,
            ))?
            .into(),
        };
        self.history.push(Message::new(&out.reply, None).to_json());
        self.pending_calls = out.reply.tool_calls.iter().map(|c| c.id.clone()).collect();
        self.last_stats = Some(out.completion.stats.clone());
        Ok(out)
    }

    /// The history rendered with the assistant's turn opened, as ids; the
    /// tools (if any) as the template's `tools`.
    fn prompt_ids(&self) -> Result<Vec<u32>, WickError> {
        let messages = Value::from(messages_for_template(&self.history)).to_string();
        let mut kwargs: serde_json::Map<String, Value> =
            serde_json::from_str(&self.settings.kwargs)
                .map_err(|e| WickError::InvalidOption(format!("--kwargs: {e}")))?;
        if let Some(tools) = &self.tools {
            kwargs.insert("tools".into(), tools.template_tools().clone());
        }
        let kwargs = Value::Object(kwargs).to_string();
        let text = self
            .template
            .render_json_with_kwargs(&messages, true, &kwargs)?;
        Ok(self.template.encode(&self.engine.tokenizer, &text)?)
    }

    /// Forgets the conversation (but the `--system` message) and the cache's
    /// contents, so the next turn starts from nothing.
    pub fn reset(&mut self) {
        self.history = self.preamble.clone();
        self.pending_calls.clear();
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
