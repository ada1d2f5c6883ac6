//! Chat templates: the GGUF's `tokenizer.chat_template` (a Jinja template)
//! rendered with `minijinja` the way Hugging Face's `apply_chat_template`
//! renders it with jinja2:
//!
//! - `trim_blocks` and `lstrip_blocks` on, the template's final newline dropped;
//! - the `loopcontrols` extension (`{% break %}`, `{% continue %}`);
//! - variables `messages`, `bos_token`, `eos_token`, `add_generation_prompt`
//!   (and `tools` where given);
//! - `raise_exception(msg)` fails the render with the template's message;
//! - `tojson` as Python's `json.dumps(x, ensure_ascii=False)`: `", "` and
//!   `": "` separators, keys in their given order, no HTML escaping;
//! - `{{ x }}` and `x | string` as Python's `str(x)`: lists and dicts as their
//!   `repr`, floats as `1e-05` / `1e+16`, `True`, `None`;
//! - Python string and dict methods (`.strip()`, `.startswith()`, `.items()` ...)
//!   through minijinja-contrib's pycompat;
//! - `strftime_now(fmt)` for the templates that print today's date (UTC;
//!   [`ChatTemplate::at_time`] pins the clock);
//! - `{% generation %}...{% endgeneration %}` (transformers' assistant-mask
//!   tag) renders its body;
//! - extra variables (`chat_template_kwargs`: `enable_thinking`, `tools` ...)
//!   override the special-token texts, as transformers merges them.
//!
//! The rendered text is then tokenized with special tokens parsed; see
//! [`ChatTemplate::encode`].

use minijinja::value::{merge_maps, Value, ValueKind};
use minijinja::{context, Environment, Error, ErrorKind};

#[cfg(test)]
use super::jinja_python::{civil_from_days, python_float};
use super::jinja_python::{python_formatter, python_str, strftime, tojson};
use super::Tokenizer;
use crate::format::gguf::GgufFile;

/// The GGUF metadata key that holds the template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ChatTemplateError {
    #[error("the model has no chat template (GGUF metadata {CHAT_TEMPLATE_KEY})")]
    Missing,
    #[error("the chat template does not parse: {0}")]
    Syntax(String),
    #[error("the chat template failed to render: {0}")]
    Render(String),
    #[error("the chat template raised: {0}")]
    Raised(String),
    #[error("invalid chat messages: {0}")]
    Messages(String),
}

/// One message of a conversation: `role` is `system`, `user`, `assistant`
/// (or `tool`); `content` its text.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A parsed chat template with the special-token texts it may print.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    pub bos_token: String,
    pub eos_token: String,
}

impl ChatTemplate {
    /// The template of a GGUF file, with BOS/EOS texts from its tokenizer.
    pub fn from_gguf(file: &GgufFile, tokenizer: &Tokenizer) -> Result<Self, ChatTemplateError> {
        let source = match file.meta_str_opt(CHAT_TEMPLATE_KEY) {
            Ok(Some(s)) if !s.trim().is_empty() => s.to_string(),
            Ok(_) => return Err(ChatTemplateError::Missing),
            Err(e) => return Err(ChatTemplateError::Syntax(e.to_string())),
        };
        let text = |id: Option<u32>| {
            id.and_then(|id| tokenizer.token_text(id))
                .unwrap_or_default()
        };
        ChatTemplate::new(source, text(tokenizer.bos_id()), text(tokenizer.eos_id()))
    }

    /// Parses `source` (a syntax error is reported here, not at render time).
    pub fn new(
        source: impl Into<String>,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<Self, ChatTemplateError> {
        let source = without_generation_tags(&source.into());
        let t = ChatTemplate {
            env: environment(),
            source,
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
        };
        t.env
            .template_from_str(&t.source)
            .map_err(|e| ChatTemplateError::Syntax(describe(&e)))?;
        Ok(t)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Pins the clock `strftime_now` reads to `unix_secs` (UTC), for renders
    /// that must not change with the day (tests, caches).
    pub fn at_time(mut self, unix_secs: u64) -> Self {
        self.env
            .add_function("strftime_now", move |fmt: String| -> Result<Value, Error> {
                Ok(Value::from(strftime(&fmt, unix_secs)))
            });
        self
    }

    /// Renders `messages`; `add_generation_prompt` appends the opening of the
    /// assistant's turn.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| context! { role => m.role.as_str(), content => m.content.as_str() })
            .collect();
        self.render_values(Value::from(messages), None, add_generation_prompt)
    }

    /// Renders messages given as a JSON array of objects (any fields the
    /// template reads: `role`, `content`, `tool_calls` ...), and optionally a
    /// JSON array of tools. Object keys keep their order (for `tojson`).
    pub fn render_json(
        &self,
        messages_json: &str,
        tools_json: Option<&str>,
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        let messages = parse_messages(messages_json)?;
        let tools = tools_json.map(|s| parse_array("tools", s)).transpose()?;
        self.render_values(messages, tools, add_generation_prompt)
    }

    /// As `render_json`, with `kwargs_json`: a JSON object of more template
    /// variables (transformers' `chat_template_kwargs`, `tools` among them).
    /// They override `bos_token` / `eos_token`, as in transformers, but not
    /// `messages` or `add_generation_prompt`.
    pub fn render_json_with_kwargs(
        &self,
        messages_json: &str,
        add_generation_prompt: bool,
        kwargs_json: &str,
    ) -> Result<String, ChatTemplateError> {
        let kwargs: Value = serde_json::from_str(kwargs_json)
            .map_err(|e| ChatTemplateError::Messages(format!("kwargs: {e}")))?;
        if kwargs.kind() != ValueKind::Map {
            return Err(ChatTemplateError::Messages(
                "kwargs must be a JSON object".into(),
            ));
        }
        let messages = parse_messages(messages_json)?;
        // transformers always defines these two (None when not given).
        let given = |key: &str| kwargs.get_attr(key).ok().filter(|v| !v.is_undefined());
        self.render_context(context! {
            messages,
            add_generation_prompt,
            tools => given("tools"),
            documents => given("documents"),
            // The last map wins: kwargs over the special tokens.
            ..merge_maps([self.special_tokens(), kwargs]),
        })
    }

    fn special_tokens(&self) -> Value {
        context! {
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        }
    }

    fn render_values(
        &self,
        messages: Value,
        tools: Option<Value>,
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        self.render_context(context! {
            messages,
            add_generation_prompt,
            tools,
            ..self.special_tokens(),
        })
    }

    fn render_context(&self, ctx: Value) -> Result<String, ChatTemplateError> {
        let tmpl = self
            .env
            .template_from_str(&self.source)
            .map_err(|e| ChatTemplateError::Syntax(describe(&e)))?;
        // minijinja 2.24 panics on some inputs (a reversed slice of an empty
        // string, `''[::-1]`, indexes an empty buffer; found by fuzzing): a
        // template from a model file must not take the caller down. Natively
        // the panic becomes an error here; wasm32 builds abort on panic, so
        // there only an upstream fix helps.
        let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tmpl.render(ctx)))
            .map_err(|_| {
                ChatTemplateError::Render("the template engine panicked on this template".into())
            })?;
        rendered.map_err(|e| match raised_message(&e) {
            Some(msg) => ChatTemplateError::Raised(msg),
            None => ChatTemplateError::Render(describe(&e)),
        })
    }

    /// Token ids of a rendered conversation: special-token text (`<|im_start|>`)
    /// becomes those tokens, and BOS is added where the model's metadata asks
    /// for it unless the template already wrote it (no double BOS).
    pub fn encode(
        &self,
        tokenizer: &Tokenizer,
        rendered: &str,
    ) -> Result<Vec<u32>, super::TokenizerError> {
        let starts_with_bos = !self.bos_token.is_empty() && rendered.starts_with(&self.bos_token);
        tokenizer.encode(rendered, !starts_with_bos, true)
    }
}

fn parse_array(what: &str, json: &str) -> Result<Value, ChatTemplateError> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| ChatTemplateError::Messages(format!("{what}: {e}")))?;
    if v.kind() != ValueKind::Seq {
        return Err(ChatTemplateError::Messages(format!(
            "{what} must be an array"
        )));
    }
    Ok(v)
}

/// A JSON array of messages, each an object with a string `role`.
fn parse_messages(json: &str) -> Result<Value, ChatTemplateError> {
    let messages = parse_array("messages", json)?;
    for (i, m) in messages.try_iter().into_iter().flatten().enumerate() {
        let role = m.get_attr("role").ok().filter(|r| r.as_str().is_some());
        if m.kind() != ValueKind::Map || role.is_none() {
            return Err(ChatTemplateError::Messages(format!(
                "message {i} must be an object with a string \"role\""
            )));
        }
    }
    Ok(messages)
}

/// `source` with transformers' `{% generation %}` / `{% endgeneration %}`
/// (which only mark the assistant's tokens for training masks) made an
/// always-true `if`, so the body renders and each tag's whitespace control
/// (`-`, trim_blocks, lstrip_blocks) acts as it does in jinja2.
fn without_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(open) = rest.find("{%") {
        // The close is searched after the open's two bytes: in `{%}` the
        // `%` must not serve both.
        let Some(len) = rest[open + 2..].find("%}") else {
            break;
        };
        let end = open + 2 + len + 2;
        let tag = &rest[open..end];
        let inner = &tag[2..tag.len() - 2];
        let (left, right) = (inner.starts_with(['-', '+']), inner.ends_with(['-', '+']));
        let word = inner.trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        let replacement = match word {
            "generation" => Some("if true"),
            "endgeneration" => Some("endif"),
            _ => None,
        };
        out.push_str(&rest[..open]);
        match replacement {
            Some(r) => {
                out.push_str("{%");
                if left {
                    out.push_str(&inner[..1]);
                }
                out.push(' ');
                out.push_str(r);
                out.push(' ');
                if right {
                    out.push_str(&inner[inner.len() - 1..]);
                }
                out.push_str("%}");
            }
            None => out.push_str(tag),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Marks errors raised by `raise_exception` so they are told apart from
/// template bugs.
const RAISED: &str = "raise_exception: ";

fn raised_message(e: &Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(me) = err.downcast_ref::<Error>() {
            if let Some(msg) = me.detail().and_then(|d| d.strip_prefix(RAISED)) {
                return Some(msg.to_string());
            }
        }
        cur = err.source();
    }
    None
}

/// An error with its template line, and its causes.
fn describe(e: &Error) -> String {
    let mut s = e.to_string();
    let mut cur = std::error::Error::source(e);
    while let Some(err) = cur {
        s.push_str(": ");
        s.push_str(&err.to_string());
        cur = err.source();
    }
    s
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("{RAISED}{msg}"),
        ))
    });
    env.add_function("strftime_now", |fmt: String| -> Result<Value, Error> {
        let secs = web_time::SystemTime::now()
            .duration_since(web_time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Ok(Value::from(strftime(&fmt, secs)))
    });
    env.add_filter("tojson", tojson);
    env.add_filter("string", python_str);
    // Jinja2's `iterable`: none and undefined are not (minijinja iterates
    // them as empty). Templates test `tools is iterable and tools | length`
    // with tools none when none are given (Qwen3-Coder's).
    env.add_test("iterable", |v: Value| {
        !v.is_none() && !v.is_undefined() && v.try_iter().is_ok()
    });
    env.set_formatter(python_formatter);
    env
}

#[cfg(test)]
#[path = "chat_template_tests.rs"]
mod tests;
