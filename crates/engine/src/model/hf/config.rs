//! A Hugging Face `config.json` as the GGUF metadata llama.cpp's converter
//! would write for it: the one place HF's field names meet wick's. The
//! architectures then read their config from this metadata exactly as from a
//! GGUF file, so both formats run through the same model code.
//!
//! Fields that would change the computation but that wick's model code does
//! not implement (RoPE scaling, logit soft-capping, a sliding-window pattern
//! other than Gemma 3's) are refused by name rather than ignored.

use serde_json::{Map, Value};

use crate::format::gguf::MetaValue;
use crate::model::ModelError;

/// What the rest of the Hugging Face path needs from `config.json`.
#[derive(Clone, Debug)]
pub struct HfConfig {
    /// The GGUF architecture: "llama", "qwen2" or "gemma3".
    pub architecture: &'static str,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// The output head is the token embedding (`lm_head.weight` unused).
    pub tied: bool,
    /// `{arch}.*` and `general.architecture` keys, as GGUF names them.
    pub metadata: Vec<(String, MetaValue)>,
}

/// Gemma 3's fixed choices that wick's `gemma3` model hard-codes: one global
/// layer in six, local RoPE base 10000.
const GEMMA3_PATTERN: usize = 6;
const GEMMA3_LOCAL_ROPE_BASE: f64 = 10_000.0;

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
    // Defaults are those of transformers' config classes for each type.
    let (architecture, tied_default, theta_default, ctx_default) = match model_type {
        "llama" => ("llama", false, 10_000.0, 2048),
        "qwen2" => ("qwen2", false, 10_000.0, 32_768),
        "gemma3_text" => ("gemma3", true, 1_000_000.0, 131_072),
        other => {
            return Err(ModelError::UnsupportedArchitecture(format!(
                "{other} (config.json model_type; wick reads llama, qwen2 and gemma3_text folders)"
            )))
        }
    };
    let d_model = f.usize("hidden_size")?;
    let n_heads = f.usize("num_attention_heads")?;
    let n_kv_heads = f.usize_or("num_key_value_heads", Some(n_heads))?;
    let head_dim_default = (architecture == "gemma3")
        .then_some(256)
        .or(d_model.checked_div(n_heads));
    let head_dim = f.usize_or("head_dim", head_dim_default)?;
    let n_layers = f.usize("num_hidden_layers")?;
    f.absent("rope_scaling", "wick runs RoPE unscaled")?;
    let rope_theta = rope_theta(&f, theta_default)?;
    match architecture {
        "gemma3" => gemma3_checks(&f, head_dim, n_layers)?,
        "qwen2" => {
            f.expect("hidden_act", "silu", "silu")?;
            if f.bool_or("use_sliding_window", false)? {
                return Err(config_err(
                    "`use_sliding_window` is true: wick's qwen2 attends globally".into(),
                ));
            }
        }
        _ => {
            f.expect("hidden_act", "silu", "silu")?;
            if f.bool_or("mlp_bias", false)? {
                return Err(config_err(
                    "`mlp_bias` is true: wick's MLPs have no biases".into(),
                ));
            }
        }
    }
    let u = |v: usize| MetaValue::U32(v as u32);
    let mut keys = vec![
        ("block_count", u(n_layers)),
        (
            "context_length",
            u(f.usize_or("max_position_embeddings", Some(ctx_default))?),
        ),
        ("embedding_length", u(d_model)),
        ("feed_forward_length", u(f.usize("intermediate_size")?)),
        ("attention.head_count", u(n_heads)),
        ("attention.head_count_kv", u(n_kv_heads)),
        ("attention.key_length", u(head_dim)),
        ("attention.value_length", u(head_dim)),
        ("rope.dimension_count", u(head_dim)),
        ("rope.freq_base", MetaValue::F32(rope_theta as f32)),
        (
            "attention.layer_norm_rms_epsilon",
            MetaValue::F32(f.f64_or("rms_norm_eps", 1e-6)? as f32),
        ),
    ];
    if architecture == "gemma3" {
        keys.push((
            "attention.sliding_window",
            u(f.usize_or("sliding_window", Some(4096))?),
        ));
    }
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
        tied: f.bool_or("tie_word_embeddings", tied_default)?,
        metadata,
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
    if let Some(types) = f.get("layer_types") {
        let types = types
            .as_array()
            .ok_or_else(|| config_err(format!("`layer_types` is {types}, not a list")))?;
        for (layer, t) in types.iter().enumerate().take(n_layers) {
            let want = if (layer + 1) % GEMMA3_PATTERN == 0 {
                "full_attention"
            } else {
                "sliding_attention"
            };
            if t.as_str() != Some(want) {
                return Err(config_err(format!(
                    "`layer_types[{layer}]` is {t}: wick's gemma3 makes layer {layer} {want}"
                )));
            }
        }
    }
    Ok(())
}
