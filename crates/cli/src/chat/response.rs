//! A reply in the shape of OpenAI's `chat.completion` object, as the
//! browser's `chat.completions.create` answers it.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use wick::completion::ToolCompletion;

/// `model` names the loaded model as the user gave it (its file name).
/// The message carries `tool_calls` (and a null `content` when the reply is
/// only calls) and `finish_reason` is `"tool_calls"` when the model called.
pub fn chat_completion(reply: &ToolCompletion, model: &str) -> Value {
    let c = &reply.completion;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let prompt_tokens = c.stats.prompt_tokens;
    let completion_tokens = c.stats.generated_tokens;
    json!({
        // Unique enough for one machine: OpenAI's ids are opaque strings.
        "id": format!("chatcmpl-{:x}{:x}", now.as_nanos(), std::process::id()),
        "object": "chat.completion",
        "created": now.as_secs(),
        "model": model,
        "system_fingerprint": format!("wick-{}", env!("CARGO_PKG_VERSION")),
        "choices": [{
            "index": 0,
            "message": reply.message(),
            "logprobs": null,
            "finish_reason": reply.finish_reason(),
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": { "cached_tokens": c.stats.cached_tokens },
        },
    })
}
