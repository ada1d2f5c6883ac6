//! A Hugging Face `config.json` as the GGUF metadata llama.cpp's converter
//! would write for it: the one place HF's field names meet wick's. The
//! architectures then read their config from this metadata exactly as from a
//! GGUF file, so both formats run through the same model code.
//!
//! `model_type` llama, qwen2, gemma3_text, gemma2, phi3 and smollm3 are read.
//! Besides metadata, a config can carry tensors: Phi-3's LongRoPE factor
//! lists become `rope_factors_long.weight` / `rope_factors_short.weight`, as
//! the converter writes them (`HfConfig::tensors`).
//!
//! Fields that would change the computation but that wick's model code does
//! not implement (RoPE scaling other than Phi-3's LongRoPE, logit
//! soft-capping outside Gemma 2, a sliding-window or NoPE pattern other than
//! the one wick fixes for the architecture, a query scale other than the
//! one it derives) are refused by name rather than ignored.

use serde_json::{Map, Value};

use crate::format::gguf::MetaValue;
use crate::model::gemma2::query_scalar;
use crate::model::rope_scaling::{ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT};
use crate::model::smollm3::NO_ROPE_LAYER_STEP;
use crate::model::ModelError;

/// What the rest of the Hugging Face path needs from `config.json`.
#[derive(Clone, Debug)]
pub struct HfConfig {
    /// The GGUF architecture: "llama", "qwen2", "gemma3", "gemma2", "phi3"
    /// or "smollm3".
    pub architecture: &'static str,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// The output head is the token embedding (`lm_head.weight` unused).
    pub tied: bool,
    /// `{arch}.*` and `general.architecture` keys, as GGUF names them.
    pub metadata: Vec<(String, MetaValue)>,
    /// F32 vectors the converter makes from the config rather than from the
    /// checkpoint's tensors (Phi-3's LongRoPE factors): GGUF name and values.
    pub tensors: Vec<(String, Vec<f32>)>,
}

/// Gemma 3's fixed choices that wick's `gemma3` model hard-codes: one global
/// layer in six, local RoPE base 10000.
const GEMMA3_PATTERN: usize = 6;
const GEMMA3_LOCAL_ROPE_BASE: f64 = 10_000.0;

/// Gemma 2's soft-caps where the config has no such field (transformers'
/// `Gemma2Config` defaults: a missing field caps, an explicit `null` does not).
const GEMMA2_ATTN_SOFTCAP: f64 = 50.0;
const GEMMA2_FINAL_SOFTCAP: f64 = 30.0;

/// Transformers' defaults for a `model_type`.
struct Defaults {
    architecture: &'static str,
    tied: bool,
    rope_theta: f64,
    context: usize,
    rms_eps: f64,
}

fn config_err(msg: String) -> ModelError {
    ModelError::Config(format!("config.json: {msg}"))
}

/// Reads fields of the config object, naming the field in every error.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    /// The field, with JSON `null` read as absent (HF writes both).
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }
    fn usize_or(&self, key: &str, default: Option<usize>) -> Result<usize, ModelError> {
        match self.get(key) {
            None => default.ok_or_else(|| config_err(format!("`{key}` is missing"))),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| config_err(format!("`{key}` is {v}, not a count"))),
        }
    }
    fn usize(&self, key: &str) -> Result<usize, ModelError> {
        self.usize_or(key, None)
    }
    fn f64_or(&self, key: &str, default: f64) -> Result<f64, ModelError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .ok_or_else(|| config_err(format!("`{key}` is {v}, not a number"))),
        }
    }
    fn bool_or(&self, key: &str, default: bool) -> Result<bool, ModelError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| config_err(format!("`{key}` is {v}, not true or false"))),
        }
    }
    fn str_or<'s>(&'s self, key: &str, default: &'s str) -> Result<&'s str, ModelError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_str()
                .ok_or_else(|| config_err(format!("`{key}` is {v}, not a string"))),
        }
    }
    /// Whether the field is written as JSON `null` (not merely absent):
    /// transformers then takes none where a missing field takes a default.
    fn is_null(&self, key: &str) -> bool {
        self.0.get(key).is_some_and(Value::is_null)
    }
    /// A list field, or `None` where it is absent.
    fn list(&self, key: &str) -> Result<Option<&Vec<Value>>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_array()
                .map(Some)
                .ok_or_else(|| config_err(format!("`{key}` is {v}, not a list"))),
        }
    }
    /// Refuses a field that is present and not null: something wick does not run.
    fn absent(&self, key: &str, why: &str) -> Result<(), ModelError> {
        match self.get(key) {
            None => Ok(()),
            Some(v) => Err(config_err(format!("`{key}` is {v}: {why}"))),
        }
    }
    fn expect(&self, key: &str, want: &str, default: &str) -> Result<(), ModelError> {
        let found = self.str_or(key, default)?;
        if found != want {
            return Err(config_err(format!(
                "`{key}` is {found:?}; this architecture runs {want:?}"
            )));
        }
        Ok(())
    }
}

pub fn parse(json: &[u8]) -> Result<HfConfig, ModelError> {
    let doc: Value =
        serde_json::from_slice(json).map_err(|e| config_err(format!("not JSON: {e}")))?;
    let obj = doc
        .as_object()
        .ok_or_else(|| config_err("not a JSON object".into()))?;
    let f = Fields(obj);
    let model_type = f.str_or("model_type", "")?;
    let defaults = |architecture, tied, rope_theta, context, rms_eps| Defaults {
        architecture,
        tied,
        rope_theta,
        context,
        rms_eps,
    };
    // Those of transformers' config classes for each type.
    let d = match model_type {
        "llama" => defaults("llama", false, 10_000.0, 2048, 1e-6),
        "qwen2" => defaults("qwen2", false, 10_000.0, 32_768, 1e-6),
        "gemma3_text" => defaults("gemma3", true, 1_000_000.0, 131_072, 1e-6),
        "gemma2" => defaults("gemma2", true, 10_000.0, 8192, 1e-6),
        "phi3" => defaults("phi3", false, 10_000.0, 4096, 1e-5),
        "smollm3" => defaults("smollm3", true, 2_000_000.0, 32_768, 1e-6),
        other => {
            return Err(ModelError::UnsupportedArchitecture(format!(
                "{other} (config.json model_type; wick reads llama, qwen2, gemma3_text, \
                 gemma2, phi3 and smollm3 folders)"
            )))
        }
    };
    let architecture = d.architecture;
    let d_model = f.usize("hidden_size")?;
    let n_heads = f.usize("num_attention_heads")?;
    let n_kv_heads = f.usize_or("num_key_value_heads", Some(n_heads))?;
    let head_dim_default = matches!(architecture, "gemma3" | "gemma2")
        .then_some(256)
        .or(d_model.checked_div(n_heads));
    let head_dim = f.usize_or("head_dim", head_dim_default)?;
    let n_layers = f.usize("num_hidden_layers")?;
    let context = f.usize_or("max_position_embeddings", Some(d.context))?;
    let u = |v: usize| MetaValue::U32(v as u32);
    // Keys past the common ones, and tensors made from the config.
    let mut extra: Vec<(&str, MetaValue)> = Vec::new();
    let mut tensors = Vec::new();
    let mut n_rot = head_dim;
    let rope_theta = if architecture == "phi3" {
        let rope = phi3_rope(&f, d_model, n_heads, head_dim, context, d.rope_theta)?;
        n_rot = rope.n_rot;
        extra.push(("rope.scaling.original_context_length", u(rope.original)));
        if let Some(long) = rope.long {
            extra.push(("rope.scaling.attn_factor", MetaValue::F32(long.attn_factor)));
            tensors.push((ROPE_FACTORS_LONG.to_string(), long.long_factor));
            tensors.push((ROPE_FACTORS_SHORT.to_string(), long.short_factor));
        }
        rope.theta
    } else {
        f.absent("rope_scaling", "wick runs RoPE unscaled")?;
        rope_theta(&f, d.rope_theta)?
    };
    match architecture {
        "gemma3" => gemma3_checks(&f, head_dim, n_layers)?,
        "gemma2" => extra.extend(gemma2_checks(&f, d_model, n_heads, head_dim, n_layers)?),
        "qwen2" => {
            f.expect("hidden_act", "silu", "silu")?;
            if f.bool_or("use_sliding_window", false)? {
                return Err(config_err(
                    "`use_sliding_window` is true: wick's qwen2 attends globally".into(),
                ));
            }
        }
        "phi3" => {
            f.expect("hidden_act", "silu", "silu")?;
            // Applied on every layer, as transformers' Phi-3 does; `null` is none.
            if let Some(window) = f.get("sliding_window").map(|_| f.usize("sliding_window")) {
                extra.push(("attention.sliding_window", u(window?)));
            }
        }
        _ => {
            f.expect("hidden_act", "silu", "silu")?;
            if f.bool_or("mlp_bias", false)? {
                return Err(config_err(
                    "`mlp_bias` is true: wick's MLPs have no biases".into(),
                ));
            }
            if architecture == "smollm3" {
                smollm3_checks(&f, n_layers)?;
            }
        }
    }
    let mut keys = vec![
        ("block_count", u(n_layers)),
        ("context_length", u(context)),
        ("embedding_length", u(d_model)),
        ("feed_forward_length", u(f.usize("intermediate_size")?)),
        ("attention.head_count", u(n_heads)),
        ("attention.head_count_kv", u(n_kv_heads)),
        ("attention.key_length", u(head_dim)),
        ("attention.value_length", u(head_dim)),
        ("rope.dimension_count", u(n_rot)),
        ("rope.freq_base", MetaValue::F32(rope_theta as f32)),
        (
            "attention.layer_norm_rms_epsilon",
            MetaValue::F32(f.f64_or("rms_norm_eps", d.rms_eps)? as f32),
        ),
    ];
    if architecture == "gemma3" {
        keys.push((
            "attention.sliding_window",
            u(f.usize_or("sliding_window", Some(4096))?),
        ));
    }
    keys.extend(extra);
    let mut metadata = vec![(
        "general.architecture".to_string(),
        MetaValue::String(architecture.into()),
    )];
    metadata.extend(
        keys.into_iter()
            .map(|(k, v)| (format!("{architecture}.{k}"), v)),
    );
    Ok(HfConfig {
        architecture,
        n_layers,
        n_heads,
        n_kv_heads,
        head_dim,
        tied: f.bool_or("tie_word_embeddings", d.tied)?,
        metadata,
        tensors,
    })
}

/// The RoPE base: `rope_theta`, or newer transformers' `rope_parameters`
/// (`{"rope_type", "rope_theta"}`, or one such per attention type for
/// Gemma 3, whose sliding layers' base wick fixes). Only unscaled RoPE runs.
fn rope_theta(f: &Fields, default: f64) -> Result<f64, ModelError> {
    let Some(params) = f.get("rope_parameters") else {
        return f.f64_or("rope_theta", default);
    };
    let read = |p: &Value, what: &str, default: f64| -> Result<f64, ModelError> {
        let p = p
            .as_object()
            .ok_or_else(|| config_err(format!("`{what}` is {p}, not an object")))?;
        let p = Fields(p);
        let kind = p.str_or("rope_type", "default")?;
        if kind != "default" {
            return Err(config_err(format!(
                "`{what}.rope_type` is {kind:?}: wick runs RoPE unscaled"
            )));
        }
        p.f64_or("rope_theta", default)
    };
    match params.get("full_attention") {
        None => read(params, "rope_parameters", default),
        Some(full) => {
            if let Some(local) = params.get("sliding_attention") {
                let base = read(
                    local,
                    "rope_parameters.sliding_attention",
                    GEMMA3_LOCAL_ROPE_BASE,
                )?;
                if base != GEMMA3_LOCAL_ROPE_BASE {
                    return Err(config_err(format!(
                        "sliding layers' rope_theta is {base}: wick's gemma3 uses {GEMMA3_LOCAL_ROPE_BASE}"
                    )));
                }
            }
            read(full, "rope_parameters.full_attention", default)
        }
    }
}

/// The Gemma 3 settings wick's `gemma3` model fixes, checked against the file.
fn gemma3_checks(f: &Fields, head_dim: usize, n_layers: usize) -> Result<(), ModelError> {
    f.expect(
        "hidden_activation",
        "gelu_pytorch_tanh",
        "gelu_pytorch_tanh",
    )?;
    f.absent("final_logit_softcapping", "wick does not soft-cap logits")?;
    f.absent(
        "attn_logit_softcapping",
        "wick does not soft-cap attention scores",
    )?;
    // EmbeddingGemma's encoder: every token sees every other.
    if f.bool_or("use_bidirectional_attention", false)? {
        return Err(config_err(
            "`use_bidirectional_attention` is true: wick's gemma3 is causal".into(),
        ));
    }
    let scalar = f.f64_or("query_pre_attn_scalar", 256.0)?;
    if scalar != head_dim as f64 {
        return Err(config_err(format!(
            "`query_pre_attn_scalar` is {scalar}: wick scales scores by 1/sqrt(head_dim {head_dim})"
        )));
    }
    let local = f.f64_or("rope_local_base_freq", GEMMA3_LOCAL_ROPE_BASE)?;
    if local != GEMMA3_LOCAL_ROPE_BASE {
        return Err(config_err(format!(
            "`rope_local_base_freq` is {local}: wick's gemma3 uses {GEMMA3_LOCAL_ROPE_BASE}"
        )));
    }
    // Newer configs keep it as `_sliding_window_pattern`.
    let key = if f.get("sliding_window_pattern").is_some() {
        "sliding_window_pattern"
    } else {
        "_sliding_window_pattern"
    };
    let pattern = f.usize_or(key, Some(GEMMA3_PATTERN))?;
    if pattern != GEMMA3_PATTERN {
        return Err(config_err(format!(
            "`{key}` is {pattern}: wick's gemma3 makes every {GEMMA3_PATTERN}th layer global"
        )));
    }
    // Newer configs spell the pattern out per layer.
    layer_types(f, n_layers, "gemma3", |layer| {
        (layer + 1) % GEMMA3_PATTERN != 0
    })
}

/// Checks `layer_types`, where the config has it, against the layers wick's
/// `arch` makes sliding (`slides(layer)`) and global.
fn layer_types(
    f: &Fields,
    n_layers: usize,
    arch: &str,
    slides: impl Fn(usize) -> bool,
) -> Result<(), ModelError> {
    let Some(types) = f.list("layer_types")? else {
        return Ok(());
    };
    if types.len() < n_layers {
        return Err(config_err(format!(
            "`layer_types` has {} entries for {n_layers} layers",
            types.len()
        )));
    }
    for (layer, t) in types.iter().enumerate().take(n_layers) {
        let want = match slides(layer) {
            true => "sliding_attention",
            false => "full_attention",
        };
        if t.as_str() != Some(want) {
            return Err(config_err(format!(
                "`layer_types[{layer}]` is {t}: wick's {arch} makes layer {layer} {want}"
            )));
        }
    }
    Ok(())
}

/// The Gemma 2 settings wick's `gemma2` model fixes, checked against the
/// file, and the keys it reads that the common ones do not cover.
fn gemma2_checks(
    f: &Fields,
    d_model: usize,
    n_heads: usize,
    head_dim: usize,
    n_layers: usize,
) -> Result<Vec<(&'static str, MetaValue)>, ModelError> {
    f.expect(
        "hidden_activation",
        "gelu_pytorch_tanh",
        "gelu_pytorch_tanh",
    )?;
    if f.bool_or("use_bidirectional_attention", false)? {
        return Err(config_err(
            "`use_bidirectional_attention` is true: wick's gemma2 is causal".into(),
        ));
    }
    // GGUF does not carry the scalar: wick's gemma2 (as llama.cpp) derives
    // it from the layer count (`gemma2::attn_scale`).
    let derived = query_scalar(n_layers, d_model, n_heads.max(1), head_dim);
    let scalar = f.f64_or("query_pre_attn_scalar", 256.0)?;
    if scalar != derived as f64 {
        return Err(config_err(format!(
            "`query_pre_attn_scalar` is {scalar}: wick's gemma2 scales scores by \
             1/sqrt({derived}) for {n_layers} layers"
        )));
    }
    // Layers 0, 2, 4, ... slide (transformers: (layer + 1) % 2 != 0).
    layer_types(f, n_layers, "gemma2", |layer| layer % 2 == 0)?;
    let mut keys = Vec::new();
    if f.is_null("sliding_window") {
        return Err(config_err(
            "`sliding_window` is null: wick's gemma2 slides every other layer".into(),
        ));
    }
    let window = f.usize_or("sliding_window", Some(4096))?;
    keys.push(("attention.sliding_window", MetaValue::U32(window as u32)));
    for (key, default) in [
        ("attn_logit_softcapping", GEMMA2_ATTN_SOFTCAP),
        ("final_logit_softcapping", GEMMA2_FINAL_SOFTCAP),
    ] {
        // `null` turns the cap off; a missing field is transformers' default.
        if f.is_null(key) {
            continue;
        }
        let cap = f.f64_or(key, default)?;
        if !(cap.is_finite() && cap > 0.0) {
            return Err(config_err(format!(
                "`{key}` is {cap}: a soft-cap must be finite and > 0"
            )));
        }
        keys.push((key, MetaValue::F32(cap as f32)));
    }
    Ok(keys)
}

/// SmolLM3's NoPE layers: wick's `smollm3` fixes them at every
/// `NO_ROPE_LAYER_STEP`-th layer (3, 7, ...).
fn smollm3_checks(f: &Fields, n_layers: usize) -> Result<(), ModelError> {
    if f.bool_or("use_sliding_window", false)? {
        return Err(config_err(
            "`use_sliding_window` is true: wick's smollm3 attends globally".into(),
        ));
    }
    let interval = f.usize_or("no_rope_layer_interval", Some(NO_ROPE_LAYER_STEP))?;
    if interval != NO_ROPE_LAYER_STEP {
        return Err(config_err(format!(
            "`no_rope_layer_interval` is {interval}: wick's smollm3 skips RoPE on every \
             {NO_ROPE_LAYER_STEP}th layer"
        )));
    }
    let Some(layers) = f.list("no_rope_layers")? else {
        return Ok(());
    };
    if layers.len() < n_layers {
        return Err(config_err(format!(
            "`no_rope_layers` has {} entries for {n_layers} layers",
            layers.len()
        )));
    }
    for (layer, v) in layers.iter().enumerate().take(n_layers) {
        // 1: the layer rotates; 0: it has no position embedding.
        let want = ((layer + 1) % NO_ROPE_LAYER_STEP != 0) as u64;
        if v.as_u64() != Some(want) {
            return Err(config_err(format!(
                "`no_rope_layers[{layer}]` is {v}: wick's smollm3 {} layer {layer}",
                if want == 1 {
                    "rotates"
                } else {
                    "does not rotate"
                }
            )));
        }
    }
    Ok(())
}

/// Phi-3's RoPE as llama.cpp's converter writes it.
struct Phi3Rope {
    theta: f64,
    /// Rotated dimensions of a head (`partial_rotary_factor`).
    n_rot: usize,
    /// `original_max_position_embeddings`: where LongRoPE's long factors start.
    original: usize,
    long: Option<LongRope>,
}

struct LongRope {
    long_factor: Vec<f32>,
    short_factor: Vec<f32>,
    attn_factor: f32,
}

/// What a Phi-3 RoPE object may hold: anything else is refused by name.
const PHI3_ROPE_KEYS: [&str; 9] = [
    "type",
    "rope_type",
    "long_factor",
    "short_factor",
    "attention_factor",
    "factor",
    "original_max_position_embeddings",
    "rope_theta",
    "partial_rotary_factor",
];

/// Phi-3's RoPE: plain, or LongRoPE (Phi-3.5, Phi-3 128k) from
/// `rope_scaling` (or newer transformers' `rope_parameters`), as the
/// converter (`Phi3MiniModel`) reads it: `type` "longrope" (or the older
/// "su"), `long_factor` and `short_factor` lists of `n_rot / 2` divisors, and
/// cos/sin scaled by sqrt(1 + ln(s) / ln(original)) where s = context /
/// original > 1 (else 1). Transformers honours an explicit
/// `attention_factor` in place of that; so does wick (the converter ignores
/// it). Phi-3's "yarn" type is refused: the converter and transformers give
/// it different attention factors.
fn phi3_rope(
    f: &Fields,
    d_model: usize,
    n_heads: usize,
    head_dim: usize,
    context: usize,
    theta_default: f64,
) -> Result<Phi3Rope, ModelError> {
    let (what, params) = match (f.get("rope_scaling"), f.get("rope_parameters")) {
        (Some(p), _) => ("rope_scaling", Some(p)),
        (None, p) => ("rope_parameters", p),
    };
    let params = match params {
        None => None,
        Some(p) => {
            Some(Fields(p.as_object().ok_or_else(|| {
                config_err(format!("`{what}` is {p}, not an object"))
            })?))
        }
    };
    if let Some(p) = &params {
        if let Some((key, v)) =
            p.0.iter()
                .find(|(k, v)| !v.is_null() && !PHI3_ROPE_KEYS.contains(&k.as_str()))
        {
            return Err(config_err(format!(
                "`{what}.{key}` is {v}: wick's phi3 runs plain RoPE or LongRoPE's factors"
            )));
        }
    }
    // A key of the RoPE object, else of the config.
    let source = |key: &str| match &params {
        Some(p) if p.get(key).is_some() => p,
        _ => f,
    };
    let theta = source("rope_theta").f64_or("rope_theta", theta_default)?;
    let key = "partial_rotary_factor";
    let partial = source(key).f64_or(key, 1.0)?;
    // As the converter computes it: int(factor * d_model) // n_heads.
    let n_rot = ((partial * d_model as f64) as usize)
        .checked_div(n_heads)
        .unwrap_or(0);
    if !(partial > 0.0 && partial <= 1.0) || n_rot == 0 || n_rot % 2 != 0 || n_rot > head_dim {
        return Err(config_err(format!(
            "`{key}` is {partial}: {n_rot} rotated dimensions of a {head_dim}-wide head \
             (wick rotates an even number, at most the head)"
        )));
    }
    let key = "original_max_position_embeddings";
    let original = source(key).usize_or(key, Some(4096))?;
    // transformers 4 wrote `type`, later ones `rope_type`.
    let type_key = match &params {
        Some(p) if p.get("rope_type").is_none() => "type",
        _ => "rope_type",
    };
    let kind = match &params {
        Some(p) if p.get(type_key).is_some() => Some(p.str_or(type_key, "")?),
        _ => None,
    };
    let long = match (kind, &params) {
        (None | Some("default"), Some(p)) => {
            if let Some(k) = ["long_factor", "short_factor"]
                .into_iter()
                .find(|k| p.get(k).is_some())
            {
                return Err(config_err(format!(
                    "`{what}.{k}` is given without `{what}.{type_key}` \"longrope\""
                )));
            }
            None
        }
        (None, None) => None,
        (Some("longrope" | "su"), Some(p)) => {
            let scale = context as f64 / original as f64;
            if let Some(factor) = p.get("factor").map(|_| p.f64_or("factor", 0.0)) {
                let factor = factor?;
                if factor != scale {
                    return Err(config_err(format!(
                        "`{what}.factor` is {factor}: transformers' Phi-3 takes \
                         max_position_embeddings / original_max_position_embeddings ({scale})"
                    )));
                }
            }
            let factors = |k: &str| -> Result<Vec<f32>, ModelError> {
                let list = p
                    .list(k)?
                    .ok_or_else(|| config_err(format!("`{what}.{k}` is missing")))?;
                if list.len() != n_rot / 2 {
                    return Err(config_err(format!(
                        "`{what}.{k}` has {} values: {n_rot} rotated dimensions need {}",
                        list.len(),
                        n_rot / 2
                    )));
                }
                list.iter()
                    .map(|v| match v.as_f64() {
                        Some(x) if x.is_finite() && x > 0.0 => Ok(x as f32),
                        _ => Err(config_err(format!(
                            "`{what}.{k}` holds {v}, not a divisor > 0"
                        ))),
                    })
                    .collect()
            };
            let derived = match scale > 1.0 {
                true => (1.0 + scale.ln() / (original as f64).ln()).sqrt(),
                false => 1.0,
            };
            let attn_factor = p.f64_or("attention_factor", derived)?;
            if !(attn_factor.is_finite() && attn_factor > 0.0) {
                return Err(config_err(format!(
                    "`{what}.attention_factor` is {attn_factor}: it must be finite and > 0"
                )));
            }
            Some(LongRope {
                long_factor: factors("long_factor")?,
                short_factor: factors("short_factor")?,
                attn_factor: attn_factor as f32,
            })
        }
        (Some(other), _) => {
            return Err(config_err(format!(
                "`{what}.{type_key}` is {other:?}: wick's phi3 runs plain RoPE or \"longrope\""
            )))
        }
    };
    Ok(Phi3Rope {
        theta,
        n_rot,
        original,
        long,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `json` with `edits` (`"key": value` pairs) merged in, parsed.
    fn parse_with(json: &str, edits: &str) -> Result<HfConfig, ModelError> {
        let mut doc: Value = serde_json::from_str(json).unwrap();
        let edits: Value = serde_json::from_str(&format!("{{{edits}}}")).unwrap();
        for (k, v) in edits.as_object().unwrap() {
            doc[k] = v.clone();
        }
        parse(&serde_json::to_vec(&doc).unwrap())
    }

    fn refusal(json: &str, edits: &str) -> String {
        match parse_with(json, edits) {
            Err(ModelError::Config(msg)) => msg,
            other => panic!("{edits}: expected a config error, got {other:?}"),
        }
    }

    fn meta<'c>(cfg: &'c HfConfig, key: &str) -> Option<&'c MetaValue> {
        let key = format!("{}.{key}", cfg.architecture);
        cfg.metadata.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    fn f32_meta(cfg: &HfConfig, key: &str) -> Option<f32> {
        meta(cfg, key).map(|v| v.as_f32().unwrap())
    }

    fn u64_meta(cfg: &HfConfig, key: &str) -> Option<u64> {
        meta(cfg, key).map(|v| v.as_u64().unwrap())
    }

    const GEMMA2: &str = r#"{"model_type": "gemma2", "hidden_size": 128,
        "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "query_pre_attn_scalar": 64,
        "sliding_window": 64, "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh"}"#;

    #[test]
    fn gemma2_writes_its_soft_caps_and_window_and_refuses_other_patterns() {
        let cfg = parse_with(GEMMA2, "").unwrap();
        assert_eq!(cfg.architecture, "gemma2");
        assert!(cfg.tied);
        assert_eq!(f32_meta(&cfg, "attn_logit_softcapping"), Some(50.0));
        assert_eq!(f32_meta(&cfg, "final_logit_softcapping"), Some(30.0));
        assert_eq!(u64_meta(&cfg, "attention.sliding_window"), Some(64));
        assert_eq!(f32_meta(&cfg, "rope.freq_base"), Some(10_000.0));
        assert_eq!(u64_meta(&cfg, "context_length"), Some(8192));
        // null: no cap; missing: transformers' default cap.
        let cfg = parse_with(GEMMA2, r#""attn_logit_softcapping": null"#).unwrap();
        assert_eq!(f32_meta(&cfg, "attn_logit_softcapping"), None);
        let mut doc: Value = serde_json::from_str(GEMMA2).unwrap();
        doc.as_object_mut()
            .unwrap()
            .remove("final_logit_softcapping");
        let cfg = parse(doc.to_string().as_bytes()).unwrap();
        assert_eq!(f32_meta(&cfg, "final_logit_softcapping"), Some(30.0));

        let alternating = r#""layer_types": ["sliding_attention", "full_attention"]"#;
        parse_with(GEMMA2, alternating).unwrap();
        let msg = refusal(
            GEMMA2,
            r#""layer_types": ["full_attention", "sliding_attention"]"#,
        );
        assert!(msg.contains("`layer_types[0]`"), "{msg}");
        let msg = refusal(GEMMA2, r#""layer_types": ["sliding_attention"]"#);
        assert!(msg.contains("`layer_types`"), "{msg}");
        let msg = refusal(GEMMA2, r#""query_pre_attn_scalar": 256"#);
        assert!(msg.contains("`query_pre_attn_scalar`"), "{msg}");
        // 27B's 46 layers scale by d_model / heads (128 / 4).
        let msg = refusal(GEMMA2, r#""num_hidden_layers": 46"#);
        assert!(msg.contains("1/sqrt(32)"), "{msg}");
        parse_with(
            GEMMA2,
            r#""num_hidden_layers": 46, "query_pre_attn_scalar": 32"#,
        )
        .unwrap();
        let msg = refusal(GEMMA2, r#""sliding_window": null"#);
        assert!(msg.contains("`sliding_window`"), "{msg}");
        let msg = refusal(GEMMA2, r#""final_logit_softcapping": -1.0"#);
        assert!(msg.contains("`final_logit_softcapping`"), "{msg}");
        let msg = refusal(GEMMA2, r#""hidden_activation": "gelu""#);
        assert!(msg.contains("`hidden_activation`"), "{msg}");
    }

    /// `LONG` and `SHORT` in `json` replaced by 32 factors each.
    fn with_factors(json: &str) -> String {
        let long: Vec<f64> = (0..32).map(|i| 1.0 + i as f64 * 0.5).collect();
        let short: Vec<f64> = (0..32).map(|i| 1.0 + i as f64 * 0.01).collect();
        json.replace("LONG", &format!("{long:?}"))
            .replace("SHORT", &format!("{short:?}"))
    }

    /// Phi-3 as `tiny-phi3` is shaped: 4 heads of 64, 32 LongRoPE factors.
    fn phi3(scaling: &str, context: usize, original: usize) -> String {
        with_factors(&format!(
            r#"{{"model_type": "phi3", "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
            "max_position_embeddings": {context}, "original_max_position_embeddings": {original},
            "hidden_act": "silu", "sliding_window": null, "rope_scaling": {scaling}}}"#
        ))
    }

    const LONGROPE: &str = r#"{"type": "longrope", "long_factor": LONG, "short_factor": SHORT}"#;

    #[test]
    fn phi3_longrope_becomes_factor_tensors_and_the_converters_attn_factor() {
        let cfg = parse_with(&phi3(LONGROPE, 8192, 256), "").unwrap();
        assert!(!cfg.tied);
        assert_eq!(u64_meta(&cfg, "rope.dimension_count"), Some(64));
        assert_eq!(
            u64_meta(&cfg, "rope.scaling.original_context_length"),
            Some(256)
        );
        assert_eq!(u64_meta(&cfg, "attention.sliding_window"), None);
        let attn = f32_meta(&cfg, "rope.scaling.attn_factor").unwrap();
        assert!((attn - 1.274_754_9).abs() < 1e-6, "{attn}");
        let names: Vec<_> = cfg
            .tensors
            .iter()
            .map(|(n, v)| (n.as_str(), v.len()))
            .collect();
        assert_eq!(names, [(ROPE_FACTORS_LONG, 32), (ROPE_FACTORS_SHORT, 32)]);
        assert_eq!(cfg.tensors[0].1[3], 2.5);
        // Phi-3.5-mini's lengths give the value its GGUF files carry.
        let cfg = parse_with(&phi3(LONGROPE, 131_072, 4096), "").unwrap();
        let attn = f32_meta(&cfg, "rope.scaling.attn_factor").unwrap();
        assert!((attn - 1.190_238).abs() < 1e-6, "{attn}");
        // Within the original context: 1. An explicit attention_factor holds.
        let cfg = parse_with(&phi3(LONGROPE, 256, 256), "").unwrap();
        assert_eq!(f32_meta(&cfg, "rope.scaling.attn_factor"), Some(1.0));
        let given = LONGROPE.replace("}", r#", "attention_factor": 1.5}"#);
        let cfg = parse_with(&phi3(&given, 8192, 256), "").unwrap();
        assert_eq!(f32_meta(&cfg, "rope.scaling.attn_factor"), Some(1.5));
        // The older type name, and newer transformers' spelling.
        let su = LONGROPE.replace("longrope", "su");
        assert_eq!(
            parse_with(&phi3(&su, 8192, 256), "").unwrap().tensors.len(),
            2
        );
        let newer = with_factors(
            r#""rope_parameters": {"rope_type": "longrope", "rope_theta": 20000.0,
                "long_factor": LONG, "short_factor": SHORT}"#,
        );
        let newer = parse_with(&phi3("null", 8192, 256), &newer);
        let cfg = newer.unwrap();
        assert_eq!(cfg.tensors.len(), 2);
        assert_eq!(f32_meta(&cfg, "rope.freq_base"), Some(20_000.0));
        // Plain RoPE: no factors, no attn_factor; a window where one is given.
        let cfg = parse_with(&phi3("null", 4096, 4096), r#""sliding_window": 2047"#).unwrap();
        assert!(cfg.tensors.is_empty());
        assert_eq!(f32_meta(&cfg, "rope.scaling.attn_factor"), None);
        assert_eq!(u64_meta(&cfg, "attention.sliding_window"), Some(2047));
        // Half the head rotated: 32 dimensions, 16 factors each.
        let cfg = parse_with(&phi3("null", 4096, 4096), r#""partial_rotary_factor": 0.5"#);
        assert_eq!(u64_meta(&cfg.unwrap(), "rope.dimension_count"), Some(32));
        let json = phi3(LONGROPE, 8192, 256);
        let msg = refusal(&json, r#""partial_rotary_factor": 0.5"#);
        assert!(
            msg.contains("`rope_scaling.long_factor` has 32 values"),
            "{msg}"
        );
    }

    #[test]
    fn phi3_rope_scaling_wick_does_not_run_is_refused_by_field() {
        for (scaling, field) in [
            (LONGROPE.replace("longrope", "yarn"), "`rope_scaling.type`"),
            (
                LONGROPE.replace("longrope", "dynamic"),
                "`rope_scaling.type`",
            ),
            (
                LONGROPE.replace("}", r#", "short_mscale": 1.1}"#),
                "`rope_scaling.short_mscale`",
            ),
            (
                LONGROPE.replace("}", r#", "long_mscale": 1.2}"#),
                "`rope_scaling.long_mscale`",
            ),
            (
                LONGROPE.replace(r#", "short_factor": SHORT"#, ""),
                "`rope_scaling.short_factor` is missing",
            ),
            (
                LONGROPE.replace(r#""type": "longrope", "#, ""),
                "`rope_scaling.long_factor` is given without",
            ),
            (
                LONGROPE.replace("}", r#", "factor": 4.0}"#),
                "`rope_scaling.factor`",
            ),
        ] {
            let msg = refusal(&phi3(&scaling, 8192, 256), "");
            assert!(msg.contains(field), "{field}: {msg}");
        }
        let short = LONGROPE.replace("SHORT", "[1.0, 1.0]");
        let msg = refusal(&phi3(&short, 8192, 256), "");
        assert!(
            msg.contains("`rope_scaling.short_factor` has 2 values"),
            "{msg}"
        );
        let msg = refusal(&phi3("null", 4096, 4096), r#""hidden_act": "gelu""#);
        assert!(msg.contains("`hidden_act`"), "{msg}");
    }

    const SMOLLM3: &str = r#"{"model_type": "smollm3", "hidden_size": 128,
        "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "no_rope_layers": [1, 1, 1, 0], "hidden_act": "silu"}"#;

    #[test]
    fn smollm3_nope_layers_must_be_wicks() {
        let cfg = parse_with(SMOLLM3, "").unwrap();
        assert!(cfg.tied);
        assert_eq!(f32_meta(&cfg, "rope.freq_base"), Some(2_000_000.0));
        parse_with(
            SMOLLM3,
            r#""no_rope_layers": null, "no_rope_layer_interval": 4"#,
        )
        .unwrap();
        for (edit, field) in [
            (r#""no_rope_layers": [1, 1, 1, 1]"#, "`no_rope_layers[3]`"),
            (r#""no_rope_layers": [0, 1, 1, 0]"#, "`no_rope_layers[0]`"),
            (r#""no_rope_layers": [1, 1, 1]"#, "`no_rope_layers`"),
            (r#""no_rope_layer_interval": 3"#, "`no_rope_layer_interval`"),
            (r#""use_sliding_window": true"#, "`use_sliding_window`"),
            (r#""rope_scaling": {"rope_type": "yarn"}"#, "`rope_scaling`"),
        ] {
            let msg = refusal(SMOLLM3, edit);
            assert!(msg.contains(field), "{edit}: {msg}");
        }
    }
}
