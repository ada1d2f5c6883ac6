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
//! - Python string and dict methods (`.strip()`, `.startswith()`, `.items()` ...)
//!   through minijinja-contrib's pycompat;
//! - `strftime_now(fmt)` for the templates that print today's date.
//!
//! The rendered text is then tokenized with special tokens parsed; see
//! [`ChatTemplate::encode`].

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{context, Environment, Error, ErrorKind};

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
        let source = source.into();
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
        let parse = |what: &str, s: &str| -> Result<Value, ChatTemplateError> {
            let v: Value = serde_json::from_str(s)
                .map_err(|e| ChatTemplateError::Messages(format!("{what}: {e}")))?;
            if v.kind() != ValueKind::Seq {
                return Err(ChatTemplateError::Messages(format!(
                    "{what} must be an array"
                )));
            }
            Ok(v)
        };
        let messages = parse("messages", messages_json)?;
        for (i, m) in messages.try_iter().into_iter().flatten().enumerate() {
            let role = m.get_attr("role").ok().filter(|r| r.as_str().is_some());
            if m.kind() != ValueKind::Map || role.is_none() {
                return Err(ChatTemplateError::Messages(format!(
                    "message {i} must be an object with a string \"role\""
                )));
            }
        }
        let tools = tools_json.map(|s| parse("tools", s)).transpose()?;
        self.render_values(messages, tools, add_generation_prompt)
    }

    fn render_values(
        &self,
        messages: Value,
        tools: Option<Value>,
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        let tmpl = self
            .env
            .template_from_str(&self.source)
            .map_err(|e| ChatTemplateError::Syntax(describe(&e)))?;
        let ctx = context! {
            messages,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
            add_generation_prompt,
            tools,
        };
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
    env
}

/// `x | tojson(indent=None)` as Python's `json.dumps(x, ensure_ascii=False, indent=indent)`.
fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    // ensure_ascii / separators are accepted; the defaults are what HF uses.
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    write_json(&value, indent, sort_keys.unwrap_or(false), 0, &mut out)?;
    Ok(Value::from(out))
}

fn write_json(
    v: &Value,
    indent: Option<usize>,
    sort_keys: bool,
    depth: usize,
    out: &mut String,
) -> Result<(), Error> {
    let newline = |out: &mut String, depth: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * depth));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if v.is_integer() {
                out.push_str(&v.to_string());
            } else {
                let f = f64::try_from(v.clone())?;
                out.push_str(&python_float(f));
            }
        }
        ValueKind::String | ValueKind::Bytes => {
            let s = v.to_str().unwrap_or_default();
            out.push_str(&serde_json::to_string(&*s).expect("strings serialize"));
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, depth + 1);
                write_json(item, indent, sort_keys, depth + 1, out)?;
            }
            newline(out, depth);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if sort_keys {
                keys.sort();
            }
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, depth + 1);
                let key = match k.as_str() {
                    Some(s) => s.to_string(),
                    None => k.to_string(),
                };
                out.push_str(&serde_json::to_string(&key).expect("strings serialize"));
                out.push_str(": ");
                write_json(&v.get_item(k)?, indent, sort_keys, depth + 1, out)?;
            }
            newline(out, depth);
            out.push('}');
        }
        ValueKind::Plain | ValueKind::Invalid => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: cannot serialize {v}"),
            ));
        }
        _ => out.push_str("null"),
    }
    Ok(())
}

/// Python's `repr(float)`: shortest round trip, `1.0` not `1`, `1e+16` exponents.
fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = f.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{f:e}"); // "1e16", "1.5e-7"
        let (mant, exp) = s.split_once('e').expect("exponent form");
        let exp: i32 = exp.parse().expect("exponent");
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", exp.abs());
    }
    format!("{f:?}")
}

/// `time.strftime` for the common codes, in UTC.
fn strftime(fmt: &str, unix_secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = unix_secs / 86400;
    let (y, m, d) = civil_from_days(days as i64);
    let secs = unix_secs % 86400;
    let weekday = DAYS[(days % 7) as usize];
    let month = MONTHS[(m - 1) as usize];
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y % 100)),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            // glibc's unpadded forms
            Some('-') => match chars.next() {
                Some('d') => out.push_str(&d.to_string()),
                Some('m') => out.push_str(&m.to_string()),
                Some(other) => out.extend(['%', '-', other]),
                None => out.push_str("%-"),
            },
            Some('B') => out.push_str(month),
            Some('b') => out.push_str(&month[..3]),
            Some('A') => out.push_str(weekday),
            Some('a') => out.push_str(&weekday[..3]),
            Some('H') => out.push_str(&format!("{:02}", secs / 3600)),
            Some('M') => out.push_str(&format!("{:02}", secs / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", secs % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
#[path = "chat_template_tests.rs"]
mod tests;
