//! The objects a chat.completions request is answered with, in OpenAI's
//! shape: `chat.completion` (the whole reply, its choices and usage) and
//! `chat.completion.chunk` (one piece of a streamed reply), with what they
//! share (id, creation time, model, fingerprint) and OpenAI's names for why
//! a reply ended.

use serde::Serialize;
use serde_json::Value;

use crate::completion::ToolCompletion;
use crate::pipeline::stopping::FinishReason;
use crate::tools::{new_call_id, ToolReply};

/// What every object of one reply carries, the chunks of a stream alike.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplyHeader {
    /// `chatcmpl-...`: opaque, unique enough (OpenAI promises no more).
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The loaded model answers whatever the request's `model` names.
    pub model: String,
    /// The engine and its version.
    pub system_fingerprint: String,
}

impl ReplyHeader {
    /// A new reply of `model`, created now.
    pub fn new(model: &str) -> ReplyHeader {
        let created = web_time::SystemTime::now()
            .duration_since(web_time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        ReplyHeader {
            id: format!("chatcmpl-{}", new_call_id().trim_start_matches("call_")),
            created,
            model: model.to_string(),
            system_fingerprint: format!("wick-{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// OpenAI's `finish_reason` for the engine's name of why a generation ended
/// (`FinishReason::as_str`, or `"tool_calls"`): a full context is `"length"`,
/// as OpenAI has no name of its own for it; the others keep theirs.
pub fn finish_reason(engine_reason: &str) -> &str {
    match engine_reason {
        "context_full" => "length",
        r => r,
    }
}

/// The engine's name of why `reply` ended: `"tool_calls"` where it made
/// calls and ended on its own.
pub fn reply_reason(reply: &ToolCompletion) -> &'static str {
    match reply.completion.finish_reason {
        FinishReason::Stop if !reply.reply.tool_calls.is_empty() => "tool_calls",
        r => r.as_str(),
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    /// Over every choice.
    pub completion_tokens: usize,
    pub total_tokens: usize,
    pub prompt_tokens_details: PromptTokensDetails,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptTokensDetails {
    /// Leading prompt tokens whose K/V the cache already held.
    pub cached_tokens: usize,
}

impl Usage {
    pub fn new(prompt_tokens: usize, completion_tokens: usize, cached_tokens: usize) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: PromptTokensDetails { cached_tokens },
        }
    }
}

/// A choice's or chunk's `logprobs`: the entries of its tokens, as the
/// engine's front ends write them (`{token, logprob, bytes, top_logprobs}`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Logprobs {
    pub content: Vec<Value>,
    /// Always null: wick never refuses.
    pub refusal: Option<String>,
}

impl Logprobs {
    pub fn new(content: Vec<Value>) -> Logprobs {
        Logprobs {
            content,
            refusal: None,
        }
    }
}

/// The assistant's message of a whole reply.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    pub role: &'static str,
    /// Null when the reply is calls only.
    pub content: Option<String>,
    pub refusal: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<Value>,
    /// The text of a template's `<think>` block, where there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

impl Message {
    /// The message of a reply's content and calls (`ToolReply::finish`ed).
    pub fn new(reply: &ToolReply, reasoning: Option<String>) -> Message {
        Message {
            role: "assistant",
            content: reply.content.clone(),
            refusal: None,
            tool_calls: reply.tool_calls.iter().map(|c| c.to_openai()).collect(),
            reasoning_content: reasoning.filter(|r| !r.is_empty()),
        }
    }

    /// The message as JSON, as a conversation's history keeps it.
    pub fn to_json(&self) -> Value {
        // A struct of strings and JSON values always serializes.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Choice {
    pub index: usize,
    pub message: Message,
    /// Present when the request asked for `logprobs`.
    pub logprobs: Option<Logprobs>,
    pub finish_reason: String,
}

/// A whole reply: `object: "chat.completion"`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChatCompletion {
    #[serde(flatten)]
    pub header: ReplyHeader,
    pub object: &'static str,
    pub choices: Vec<Choice>,
    pub usage: Usage,
}

impl ChatCompletion {
    pub fn new(header: ReplyHeader, choices: Vec<Choice>, usage: Usage) -> ChatCompletion {
        ChatCompletion {
            header,
            object: "chat.completion",
            choices,
            usage,
        }
    }

    /// The one-choice reply of a native generation, without logprobs.
    pub fn of_reply(header: ReplyHeader, reply: &ToolCompletion) -> ChatCompletion {
        let stats = &reply.completion.stats;
        let choice = Choice {
            index: 0,
            message: Message::new(&reply.reply, None),
            logprobs: None,
            finish_reason: finish_reason(reply_reason(reply)).to_string(),
        };
        let usage = Usage::new(
            stats.prompt_tokens,
            stats.generated_tokens,
            stats.cached_tokens,
        );
        ChatCompletion::new(header, vec![choice], usage)
    }
}

/// What a chunk adds to the reply; fields it does not add are left out.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// `Some(())` in the opening delta only, written `"refusal": null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<()>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<Value>,
}

impl Delta {
    /// The first chunk's: the role, empty content, no refusal.
    pub fn opening() -> Delta {
        Delta {
            role: Some("assistant"),
            content: Some(String::new()),
            refusal: Some(()),
            ..Delta::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Delta::default()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChunkChoice {
    pub index: usize,
    pub delta: Delta,
    pub logprobs: Option<Logprobs>,
    pub finish_reason: Option<String>,
}

/// One piece of a streamed reply: `object: "chat.completion.chunk"`. The
/// last of a stream that asked for usage has no choices and the usage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChatCompletionChunk {
    #[serde(flatten)]
    pub header: ReplyHeader,
    pub object: &'static str,
    pub choices: Vec<ChunkChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl ChatCompletionChunk {
    /// A chunk of the one choice a stream has.
    pub fn new(
        header: &ReplyHeader,
        delta: Delta,
        finish_reason: Option<&str>,
        logprobs: Option<Logprobs>,
    ) -> ChatCompletionChunk {
        ChatCompletionChunk {
            header: header.clone(),
            object: "chat.completion.chunk",
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                logprobs,
                finish_reason: finish_reason.map(str::to_string),
            }],
            usage: None,
        }
    }

    /// The usage chunk that ends a stream with `include_usage`.
    pub fn usage(header: &ReplyHeader, usage: Usage) -> ChatCompletionChunk {
        ChatCompletionChunk {
            header: header.clone(),
            object: "chat.completion.chunk",
            choices: Vec::new(),
            usage: Some(usage),
        }
    }
}
