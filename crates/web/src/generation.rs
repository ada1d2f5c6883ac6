//! One generation, stepped from JavaScript: each `next()` runs at most one
//! decode step and resolves to the token and the text it completes.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde::Serialize;
use wasm_bindgen::prelude::*;
use wick::completion::openai::CallDelta;
use wick::pipeline::generate::Generation;
use wick::pipeline::reasoning::{ReasoningSplit, Split};
use wick::pipeline::stats::GenerationStats;
use wick::pipeline::stop_strings::StopStrings;
use wick::pipeline::stopping::FinishReason;
use wick::tokenizer::StreamState;

use crate::logprobs::{self, Entry};
use crate::shared::Shared;
use crate::tool_calls::ToolSplit;
use crate::{js_err, js_wick_err, to_js};

#[wasm_bindgen]
pub struct WasmGeneration {
    state: Rc<State>,
}

struct State {
    shared: Rc<Shared>,
    gen: RefCell<Generation>,
    /// The engine's streaming detokenizer, then the stop strings' filter:
    /// text is never emitted before it is whole characters and cannot be
    /// the start of a stop string.
    text: RefCell<StreamState>,
    stops: RefCell<StopStrings>,
    /// Then the reasoning split (chat replies whose template thinks): text
    /// inside `<think>` goes to `reasoning`, not `text`.
    split: RefCell<Option<ReasoningSplit>>,
    /// Then, with tools, content and tool calls apart.
    tools: RefCell<ToolSplit>,
    /// The prompt, for the log-probabilities computed once it ends.
    prompt: Vec<u32>,
    /// `top_logprobs` where log-probabilities were asked for.
    logprobs: Option<usize>,
    epoch: u64,
    cancelled: Cell<bool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Step {
    done: bool,
    token_id: Option<u32>,
    /// The text this token completes (may be empty: part of a character, or
    /// a control token); when done, whatever was held back. Without the
    /// reasoning, which goes to `reasoning` (empty unless the split is on).
    text: String,
    reasoning: String,
    /// The tool-call deltas this step completes, in OpenAI's stream shape.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CallDelta>,
    /// When done, if asked for: each generated token's log-probability and
    /// its `top_logprobs` alternatives, in OpenAI's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<Vec<Entry>>,
    finish_reason: Option<&'static str>,
    stats: Stats,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Stats {
    prompt_tokens: usize,
    /// Leading prompt tokens kept from the last sequence's KV cache.
    cached_tokens: usize,
    generated_tokens: usize,
    prefill_seconds: f64,
    decode_seconds: f64,
    time_to_first_token: f64,
    prefill_tokens_per_second: f64,
    decode_tokens_per_second: f64,
    /// GPU work per decode step (one submit per step is the design).
    submits_per_decode_step: f64,
    dispatches_per_decode_step: f64,
    tokens_per_submit: usize,
    bytes_read_back_per_token: f64,
    /// CPU time to record and submit one decode step.
    cpu_record_ms_per_step: f64,
    /// Stored weight bytes one decode step reads: times decode tokens/s,
    /// the memory traffic decode sustains.
    weight_bytes_per_token: u64,
    /// With speculative decoding: what was drafted and kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    speculative: Option<Drafting>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Drafting {
    drafter: String,
    /// Whether the passes ran each row as a decode step would (output bit
    /// for bit plain decoding's) or as a prompt chunk.
    exact: bool,
    /// Verifying passes (each one step over the weights).
    passes: usize,
    drafted: usize,
    accepted: usize,
    acceptance_rate: f64,
    tokens_per_pass: f64,
    /// Decode steps run without drafts (nothing to look up).
    plain_steps: usize,
}

impl From<&GenerationStats> for Stats {
    fn from(s: &GenerationStats) -> Self {
        Stats {
            prompt_tokens: s.prompt_tokens,
            cached_tokens: s.cached_tokens,
            generated_tokens: s.generated_tokens,
            prefill_seconds: s.prefill_seconds,
            decode_seconds: s.decode_seconds,
            time_to_first_token: s.time_to_first_token,
            prefill_tokens_per_second: s.prefill_tok_s(),
            decode_tokens_per_second: s.decode_tok_s(),
            submits_per_decode_step: s.per_decode_step(s.decode_counters.submits),
            dispatches_per_decode_step: s.per_decode_step(s.decode_counters.dispatches),
            tokens_per_submit: s.tokens_per_submit(),
            bytes_read_back_per_token: s.per_decode_step(s.decode_counters.bytes_read_back),
            cpu_record_ms_per_step: s.cpu_record_ms_per_step(),
            weight_bytes_per_token: s.weight_bytes_per_token,
            speculative: s.speculative.as_ref().map(|d| Drafting {
                drafter: d.drafter.clone(),
                exact: d.exact,
                passes: d.passes,
                drafted: d.drafted,
                accepted: d.accepted,
                acceptance_rate: d.acceptance_rate(),
                tokens_per_pass: d.tokens_per_pass(),
                plain_steps: d.plain_steps,
            }),
        }
    }
}

/// How a generation's text is filtered, and what it reports at the end.
pub(crate) struct Output {
    pub stops: StopStrings,
    pub split: Option<ReasoningSplit>,
    pub prompt: Vec<u32>,
    pub logprobs: Option<usize>,
    pub tools: ToolSplit,
}

impl WasmGeneration {
    pub(crate) fn new(
        shared: Rc<Shared>,
        gen: Generation,
        out: Output,
        epoch: u64,
    ) -> WasmGeneration {
        let text = StreamState::new(&shared.tokenizer, true);
        WasmGeneration {
            state: Rc::new(State {
                shared,
                gen: RefCell::new(gen),
                text: RefCell::new(text),
                stops: RefCell::new(out.stops),
                split: RefCell::new(out.split),
                tools: RefCell::new(out.tools),
                prompt: out.prompt,
                logprobs: out.logprobs,
                epoch,
                cancelled: Cell::new(false),
            }),
        }
    }
}

#[wasm_bindgen]
impl WasmGeneration {
    /// Resolves to `{ done: false, tokenId, text, stats }` for the next token,
    /// then `{ done: true, finishReason, text, stats }` once finished
    /// (`stop`, `length`, `context_full`, `cancelled`).
    // Holding the pipeline's borrow across the GPU await is the point: it is
    // the engine's "one step at a time" lock (a second caller gets "busy").
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn next(&self) -> js_sys::Promise {
        let st = self.state.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let shared = &st.shared;
            if shared.disposed.get() {
                return Err(js_err("the engine was disposed"));
            }
            if shared.epoch.get() != st.epoch {
                return Err(js_err(
                    "this generation was superseded by a newer one on the same engine",
                ));
            }
            let mut gen = st
                .gen
                .try_borrow_mut()
                .map_err(|_| js_err("next() called again before the previous call resolved"))?;
            if st.cancelled.get() {
                gen.cancel();
            }
            let tok = &shared.tokenizer;
            let (token, logprobs) = {
                let mut pipeline = shared
                    .pipeline
                    .try_borrow_mut()
                    .map_err(|_| js_err("the engine is busy with another generation step"))?;
                let token = pipeline.next_token(&mut gen).await.map_err(js_wick_err)?;
                // Right after the last token, while the cache holds the
                // generation's K/V: one prefill of the positions that sampled.
                let logprobs = match (token, st.logprobs) {
                    (None, Some(k)) => {
                        let lps = pipeline
                            .logprobs_of(&st.prompt, gen.ids(), k)
                            .await
                            .map_err(js_wick_err)?;
                        Some(logprobs::entries(tok, &lps).map_err(js_wick_err)?)
                    }
                    _ => None,
                };
                (token, logprobs)
            };
            let mut text = st.text.borrow_mut();
            let mut stops = st.stops.borrow_mut();
            let mut split = st.split.borrow_mut();
            let mut tools = st.tools.borrow_mut();
            let step = match token {
                Some(id) => {
                    let piece = stops.push(&text.push(tok, id).map_err(js_err)?);
                    if stops.matched().is_some() {
                        gen.stop_at_string();
                    }
                    let piece = split_text(&mut split, &piece, false);
                    let parted = tools.push(&piece.content, false);
                    Step {
                        done: false,
                        token_id: Some(id),
                        text: parted.content,
                        reasoning: piece.reasoning,
                        tool_calls: parted.calls,
                        logprobs: None,
                        finish_reason: None,
                        stats: gen.stats().into(),
                    }
                }
                None => {
                    let mut finish = gen.finish_reason();
                    let mut tail = String::new();
                    if stops.matched().is_none() {
                        // An unfinished character, then what was held back
                        // for a stop string (which it may still complete).
                        tail = stops.push(&text.finish(tok).map_err(js_err)?);
                        if stops.matched().is_some() {
                            finish = Some(FinishReason::Stop);
                        }
                        tail.push_str(&stops.finish());
                    }
                    let tail = split_text(&mut split, &tail, true);
                    let parted = tools.push(&tail.content, true);
                    // As OpenAI: a reply that ended on its own after calls.
                    let finish = match finish {
                        Some(FinishReason::Stop) if tools.called => Some("tool_calls"),
                        f => f.map(|r| r.as_str()),
                    };
                    Step {
                        done: true,
                        token_id: None,
                        text: parted.content,
                        reasoning: tail.reasoning,
                        tool_calls: parted.calls,
                        logprobs,
                        finish_reason: finish,
                        stats: gen.stats().into(),
                    }
                }
            };
            to_js(&step)
        })
    }

    /// Stops after the tokens already returned: the next `next()` resolves
    /// with `finishReason: "cancelled"`. Safe to call while `next()` runs.
    pub fn cancel(&self) {
        self.state.cancelled.set(true);
    }

    /// Token ids returned so far.
    pub fn ids(&self) -> Result<Vec<u32>, JsValue> {
        let gen = self
            .state
            .gen
            .try_borrow()
            .map_err(|_| js_err("a step is running"))?;
        Ok(gen.ids().to_vec())
    }
}

/// `text` through the reasoning split if it is on (all content if not);
/// `last` releases what the split held back.
fn split_text(split: &mut Option<ReasoningSplit>, text: &str, last: bool) -> Split {
    let Some(split) = split else {
        return Split {
            reasoning: String::new(),
            content: text.to_string(),
        };
    };
    let mut out = split.push(text);
    if last {
        let rest = split.finish();
        out.reasoning.push_str(&rest.reasoning);
        out.content.push_str(&rest.content);
    }
    out
}
