//! Tool calls (OpenAI's `tools` and `tool_choice`): tools described to the
//! chat template, the model's calls parsed from its reply in the format the
//! template teaches (`format`), streamed as OpenAI-shaped deltas (`stream`),
//! and, for `tool_choice` `"required"` or a named function, decoding
//! constrained so the call is well formed (`grammar`).
//!
//! `tool_choice`, decided:
//! - `"auto"` (the default): tools rendered, decoding free, calls parsed.
//! - `"none"`: tools are not rendered at all and nothing is parsed, so the
//!   reply is content. (OpenAI still describes the tools; a small model shown
//!   them tends to write calls anyway, which would then leak into content.)
//! - `"required"`: one or more calls, each naming one of the tools with
//!   arguments valid under its `parameters` schema; no content.
//! - `{"type": "function", "function": {"name": N}}`: exactly one call of N.

mod format;
mod grammar;
mod reply;
mod scan;
#[cfg(test)]
mod set_tests;
mod stream;
#[cfg(test)]
mod stream_tests;

pub use format::ToolFormat;
pub use reply::ToolReply;
pub use stream::{ToolCallDelta, ToolCallStream, ToolEvent};

use serde_json::{json, Value};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ToolError {
    #[error(
        "`tools` must be an array of {{\"type\": \"function\", \"function\": {{...}}}} objects"
    )]
    NotAnArray,
    #[error("tool {index}: {reason}")]
    BadTool { index: usize, reason: String },
    #[error("two tools are named {0:?}")]
    DuplicateName(String),
    #[error("tool_choice must be \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, not {0}")]
    BadChoice(String),
    #[error("tool_choice names the function {0:?}, which is not among the tools")]
    UnknownFunction(String),
    #[error("tool_choice {0:?} needs at least one tool")]
    NoTools(&'static str),
    #[error("the chat template defines no tool-call format (known: <tool_call> as Qwen and Hermes, [TOOL_CALLS] as Mistral, Llama 3 JSON)")]
    NoFormat,
    #[error("the parameters schema of tool {tool:?} does not compile: {message}")]
    Schema { tool: String, message: String },
}

/// One function the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    /// Its JSON schema; `{"type": "object", "properties": {}}` if not given.
    pub parameters: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Function(String),
}

impl ToolChoice {
    /// OpenAI's `tool_choice` value.
    pub fn from_json(v: &Value) -> Result<ToolChoice, ToolError> {
        let name = v
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str);
        match (v.as_str(), name) {
            (Some("auto"), _) => Ok(ToolChoice::Auto),
            (Some("none"), _) => Ok(ToolChoice::None),
            (Some("required"), _) => Ok(ToolChoice::Required),
            (None, Some(name)) if v.get("type").and_then(Value::as_str) == Some("function") => {
                Ok(ToolChoice::Function(name.to_string()))
            }
            _ => Err(ToolError::BadChoice(v.to_string())),
        }
    }
}

/// A model's call: OpenAI's `{id, type: "function", function: {name,
/// arguments}}`, `arguments` being JSON text.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    pub fn to_openai(&self) -> Value {
        json!({
            "id": self.id,
            "type": "function",
            "function": { "name": self.name, "arguments": self.arguments },
        })
    }
}

/// The tools of one request, checked against each other, the choice and
/// the chat template.
#[derive(Clone, Debug)]
pub struct ToolSet {
    /// The request's `tools` as given (rendered by the template as they are).
    tools_json: Value,
    tools: Vec<Tool>,
    choice: ToolChoice,
    format: ToolFormat,
}

impl ToolSet {
    /// `tools`: OpenAI's array; `choice`: `tool_choice` (default `"auto"`);
    /// `template_source`: the chat template, whose format the calls follow.
    /// `None` when there is nothing to do: no tools, or `"none"` (see the
    /// module's notes).
    pub fn new(
        tools: &Value,
        choice: ToolChoice,
        template_source: &str,
    ) -> Result<Option<ToolSet>, ToolError> {
        let parsed = parse_tools(tools)?;
        if parsed.is_empty() {
            return match choice {
                ToolChoice::Required => Err(ToolError::NoTools("required")),
                ToolChoice::Function(_) => Err(ToolError::NoTools("function")),
                _ => Ok(None),
            };
        }
        if let ToolChoice::Function(name) = &choice {
            if !parsed.iter().any(|t| &t.name == name) {
                return Err(ToolError::UnknownFunction(name.clone()));
            }
        }
        if choice == ToolChoice::None {
            return Ok(None);
        }
        let format = ToolFormat::detect(template_source).ok_or(ToolError::NoFormat)?;
        Ok(Some(ToolSet {
            tools_json: tools.clone(),
            tools: parsed,
            choice,
            format,
        }))
    }

    pub fn format(&self) -> ToolFormat {
        self.format
    }

    pub fn choice(&self) -> &ToolChoice {
        &self.choice
    }

    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The template's `tools` variable.
    pub fn template_tools(&self) -> &Value {
        &self.tools_json
    }

    /// Whether decoding is constrained to calls (`"required"` or a named
    /// function).
    pub fn constrained(&self) -> bool {
        matches!(self.choice, ToolChoice::Required | ToolChoice::Function(_))
    }

    /// A parser for one reply.
    pub fn stream(&self) -> ToolCallStream {
        let names = self.tools.iter().map(|t| t.name.clone()).collect();
        ToolCallStream::new(self.format, names)
    }

    /// Parses a whole reply.
    pub fn parse(&self, text: &str) -> ToolReply {
        let mut stream = self.stream();
        let mut reply = ToolReply::default();
        for e in stream.push(text).iter().chain(&stream.finish()) {
            reply.apply(e);
        }
        reply.finish();
        reply
    }
}

fn parse_tools(tools: &Value) -> Result<Vec<Tool>, ToolError> {
    let items = match tools {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err(ToolError::NotAnArray),
    };
    let mut out: Vec<Tool> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let bad = |reason: &str| ToolError::BadTool {
            index,
            reason: reason.to_string(),
        };
        if item.get("type").and_then(Value::as_str) != Some("function") {
            return Err(bad("\"type\" must be \"function\""));
        }
        let f = item
            .get("function")
            .filter(|f| f.is_object())
            .ok_or_else(|| bad("no \"function\" object"))?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad("no \"function.name\" string"))?;
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => return Err(bad("\"function.parameters\" must be a JSON schema object")),
        };
        if out.iter().any(|t| t.name == name) {
            return Err(ToolError::DuplicateName(name.to_string()));
        }
        out.push(Tool {
            name: name.to_string(),
            parameters,
        });
    }
    Ok(out)
}

/// OpenAI-style messages made ready for a chat template, as transformers
/// and llama.cpp do: an assistant message's `tool_calls[].function.arguments`
/// given as JSON text becomes the object (templates print it with `tojson`),
/// and a `null` content becomes `""` (templates join content as text).
pub fn messages_for_template(messages: &[Value]) -> Vec<Value> {
    let mut out = messages.to_vec();
    for m in &mut out {
        let Some(obj) = m.as_object_mut() else {
            continue;
        };
        if obj.get("content").is_some_and(Value::is_null) {
            obj.insert("content".into(), Value::String(String::new()));
        }
        let Some(Value::Array(calls)) = obj.get_mut("tool_calls") else {
            continue;
        };
        for call in calls {
            let Some(args) = call
                .get_mut("function")
                .and_then(|f| f.get_mut("arguments"))
            else {
                continue;
            };
            if let Some(parsed) = args.as_str().and_then(|s| serde_json::from_str(s).ok()) {
                *args = parsed;
            }
        }
    }
    out
}

/// A new `call_...` id: unique within a process (a counter) and unlikely to
/// repeat across runs (the clock), which is all OpenAI promises of its ids.
pub fn new_call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // splitmix64: spreads the clock and the counter over all the bits.
    let mut z = nanos ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    format!("call_{:016x}{:04x}", z ^ (z >> 31), n & 0xffff)
}
