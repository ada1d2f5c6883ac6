//! A reply in the shape of OpenAI's `chat.completion` object, as the
//! browser's `chat.completions.create` answers it.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use wick::completion::Completion;

/// `model` names the loaded model as the user gave it (its file name).
pub fn chat_completion(c: &Completion, model: &str) -> Value {
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
            "message": { "role": "assistant", "content": c.text, "refusal": null },
            "logprobs": null,
            "finish_reason": c.finish_reason.openai(),
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": { "cached_tokens": c.stats.cached_tokens },
        },
    })
}
