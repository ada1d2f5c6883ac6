//! A reply assembled from a generation's steps (each step's text, reasoning
//! and call deltas as the engine releases them): gathered into one choice of
//! a `chat.completion`, or turned into the chunks of a stream. With
//! `logprobs` a stream's chunks wait for the end of the generation (the
//! engine computes log-probabilities in one prefill then), each carrying the
//! tokens generated since the chunk before it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::response::{
    finish_reason, ChatCompletionChunk, Choice, Delta, Logprobs, Message, ReplyHeader, Usage,
};
use crate::tools::{ToolCallDelta, ToolEvent, ToolReply};

/// One delta of `tool_calls`, as OpenAI streams them: the first of a call
/// carries `id`, `type` and the name, later ones append to `arguments`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallDelta {
    pub index: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub function: FunctionDelta,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: String,
}

impl From<ToolCallDelta> for CallDelta {
    fn from(d: ToolCallDelta) -> CallDelta {
        CallDelta {
            index: d.index,
            kind: d.id.as_ref().map(|_| "function".to_string()),
            id: d.id,
            function: FunctionDelta {
                name: d.name,
                arguments: d.arguments,
            },
        }
    }
}

impl From<CallDelta> for ToolCallDelta {
    fn from(d: CallDelta) -> ToolCallDelta {
        ToolCallDelta {
            index: d.index,
            id: d.id,
            name: d.function.name,
            arguments: d.function.arguments,
        }
    }
}

/// One step of a generation: the text it released, the reasoning (text of
/// a `<think>` block), call deltas, and the token it generated (none for the
/// text released when the generation ends).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Step {
    pub text: String,
    pub token_id: Option<u32>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<CallDelta>,
}

impl Step {
    /// What the step adds to a streamed reply.
    fn delta(&self) -> Delta {
        let calls = self
            .tool_calls
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok());
        Delta {
            reasoning_content: self.reasoning.clone().filter(|r| !r.is_empty()),
            content: Some(self.text.clone()).filter(|t| !t.is_empty()),
            tool_calls: calls.collect(),
            ..Delta::default()
        }
    }
}

/// One choice of a whole reply, gathered step by step.
#[derive(Default)]
pub struct ChoiceBuilder {
    reply: ToolReply,
    reasoning: String,
}

impl ChoiceBuilder {
    pub fn push(&mut self, step: Step) {
        if !step.text.is_empty() {
            self.reply.apply(&ToolEvent::Content(step.text));
        }
        self.reasoning
            .push_str(step.reasoning.as_deref().unwrap_or(""));
        for c in step.tool_calls {
            self.reply.apply(&ToolEvent::Call(c.into()));
        }
    }

    /// The choice once the generation ended for `engine_reason`, with the
    /// log-probabilities of its tokens where they were asked for.
    pub fn finish(
        mut self,
        index: usize,
        engine_reason: &str,
        logprobs: Option<Vec<Value>>,
    ) -> Choice {
        self.reply.finish();
        Choice {
            index,
            message: Message::new(&self.reply, Some(self.reasoning)),
            logprobs: logprobs.map(Logprobs::new),
            finish_reason: finish_reason(engine_reason).to_string(),
        }
    }
}

/// The chunks of a streamed reply (one choice).
pub struct ChunkStream {
    header: ReplyHeader,
    /// Whether the request asked for logprobs: chunks are then held.
    logprobs: bool,
    /// Held deltas, each with the count of tokens generated up to it.
    held: Vec<(Delta, usize)>,
    tokens: usize,
}

impl ChunkStream {
    pub fn new(header: ReplyHeader, logprobs: bool) -> ChunkStream {
        ChunkStream {
            header,
            logprobs,
            held: Vec::new(),
            tokens: 0,
        }
    }

    /// The first chunk: the assistant's role.
    pub fn opening(&self) -> ChatCompletionChunk {
        ChatCompletionChunk::new(&self.header, Delta::opening(), None, None)
    }

    /// The chunk of a step, if it released anything and chunks are not held.
    pub fn push(&mut self, step: &Step) -> Option<ChatCompletionChunk> {
        if step.token_id.is_some() {
            self.tokens += 1;
        }
        let delta = step.delta();
        if delta.is_empty() {
            return None;
        }
        if self.logprobs {
            self.held.push((delta, self.tokens));
            return None;
        }
        Some(ChatCompletionChunk::new(&self.header, delta, None, None))
    }

    /// The chunks that end the stream: the held ones with their tokens'
    /// log-probabilities (`logprobs`: one entry per generated token), the
    /// finish chunk (with the entries of tokens that released no text: a
    /// held-back stop string, an end of turn), then, as OpenAI sends it, the
    /// usage in a chunk with no choices where it is given.
    pub fn finish(
        &mut self,
        engine_reason: &str,
        logprobs: Option<Vec<Value>>,
        usage: Option<Usage>,
    ) -> Vec<ChatCompletionChunk> {
        let entries = logprobs.unwrap_or_default();
        let slice = |from: usize, to: usize| {
            let to = to.min(entries.len());
            Logprobs::new(entries[from.min(to)..to].to_vec())
        };
        let mut out = Vec::new();
        let mut from = 0;
        for (delta, upto) in std::mem::take(&mut self.held) {
            out.push(ChatCompletionChunk::new(
                &self.header,
                delta,
                None,
                Some(slice(from, upto)),
            ));
            from = upto;
        }
        let rest = (self.logprobs && from < entries.len()).then(|| slice(from, entries.len()));
        let finish = finish_reason(engine_reason);
        out.push(ChatCompletionChunk::new(
            &self.header,
            Delta::default(),
            Some(finish),
            rest,
        ));
        if let Some(usage) = usage {
            out.push(ChatCompletionChunk::usage(&self.header, usage));
        }
        out
    }
}
