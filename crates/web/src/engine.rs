//! A loaded model, as the JavaScript wrapper sees it.

use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wick::completion::openai::MAX_TOP_LOGPROBS;
use wick::constrain::Grammar;
use wick::engine::check_draft_vocabulary;
use wick::gpu::GpuContext;
use wick::pipeline::reasoning::ReasoningSplit;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::speculative::Speculation;
use wick::pipeline::stop_strings::StopStrings;
use wick::pipeline::stopping::StopCriteria;
use wick::pipeline::Pipeline;
use wick::tokenizer::chat_template::ChatTemplate;
use wick::tools::messages_for_template;
use wick::Engine;

use crate::generation::{Output, WasmGeneration};
use crate::info;
use crate::pipelines_ahead::PipelinesAhead;
use crate::shared::Shared;
use crate::tool_calls::{tool_set, ToolSplit};
use crate::{coded_field_err, field_err, from_js, js_err, js_wick_err, to_js};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct GenerateOptions {
    max_tokens: usize,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    frequency_penalty: f32,
    presence_penalty: f32,
    /// (token id, bias) pairs added to the logits.
    logit_bias: Vec<(u32, f32)>,
    seed: u64,
    /// Extra ids to stop at, besides the model's end-of-generation ids.
    stop_ids: Vec<u32>,
    /// Up to 4 strings that end the text (never emitted, even in part).
    stop: Vec<String>,
    /// Each generated token's log-probability and this many alternatives
    /// (0..=20), computed when the generation ends.
    logprobs: Option<usize>,
    /// A chat reply: split the template's `<think>` block into `reasoning`
    /// (see `wick::pipeline::reasoning` for when it applies).
    reasoning: bool,
    /// At most one grammar the output must match (constrained decoding):
    /// a JSON schema, a regular expression, or a Lark grammar.
    json_schema: Option<serde_json::Value>,
    regex: Option<String>,
    lark: Option<String>,
    /// A chat reply with tools (OpenAI's `tools` and `tool_choice`): calls
    /// parsed from the text; `"required"` or a named function decode under
    /// the tools' grammar.
    tools: Option<serde_json::Value>,
    tool_choice: Option<serde_json::Value>,
    /// Drafting for this generation ("off", "lookup", or "draft" with a
    /// draft model attached; default: the engine's, `setSpeculation`),
    /// with at most `draft_tokens` a pass.
    speculative: Option<String>,
    draft_tokens: Option<usize>,
}

/// `{ speculative, draftTokens }`: how generations draft tokens.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct SpeculationOptions {
    speculative: Option<String>,
    draft_tokens: Option<usize>,
}

impl SpeculationOptions {
    /// The setting asked for; `None` where neither field is given.
    pub(crate) fn speculation(&self) -> Result<Option<Speculation>, JsValue> {
        let kind = match (&self.speculative, self.draft_tokens) {
            (None, None) => return Ok(None),
            (None, Some(_)) => {
                return Err(field_err(
                    "draftTokens",
                    "applies with speculative: \"lookup\" or \"draft\"",
                ))
            }
            (Some(kind), _) => kind
                .parse::<Speculation>()
                .map_err(|e| field_err("speculative", &e))?,
        };
        Ok(Some(match (kind, self.draft_tokens) {
            (Speculation::Lookup { .. }, Some(draft_tokens)) => {
                Speculation::Lookup { draft_tokens }
            }
            (Speculation::Draft { .. }, Some(draft_tokens)) => Speculation::Draft { draft_tokens },
            (Speculation::Off, Some(_)) => {
                return Err(field_err(
                    "draftTokens",
                    "applies with speculative: \"lookup\" or \"draft\"",
                ))
            }
            (kind, _) => kind,
        }))
    }
}

impl GenerateOptions {
    /// The grammar asked for, if any; more than one is an error.
    fn grammar(&mut self) -> Result<Option<Grammar>, JsValue> {
        let asked = [
            self.json_schema.take().map(Grammar::JsonSchema),
            self.regex.take().map(Grammar::Regex),
            self.lark.take().map(Grammar::Lark),
        ];
        let mut asked = asked.into_iter().flatten();
        let first = asked.next();
        if asked.next().is_some() {
            return Err(field_err(
                "grammar",
                "give at most one of jsonSchema, regex and grammar",
            ));
        }
        Ok(first)
    }
}

impl Default for GenerateOptions {
    fn default() -> Self {
        let s = SamplingParams::default();
        GenerateOptions {
            max_tokens: 256,
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            repetition_penalty: s.repetition_penalty,
            frequency_penalty: s.frequency_penalty,
            presence_penalty: s.presence_penalty,
            logit_bias: Vec::new(),
            seed: 0,
            stop_ids: Vec::new(),
            stop: Vec::new(),
            logprobs: None,
            reasoning: false,
            json_schema: None,
            regex: None,
            lark: None,
            tools: None,
            tool_choice: None,
            speculative: None,
            draft_tokens: None,
        }
    }
}

#[wasm_bindgen]
pub struct WasmEngine {
    shared: Rc<Shared>,
}

impl WasmEngine {
    /// The engine over a loaded model; `ahead`: the pipelines its load
    /// created while the weights downloaded.
    pub(crate) fn new(
        engine: Engine,
        ctx: Arc<GpuContext>,
        ahead: Option<PipelinesAhead>,
    ) -> Result<WasmEngine, JsValue> {
        let template = ChatTemplate::from_gguf(&engine.gguf, &engine.tokenizer);
        let info = info::collect(&ctx, &engine, template.is_ok());
        let Engine {
            tokenizer,
            pipeline,
            ..
        } = engine;
        Ok(WasmEngine {
            shared: Rc::new(Shared {
                tokenizer,
                pipeline: RefCell::new(pipeline),
                template,
                info,
                epoch: Cell::new(0),
                disposed: Cell::new(false),
                grammars: OnceCell::new(),
                ctx,
                speculation: Cell::new(Speculation::Off),
                draft_model: Cell::new(false),
                ahead: RefCell::new(ahead),
            }),
        })
    }

    fn template(&self) -> Result<&ChatTemplate, JsValue> {
        self.shared.template.as_ref().map_err(js_err)
    }

    /// The template over messages, tools and extra variables. The kwargs go
    /// through the engine's `render_json_with_kwargs` (transformers'
    /// `chat_template_kwargs`), with `tools` added to them: the request's
    /// `tools` field wins over a `tools` inside the kwargs.
    fn render(
        &self,
        messages_json: &str,
        add_generation_prompt: bool,
        tools_json: Option<String>,
        kwargs_json: Option<String>,
    ) -> Result<String, JsValue> {
        let t = self.template()?;
        let Some(kwargs_json) = kwargs_json else {
            return t
                .render_json(messages_json, tools_json.as_deref(), add_generation_prompt)
                .map_err(js_err);
        };
        let mut kwargs: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&kwargs_json).map_err(|e| {
                field_err(
                    "chat_template_kwargs",
                    &format!("must be a JSON object ({e})"),
                )
            })?;
        if let Some(tools) = tools_json {
            let tools = serde_json::from_str(&tools)
                .map_err(|e| field_err("tools", &format!("is not valid JSON ({e})")))?;
            kwargs.insert("tools".into(), tools);
        }
        let kwargs = serde_json::Value::Object(kwargs).to_string();
        t.render_json_with_kwargs(messages_json, add_generation_prompt, &kwargs)
            .map_err(js_err)
    }
}

/// Refuses `speculation` where it drafts with a draft model and none is
/// attached.
fn check_drafter(pipeline: &Pipeline, speculation: Speculation) -> Result<(), JsValue> {
    if matches!(speculation, Speculation::Draft { .. }) && pipeline.draft_model().is_none() {
        return Err(field_err(
            "speculative",
            "\"draft\" needs a draft model: load with draftModel, or call setDraftModel",
        ));
    }
    Ok(())
}

/// What `warmUp` resolves to.
#[derive(serde::Serialize)]
struct WarmedUp {
    created: u64,
    ahead: u64,
}

#[wasm_bindgen]
impl WasmEngine {
    /// Creates every pipeline a generation uses and runs one step, so the
    /// first `generate` compiles nothing. `Engine.load` awaits it; resolves
    /// to `{ created, ahead }`: the pipelines it created (none that an
    /// earlier load on the page's GPU context already made), and how many
    /// of them the load had asked for while the weights downloaded and
    /// found compiled (`pipelines_ahead.rs`).
    #[wasm_bindgen(js_name = warmUp)]
    // The borrow held across the GPU await is the engine's one-step lock.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn warm_up(&self) -> js_sys::Promise {
        let shared = self.shared.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut pipeline = shared
                .pipeline
                .try_borrow_mut()
                .map_err(|_| js_err("the engine is busy"))?;
            // Those asked for ahead are compiled by now or soon; the
            // warm-up's creation of each then finds it compiled (one that
            // failed fails again there, named).
            let ahead = shared.ahead.borrow_mut().take();
            let ahead = match ahead {
                Some(ahead) => ahead.settle().await,
                None => 0,
            };
            let before = shared.ctx.counters.snapshot();
            pipeline.warm_up().await.map_err(js_err)?;
            let created = shared.ctx.counters.snapshot().since(before);
            to_js(&WarmedUp {
                created: created.pipelines_created,
                ahead: ahead as u64,
            })
        })
    }

    /// Sets how generations draft tokens unless they say otherwise
    /// (`{ speculative: "off" | "lookup" | "draft", draftTokens }`),
    /// creating the pipelines a verifying pass uses.
    #[wasm_bindgen(js_name = setSpeculation)]
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn set_speculation(&self, options: JsValue) -> js_sys::Promise {
        let shared = self.shared.clone();
        let o: Result<SpeculationOptions, JsValue> = from_js("speculation options", options);
        wasm_bindgen_futures::future_to_promise(async move {
            let speculation = o?.speculation()?.unwrap_or_default();
            let mut pipeline = shared
                .pipeline
                .try_borrow_mut()
                .map_err(|_| js_err("the engine is busy"))?;
            check_drafter(&pipeline, speculation)?;
            pipeline
                .set_speculation(speculation, true)
                .await
                .map_err(|e| field_err("draftTokens", &e.to_string()))?;
            shared.speculation.set(speculation);
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Attaches `draft` (another engine of this page, loaded with the same
    /// `limits`) as the draft model of `speculative: "draft"`: refused
    /// unless the two vocabularies are the same token for token (naming the
    /// first that differs). `draft` is taken: it drafts for this engine
    /// from now on, and goes with it.
    /// Call `checkDraftModel` first: what refuses `draft` is checked there,
    /// before it is taken.
    #[wasm_bindgen(js_name = setDraftModel)]
    pub fn set_draft_model(&self, draft: WasmEngine) -> Result<(), JsValue> {
        self.check_draft_model(&draft)?;
        let draft = Rc::try_unwrap(draft.shared)
            .map_err(|_| js_err("the draft engine is busy with a generation"))?;
        let mut pipeline = self
            .shared
            .pipeline
            .try_borrow_mut()
            .map_err(|_| js_err("the engine is busy"))?;
        pipeline
            .set_draft_model(draft.pipeline.into_inner())
            .map_err(js_wick_err)?;
        self.shared.draft_model.set(true);
        Ok(())
    }

    /// Whether `draft` can draft for this engine (`setDraftModel`): the
    /// same vocabulary, token for token, and the same GPU context (the
    /// page's for one `limits` choice).
    #[wasm_bindgen(js_name = checkDraftModel)]
    pub fn check_draft_model(&self, draft: &WasmEngine) -> Result<(), JsValue> {
        if draft.shared.disposed.get() {
            return Err(js_err("the draft engine was disposed"));
        }
        if !Arc::ptr_eq(&self.shared.ctx, &draft.shared.ctx) {
            return Err(field_err(
                "draftModel",
                "must be loaded with the same limits as the model (one GPU device)",
            ));
        }
        check_draft_vocabulary(&self.shared.tokenizer, &draft.shared.tokenizer)
            .map_err(|e| field_err("draftModel", &e.to_string()))
    }

    /// Adapter, features and compute path, limits, model config, and the
    /// GPU memory the engine holds now (counted at each call).
    pub fn info(&self) -> Result<JsValue, JsValue> {
        let info = to_js(&self.shared.info)?;
        let live = to_js(&info::GpuMemory::now(&self.shared.ctx))?;
        js_sys::Reflect::set(&info, &JsValue::from_str("gpuMemory"), &live)?;
        // How generations draft unless they say otherwise.
        let speculation = self.shared.speculation.get();
        let drafting = to_js(&serde_json::json!({
            "kind": speculation.to_string(),
            "draftTokens": speculation.draft_tokens(),
            "draftModel": self.shared.draft_model.get(),
        }))?;
        js_sys::Reflect::set(&info, &JsValue::from_str("speculative"), &drafting)?;
        Ok(info)
    }

    /// Token ids of `text`. Defaults as for a raw prompt: BOS where the model
    /// asks for it, special-token text not parsed.
    pub fn tokenize(
        &self,
        text: &str,
        add_special: Option<bool>,
        parse_special: Option<bool>,
    ) -> Result<Vec<u32>, JsValue> {
        self.shared
            .tokenizer
            .encode(
                text,
                add_special.unwrap_or(true),
                parse_special.unwrap_or(false),
            )
            .map_err(js_err)
    }

    /// The text of `ids`; control tokens hidden unless `skip_special` is false.
    pub fn decode(&self, ids: Vec<u32>, skip_special: Option<bool>) -> Result<String, JsValue> {
        self.shared
            .tokenizer
            .decode(&ids, skip_special.unwrap_or(true))
            .map_err(js_err)
    }

    /// The model's end-of-generation ids (EOS, end of turn ...).
    #[wasm_bindgen(js_name = stopIds)]
    pub fn stop_ids(&self) -> Vec<u32> {
        self.shared.tokenizer.stop_ids()
    }

    /// Renders the model's chat template. `messages_json`: a JSON array of
    /// `{ role, content, ... }`; `tools_json`: an optional JSON array;
    /// `kwargs_json`: an optional JSON object of more template variables
    /// (`chat_template_kwargs`: `enable_thinking` ...).
    #[wasm_bindgen(js_name = applyChatTemplate)]
    pub fn apply_chat_template(
        &self,
        messages_json: &str,
        add_generation_prompt: bool,
        tools_json: Option<String>,
        kwargs_json: Option<String>,
    ) -> Result<String, JsValue> {
        self.render(
            messages_json,
            add_generation_prompt,
            tools_json,
            kwargs_json,
        )
    }

    /// The prompt ids of a conversation: the rendered template (with the
    /// assistant's turn opened) tokenized with special tokens parsed.
    #[wasm_bindgen(js_name = encodeChat)]
    pub fn encode_chat(
        &self,
        messages_json: &str,
        tools_json: Option<String>,
        kwargs_json: Option<String>,
    ) -> Result<Vec<u32>, JsValue> {
        // An assistant turn's `tool_calls[].function.arguments` (JSON text in
        // OpenAI's messages) become objects, which templates print with
        // `tojson`; `content: null` becomes "". Not JSON: the template's own
        // parse names the problem.
        let readied = serde_json::from_str::<Vec<serde_json::Value>>(messages_json)
            .ok()
            .map(|m| serde_json::Value::from(messages_for_template(&m)).to_string());
        let messages_json = readied.as_deref().unwrap_or(messages_json);
        let text = self.render(messages_json, true, tools_json, kwargs_json)?;
        let t = self.template()?;
        t.encode(&self.shared.tokenizer, &text).map_err(js_err)
    }

    /// Checks a chat request's `tools` and `tool_choice` (JSON texts) against
    /// each other and the chat template's call format, so a bad request fails
    /// before anything runs: an `InvalidRequestError` naming the field.
    #[wasm_bindgen(js_name = checkTools)]
    pub fn check_tools(
        &self,
        tools_json: Option<String>,
        choice_json: Option<String>,
    ) -> Result<(), JsValue> {
        let parse =
            |field: &str, text: Option<String>| -> Result<Option<serde_json::Value>, JsValue> {
                text.map(|t| serde_json::from_str(&t))
                    .transpose()
                    .map_err(|e| field_err(field, &format!("is not valid JSON ({e})")))
            };
        let tools = parse("tools", tools_json)?;
        let choice = parse("tool_choice", choice_json)?;
        let source = self.shared.template.as_ref().ok().map(|t| t.source());
        tool_set(tools.as_ref(), choice.as_ref(), source)
            .map(|_| ())
            .map_err(|(field, why)| field_err(field, &why))
    }

    /// Prefills `prompt_ids` (a fresh sequence) and resolves to a
    /// `WasmGeneration`. `options`: `{ maxTokens, temperature, topK, topP,
    /// seed, stopIds }`; temperature 0 is greedy.
    // Holding the pipeline's borrow across the GPU await is the point: it is
    // the engine's "one step at a time" lock (a second caller gets "busy").
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn start(&self, prompt_ids: Vec<u32>, options: JsValue) -> js_sys::Promise {
        let shared = self.shared.clone();
        let o: Result<GenerateOptions, JsValue> = from_js("generate options", options);
        wasm_bindgen_futures::future_to_promise(async move {
            let mut o = o?;
            check_prompt(&shared, &prompt_ids)?;
            let source = shared.template.as_ref().ok().map(|t| t.source());
            let tools = tool_set(o.tools.as_ref(), o.tool_choice.as_ref(), source)
                .map_err(|(field, why)| field_err(field, &why))?;
            let mut grammar = o.grammar()?;
            if let Some(t) = tools.as_ref().filter(|t| t.constrained()) {
                if grammar.is_some() {
                    return Err(field_err(
                        "tool_choice",
                        "a forced tool call cannot also follow response_format or another grammar",
                    ));
                }
                grammar = t
                    .grammar(shared.compiler()?, &shared.tokenizer)
                    .map_err(|e| field_err("tools", &e.to_string()))?;
            }
            if grammar.is_some() && o.logprobs.is_some() {
                return Err(coded_field_err(
                    "logprobs",
                    "not supported with a grammar (response_format, or a forced tool call) yet",
                    "unsupported_field",
                ));
            }
            let stops = StopStrings::new(&o.stop).map_err(js_wick_err)?;
            if o.logprobs.is_some_and(|k| k > MAX_TOP_LOGPROBS) {
                return Err(field_err(
                    "top_logprobs",
                    &format!("must be 0..={MAX_TOP_LOGPROBS}"),
                ));
            }
            let split = match (&shared.template, o.reasoning) {
                (Ok(t), true) => {
                    let prompt = shared
                        .tokenizer
                        .decode(&prompt_ids, false)
                        .map_err(js_err)?;
                    ReasoningSplit::for_chat(t.source(), &prompt)
                }
                _ => None,
            };
            let vocab = shared.info.model.vocab_size;
            if let Some(&(bad, _)) = o.logit_bias.iter().find(|(id, _)| *id as usize >= vocab) {
                return Err(js_err(format!(
                    "logit bias token id {bad} is out of range (vocab size {vocab})"
                )));
            }
            let sampling = SamplingParams {
                temperature: o.temperature,
                top_k: o.top_k,
                top_p: o.top_p,
                min_p: o.min_p,
                repetition_penalty: o.repetition_penalty,
                frequency_penalty: o.frequency_penalty,
                presence_penalty: o.presence_penalty,
                logit_bias: o.logit_bias,
                seed: o.seed,
                ..Default::default()
            };
            let mut stop_ids = shared.tokenizer.stop_ids();
            stop_ids.extend(o.stop_ids);
            let stop = StopCriteria {
                stop_ids,
                max_tokens: o.max_tokens,
            };
            let mut pipeline = shared
                .pipeline
                .try_borrow_mut()
                .map_err(|_| js_err("the engine is busy with another generation step"))?;
            let epoch = shared.epoch.get() + 1;
            shared.epoch.set(epoch);
            let constraint = match &grammar {
                Some(g) => Some(shared.constraint(g)?),
                None => None,
            };
            // This generation's drafting, where it asks for its own: set for
            // its start (which copies it), then the engine's again.
            let asked = SpeculationOptions {
                speculative: o.speculative.take(),
                draft_tokens: o.draft_tokens,
            }
            .speculation()?;
            let engine_default = pipeline.speculation();
            let speculation = asked.unwrap_or(engine_default);
            check_drafter(&pipeline, speculation)?;
            pipeline
                .set_speculation(speculation, true)
                .await
                .map_err(|e| field_err("draftTokens", &e.to_string()))?;
            let started = pipeline
                .start_generation(&prompt_ids, &sampling, stop, constraint)
                .await;
            pipeline
                .set_speculation(engine_default, false)
                .await
                .map_err(js_wick_err)?;
            let gen = started.map_err(js_wick_err)?;
            drop(pipeline);
            let out = Output {
                stops,
                split,
                prompt: prompt_ids,
                logprobs: o.logprobs,
                tools: ToolSplit::new(tools.as_ref()),
            };
            Ok(WasmGeneration::new(shared.clone(), gen, out, epoch).into())
        })
    }

    /// Destroys the GPU device, as a driver reset or a lost GPU would: the
    /// browser tests check that what follows is a typed error and that a
    /// new load works. Not part of the JS API.
    #[wasm_bindgen(js_name = __testLoseDevice)]
    pub fn test_lose_device(&self) {
        crate::page_gpu::forget_gpu(&self.shared.ctx);
        self.shared.ctx.device.destroy();
    }

    /// Frees the model's GPU memory now (the object must not be used after).
    pub fn dispose(self) {
        self.shared.disposed.set(true);
    }
}

fn check_prompt(shared: &Shared, ids: &[u32]) -> Result<(), JsValue> {
    if shared.disposed.get() {
        return Err(js_err("the engine was disposed"));
    }
    if ids.is_empty() {
        return Err(js_err("the prompt is empty"));
    }
    let vocab = shared.info.model.vocab_size;
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
        return Err(js_err(format!(
            "prompt token id {bad} is out of range (vocab size {vocab})"
        )));
    }
    Ok(())
}
