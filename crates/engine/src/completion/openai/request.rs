//! A chat.completions request (OpenAI's body as JSON) checked field by
//! field into what a generation takes. Every field is honoured or refused by
//! name: one outside OpenAI's API, or a value of it that wick does not
//! implement, is `unsupported`; a value outside the field's range (OpenAI's
//! ranges) is invalid. Nothing here needs the model: the tools against the
//! chat template, the grammar against the vocabulary and the prompt against
//! the context are checked where those are known.

use serde_json::{Map, Value};

use super::error::{Problem, RequestError};
use super::messages;
use crate::constrain::Grammar;
use crate::pipeline::stop_strings::MAX_STOP_STRINGS;

/// The fields a request may have. `user` is accepted and has no effect:
/// OpenAI uses it for abuse monitoring, which a local engine has no use for.
/// `model` is accepted too: the loaded model answers whatever it names.
/// Extensions beyond OpenAI's fields (as llama.cpp's and vLLM's servers name
/// them): top_k, min_p, repetition_penalty, chat_template_kwargs.
pub const FIELDS: [&str; 24] = [
    "messages",
    "model",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "seed",
    "n",
    "response_format",
    "tools",
    "tool_choice",
    "user",
    "stop",
    "logprobs",
    "top_logprobs",
    "chat_template_kwargs",
];

/// OpenAI's limit on `top_logprobs`.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// How tokens are drawn, with OpenAI's defaults where the request is silent
/// (temperature 1 and top_p 1: sampling, no cut).
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    pub temperature: f32,
    pub top_p: f32,
    /// 0: no cut.
    pub top_k: usize,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    /// (token id, bias) pairs added to the logits.
    pub logit_bias: Vec<(u32, f32)>,
    /// `None`: a random seed each generation.
    pub seed: Option<u64>,
}

/// A checked request.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The messages as the chat template takes them (text parts joined).
    pub messages: Vec<Value>,
    pub sampling: Sampling,
    /// `max_completion_tokens`, else `max_tokens`; `None`: up to the context.
    pub max_tokens: Option<usize>,
    /// At most `MAX_STOP_STRINGS` strings, none empty.
    pub stop: Vec<String>,
    /// With `logprobs: true`: the alternatives per token (`top_logprobs`, 0
    /// when not given).
    pub logprobs: Option<usize>,
    /// Choices to generate (1 when streaming).
    pub n: usize,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with the usage.
    pub include_usage: bool,
    /// What `response_format` constrains the reply to; `None`: free text.
    pub grammar: Option<Grammar>,
    /// OpenAI's `tools` (only their shape checked here) and `tool_choice`,
    /// as given.
    pub tools: Option<Value>,
    pub tool_choice: Option<Value>,
    /// More template variables (`enable_thinking` ...).
    pub chat_template_kwargs: Option<Map<String, Value>>,
}

impl ChatRequest {
    /// Checks a request body; the first field at fault is the error, the
    /// messages' first.
    pub fn parse(body: &Value) -> Result<ChatRequest, RequestError> {
        let Some(params) = body.as_object() else {
            return Err(RequestError::new("request", Problem::NotAnObject));
        };
        let field = |k: &str| params.get(k).filter(|v| !v.is_null());
        let messages = messages::check(params.get("messages").cloned().unwrap_or(Value::Null))?;
        check_fields(params)?;
        let grammar = response_format(field("response_format"))?;
        let stream = boolean(params, "stream")?.unwrap_or(false);
        let include_usage = stream_options(field("stream_options"), stream)?;
        let n = integer(params, "n", 1)?.unwrap_or(1);
        if n > 1 && stream {
            return Err(RequestError::new("n", Problem::StreamedChoices));
        }
        let max_tokens = match integer(params, "max_completion_tokens", 1)? {
            Some(m) => Some(m),
            None => integer(params, "max_tokens", 1)?,
        };
        check_tools(field("tools"))?;
        let chat_template_kwargs = match field("chat_template_kwargs") {
            None => None,
            Some(Value::Object(k)) => Some(k.clone()),
            Some(_) => {
                return Err(RequestError::new(
                    "chat_template_kwargs",
                    Problem::KwargsNotAnObject,
                ))
            }
        };
        let logprobs = logprobs(params)?;
        let sampling = Sampling {
            temperature: number(params, "temperature", 0.0, 2.0)?.unwrap_or(1.0),
            top_p: number(params, "top_p", 0.0, 1.0)?.unwrap_or(1.0),
            top_k: integer(params, "top_k", 0)?.unwrap_or(0) as usize,
            min_p: number(params, "min_p", 0.0, 1.0)?.unwrap_or(0.0),
            repetition_penalty: number(params, "repetition_penalty", 0.0, 10.0)?.unwrap_or(1.0),
            frequency_penalty: number(params, "frequency_penalty", -2.0, 2.0)?.unwrap_or(0.0),
            presence_penalty: number(params, "presence_penalty", -2.0, 2.0)?.unwrap_or(0.0),
            logit_bias: logit_bias(field("logit_bias"))?,
            seed: integer(params, "seed", 0)?,
        };
        Ok(ChatRequest {
            messages,
            sampling,
            max_tokens: max_tokens.map(|m| m as usize),
            stop: stop_strings(field("stop"))?,
            logprobs,
            n: n as usize,
            stream,
            include_usage,
            grammar,
            tools: field("tools").cloned(),
            tool_choice: field("tool_choice").cloned(),
            chat_template_kwargs,
        })
    }

    /// Whether `tool_choice` is `"none"`: the tools are then left out of the
    /// prompt (the kwargs' own `tools` too) and nothing is parsed.
    pub fn tools_off(&self) -> bool {
        self.tool_choice.as_ref().and_then(Value::as_str) == Some("none")
    }

    /// The tools the template describes and the reply may call.
    pub fn active_tools(&self) -> Option<&Value> {
        self.tools.as_ref().filter(|_| !self.tools_off())
    }

    /// The template variables, less a `tools` among them when the tools are
    /// off.
    pub fn template_kwargs(&self) -> Option<Map<String, Value>> {
        let mut kwargs = self.chat_template_kwargs.clone()?;
        if self.tools_off() {
            kwargs.remove("tools");
        }
        Some(kwargs)
    }
}

/// A value as the error quotes it.
fn json(v: &Value) -> String {
    v.to_string()
}

/// Refuses every field outside `FIELDS`, null or not (JavaScript's
/// `undefined` ones never arrive: `web/src/chat.js` leaves them out), and
/// an abort signal put in the body.
fn check_fields(params: &Map<String, Value>) -> Result<(), RequestError> {
    for k in params.keys() {
        if k == "signal" {
            return Err(RequestError::new("signal", Problem::SignalInBody));
        }
        if !FIELDS.contains(&k.as_str()) {
            return Err(RequestError::new(k.as_str(), Problem::UnknownField));
        }
    }
    Ok(())
}

fn boolean(params: &Map<String, Value>, field: &str) -> Result<Option<bool>, RequestError> {
    match params.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(RequestError::new(field, Problem::NotBoolean(json(v)))),
    }
}

/// A finite number in `[lo, hi]`.
fn number(
    params: &Map<String, Value>,
    field: &str,
    lo: f64,
    hi: f64,
) -> Result<Option<f32>, RequestError> {
    let v = match params.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    match v.as_f64() {
        Some(x) if x.is_finite() && (lo..=hi).contains(&x) => Ok(Some(x as f32)),
        _ => Err(RequestError::new(
            field,
            Problem::NotInRange {
                lo,
                hi,
                got: json(v),
            },
        )),
    }
}

/// A whole number (`3` or `3.0`) of a JSON value, if it is one and fits.
fn whole(v: &Value) -> Option<i128> {
    if let Some(i) = v.as_i64() {
        return Some(i.into());
    }
    if let Some(u) = v.as_u64() {
        return Some(u.into());
    }
    let x = v.as_f64()?;
    (x.fract() == 0.0 && x.abs() < 2f64.powi(64)).then_some(x as i128)
}

/// An integer `>= lo`.
fn integer(params: &Map<String, Value>, field: &str, lo: u64) -> Result<Option<u64>, RequestError> {
    let v = match params.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    match whole(v).and_then(|i| u64::try_from(i).ok()) {
        Some(i) if i >= lo => Ok(Some(i)),
        _ => Err(RequestError::new(
            field,
            Problem::NotIntegerFrom { lo, got: json(v) },
        )),
    }
}

/// `logprobs` / `top_logprobs` as OpenAI checks them: the number of
/// alternatives per token when log-probabilities are asked for.
fn logprobs(params: &Map<String, Value>) -> Result<Option<usize>, RequestError> {
    let on = boolean(params, "logprobs")?.unwrap_or(false);
    let top = match params.get("top_logprobs") {
        None | Some(Value::Null) => return Ok(on.then_some(0)),
        Some(v) => v,
    };
    let Some(k) = whole(top).filter(|&k| (0..=MAX_TOP_LOGPROBS as i128).contains(&k)) else {
        return Err(RequestError::new(
            "top_logprobs",
            Problem::NotIntegerUpTo {
                max: MAX_TOP_LOGPROBS,
                got: json(top),
            },
        ));
    };
    if !on {
        return Err(RequestError::new(
            "top_logprobs",
            Problem::TopLogprobsWithoutLogprobs,
        ));
    }
    Ok(Some(k as usize))
}

/// OpenAI's `logit_bias` (`{"token id": bias in [-100, 100]}`) as pairs.
fn logit_bias(bias: Option<&Value>) -> Result<Vec<(u32, f32)>, RequestError> {
    let Some(bias) = bias else {
        return Ok(Vec::new());
    };
    let err = |p| RequestError::new("logit_bias", p);
    let Some(bias) = bias.as_object() else {
        return Err(err(Problem::BiasNotAnObject));
    };
    bias.iter()
        .map(|(k, v)| {
            let id = k
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(x))
                .ok_or_else(|| err(Problem::BiasKey(json(&Value::from(k.as_str())))))?;
            match v.as_f64() {
                Some(b) if (-100.0..=100.0).contains(&b) => Ok((id as u32, b as f32)),
                _ => Err(err(Problem::BiasValue(k.clone()))),
            }
        })
        .collect()
}

/// OpenAI's `stop`: a string or up to `MAX_STOP_STRINGS` strings, none
/// empty.
fn stop_strings(stop: Option<&Value>) -> Result<Vec<String>, RequestError> {
    let err = |p| RequestError::new("stop", p);
    let list: Vec<String> = match stop {
        None => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| err(Problem::StopNotStrings))?,
        Some(_) => return Err(err(Problem::StopNotStrings)),
    };
    if list.len() > MAX_STOP_STRINGS {
        return Err(err(Problem::TooManyStops {
            max: MAX_STOP_STRINGS,
            got: list.len(),
        }));
    }
    if list.iter().any(String::is_empty) {
        return Err(err(Problem::EmptyStop));
    }
    Ok(list)
}

/// `stream_options`: only `include_usage`, and only when streaming.
fn stream_options(options: Option<&Value>, stream: bool) -> Result<bool, RequestError> {
    let Some(options) = options else {
        return Ok(false);
    };
    let Some(options) = options.as_object() else {
        return Err(RequestError::new("stream_options", Problem::NotAnObject));
    };
    if let Some(k) = options.keys().find(|k| *k != "include_usage") {
        return Err(RequestError::new(
            format!("stream_options.{k}"),
            Problem::UnknownField,
        ));
    }
    if !stream {
        return Err(RequestError::new(
            "stream_options",
            Problem::StreamOptionsWithoutStream,
        ));
    }
    Ok(boolean(options, "include_usage")
        .map_err(|e| RequestError::new("stream_options.include_usage", e.problem))?
        .unwrap_or(false))
}

/// OpenAI's `tools`, handed to the template as they are: Hugging Face's
/// templates take the same list of `{"type": "function", "function": {name,
/// description, parameters}}`, so only the shape is checked (the rest, with
/// `tool_choice`, by `crate::tools::ToolSet` against the template).
fn check_tools(tools: Option<&Value>) -> Result<(), RequestError> {
    let Some(tools) = tools else {
        return Ok(());
    };
    let Some(tools) = tools.as_array() else {
        return Err(RequestError::new("tools", Problem::NotAnArray));
    };
    for (i, t) in tools.iter().enumerate() {
        let kind = t.get("type");
        if kind.and_then(Value::as_str) != Some("function") {
            let kind = kind.map_or("undefined".into(), json);
            return Err(RequestError::new(
                format!("tools[{i}].type"),
                Problem::ToolType(kind),
            ));
        }
        if !t.pointer("/function/name").is_some_and(Value::is_string) {
            return Err(RequestError::new(
                format!("tools[{i}].function.name"),
                Problem::NotAString,
            ));
        }
    }
    Ok(())
}

/// The grammar `response_format` asks for: `{"type": "json_schema",
/// "json_schema": {name, schema, strict}}` (decoding always follows the
/// schema, strict or not), `{"type": "json_object"}` (any JSON object), or
/// none for `{"type": "text"}`.
fn response_format(format: Option<&Value>) -> Result<Option<Grammar>, RequestError> {
    let Some(format) = format else {
        return Ok(None);
    };
    let Some(format) = format.as_object() else {
        return Err(RequestError::new("response_format", Problem::NotAnObject));
    };
    let kind = format.get("type");
    match kind.and_then(Value::as_str) {
        Some("text") => return Ok(None),
        Some("json_object") => return Ok(Some(Grammar::JsonObject)),
        Some("json_schema") => {}
        _ => {
            let kind = kind.map_or("undefined".into(), json);
            return Err(RequestError::new(
                "response_format.type",
                Problem::FormatType(kind),
            ));
        }
    }
    let Some(spec) = format.get("json_schema").and_then(Value::as_object) else {
        return Err(RequestError::new(
            "response_format.json_schema",
            Problem::NoJsonSchema,
        ));
    };
    let name = spec.get("name").and_then(Value::as_str).unwrap_or("");
    let name_ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !name_ok {
        return Err(RequestError::new(
            "response_format.json_schema.name",
            Problem::BadSchemaName,
        ));
    }
    boolean(spec, "strict")
        .map_err(|e| RequestError::new("response_format.json_schema.strict", e.problem))?;
    match spec.get("schema") {
        None | Some(Value::Null) => Ok(Some(Grammar::JsonSchema(Value::Object(Map::new())))),
        Some(s @ Value::Object(_)) => Ok(Some(Grammar::JsonSchema(s.clone()))),
        Some(_) => Err(RequestError::new(
            "response_format.json_schema.schema",
            Problem::SchemaNotAnObject,
        )),
    }
}
