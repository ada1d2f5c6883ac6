//! chat.completions for the JavaScript wrapper (`web/src/chat.js`): the
//! engine's OpenAI shaping (`wick::completion::openai`) over JS values. A
//! request is checked here into the prompt's parts and `engine.tokens`
//! options; a `WasmChatReply` turns the steps of those generations into
//! `chat.completion` or `chat.completion.chunk` objects. The wrapper keeps
//! what is JavaScript's: the abort signals, the async iteration, the calls
//! to the engine.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use wasm_bindgen::prelude::*;
use wick::completion::openai::{
    ChatCompletion, ChatRequest, ChoiceBuilder, ChunkStream, ReplyHeader, RequestError, Sampling,
    Step, Usage,
};
use wick::constrain::Grammar;

use crate::{coded_field_err, field_err, from_js, js_err, to_js};

/// A request error as errors.js types it: `UnsupportedFieldError` or
/// `InvalidRequestError`, with `field`.
fn request_err(e: RequestError) -> JsValue {
    if e.unsupported() {
        coded_field_err(&e.field, &e.reason(), "unsupported_field")
    } else {
        field_err(&e.field, &e.reason())
    }
}

/// A checked request as the wrapper uses it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Checked {
    /// For the template: the messages, the tools it describes (none when
    /// `tool_choice` is `"none"`) and its extra variables.
    messages: Vec<Value>,
    tools: Option<Value>,
    kwargs: Option<Map<String, Value>>,
    stream: bool,
    include_usage: bool,
    n: usize,
    /// The tools and choice as given, for the engine's check against the
    /// template (`WasmEngine::check_tools`).
    request_tools: Option<Value>,
    tool_choice: Option<Value>,
    options: TokenOptions,
}

/// `engine.tokens` options (`web/src/index.js`, `startOptions`); null
/// leaves the engine's own choice (a random seed). `max_tokens` is the one
/// asked for: the wrapper caps it to the context the prompt leaves.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenOptions {
    max_tokens: Option<usize>,
    temperature: f32,
    top_p: f32,
    top_k: usize,
    min_p: f32,
    repetition_penalty: f32,
    frequency_penalty: f32,
    presence_penalty: f32,
    logit_bias: Vec<(u32, f32)>,
    seed: Option<u64>,
    stop: Vec<String>,
    logprobs: Option<usize>,
    /// A template with `<think>` blocks: their text goes to reasoning_content.
    reasoning: bool,
    json_schema: Option<Value>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
}

impl TokenOptions {
    fn of(r: &ChatRequest) -> TokenOptions {
        let Sampling {
            temperature,
            top_p,
            top_k,
            min_p,
            repetition_penalty,
            frequency_penalty,
            presence_penalty,
            ref logit_bias,
            seed,
        } = r.sampling;
        // `response_format` is always a JSON schema; json_object is any object.
        let json_schema = match &r.grammar {
            Some(Grammar::JsonSchema(s)) => Some(s.clone()),
            Some(_) => Some(json!({ "type": "object" })),
            None => None,
        };
        TokenOptions {
            max_tokens: r.max_tokens,
            temperature,
            top_p,
            top_k,
            min_p,
            repetition_penalty,
            frequency_penalty,
            presence_penalty,
            logit_bias: logit_bias.clone(),
            seed,
            stop: r.stop.clone(),
            logprobs: r.logprobs,
            reasoning: true,
            json_schema,
            tools: r.active_tools().cloned(),
            tool_choice: r.tool_choice.clone(),
        }
    }
}

/// Checks a chat.completions request body (a plain object) and returns
/// `{ messages, tools, kwargs, stream, includeUsage, n, requestTools,
/// toolChoice, options }`; refuses, naming the field, what it does not
/// honour.
#[wasm_bindgen(js_name = chatRequest)]
pub fn chat_request(params: JsValue) -> Result<JsValue, JsValue> {
    let body: Value = from_js("chat request", params)?;
    let r = ChatRequest::parse(&body).map_err(request_err)?;
    to_js(&Checked {
        tools: r.active_tools().cloned(),
        kwargs: r.template_kwargs(),
        stream: r.stream,
        include_usage: r.include_usage,
        n: r.n,
        request_tools: r.tools.clone(),
        tool_choice: r.tool_choice.clone(),
        options: TokenOptions::of(&r),
        messages: r.messages,
    })
}

/// What a finished `engine.tokens` run reports (its `result`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RunResult {
    finish_reason: String,
    ids: Vec<u32>,
    logprobs: Option<Vec<Value>>,
    stats: RunStats,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RunStats {
    cached_tokens: usize,
}

enum Shape {
    /// A `chat.completion`: the choices so far and the one being gathered.
    Whole {
        choices: Vec<wick::completion::openai::Choice>,
        current: ChoiceBuilder,
        completion_tokens: usize,
        cached_tokens: Option<usize>,
    },
    Stream(ChunkStream),
}

/// One reply to a request: every object of it shares the id and time.
#[wasm_bindgen]
pub struct WasmChatReply {
    header: ReplyHeader,
    shape: Shape,
    /// Whether the request asked for logprobs.
    logprobs: bool,
}

#[wasm_bindgen]
impl WasmChatReply {
    /// A reply of `model`, created now: streamed (chunks) or whole (one
    /// object).
    #[wasm_bindgen(constructor)]
    pub fn new(model: &str, stream: bool, logprobs: bool) -> WasmChatReply {
        let header = ReplyHeader::new(model);
        let shape = if stream {
            Shape::Stream(ChunkStream::new(header.clone(), logprobs))
        } else {
            Shape::Whole {
                choices: Vec::new(),
                current: ChoiceBuilder::default(),
                completion_tokens: 0,
                cached_tokens: None,
            }
        };
        WasmChatReply {
            header,
            shape,
            logprobs,
        }
    }

    /// A stream's first chunk (the assistant's role).
    pub fn opening(&self) -> Result<JsValue, JsValue> {
        match &self.shape {
            Shape::Stream(s) => to_js(&s.opening()),
            Shape::Whole { .. } => Err(js_err("opening() is for a streamed reply")),
        }
    }

    /// Takes one step of the generation (`{ text, tokenId, reasoning?,
    /// toolCalls? }`); a stream returns its chunk, or null when there is
    /// none yet.
    pub fn push(&mut self, step: JsValue) -> Result<JsValue, JsValue> {
        let step: Step = from_js("generation step", step)?;
        match &mut self.shape {
            Shape::Stream(s) => match s.push(&step) {
                Some(chunk) => to_js(&chunk),
                None => Ok(JsValue::NULL),
            },
            Shape::Whole { current, .. } => {
                current.push(step);
                Ok(JsValue::NULL)
            }
        }
    }

    /// Ends the choice being gathered with its run's `result`.
    #[wasm_bindgen(js_name = endChoice)]
    pub fn end_choice(&mut self, result: JsValue) -> Result<(), JsValue> {
        let r: RunResult = from_js("generation result", result)?;
        let logprobs = self.logprobs;
        let Shape::Whole {
            choices,
            current,
            completion_tokens,
            cached_tokens,
        } = &mut self.shape
        else {
            return Err(js_err("endChoice() is for a whole reply"));
        };
        let index = choices.len();
        let entries = logprobs.then(|| r.logprobs.unwrap_or_default());
        choices.push(std::mem::take(current).finish(index, &r.finish_reason, entries));
        *completion_tokens += r.ids.len();
        cached_tokens.get_or_insert(r.stats.cached_tokens);
        Ok(())
    }

    /// The `chat.completion` of the choices ended, for a prompt of
    /// `prompt_tokens`.
    pub fn completion(&mut self, prompt_tokens: usize) -> Result<JsValue, JsValue> {
        let Shape::Whole {
            choices,
            completion_tokens,
            cached_tokens,
            ..
        } = &mut self.shape
        else {
            return Err(js_err("completion() is for a whole reply"));
        };
        let usage = Usage::new(
            prompt_tokens,
            *completion_tokens,
            cached_tokens.unwrap_or(0),
        );
        let choices = std::mem::take(choices);
        to_js(&ChatCompletion::new(self.header.clone(), choices, usage))
    }

    /// The chunks that end a stream, given its run's `result`: the finish
    /// chunk (after the held ones, with logprobs), then the usage chunk
    /// where `include_usage`.
    pub fn finish(
        &mut self,
        result: JsValue,
        prompt_tokens: usize,
        include_usage: bool,
    ) -> Result<JsValue, JsValue> {
        let r: RunResult = from_js("generation result", result)?;
        let Shape::Stream(s) = &mut self.shape else {
            return Err(js_err("finish() is for a streamed reply"));
        };
        let usage =
            include_usage.then(|| Usage::new(prompt_tokens, r.ids.len(), r.stats.cached_tokens));
        to_js(&s.finish(&r.finish_reason, r.logprobs, usage))
    }
}
