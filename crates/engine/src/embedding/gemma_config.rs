//! EmbeddingGemma's encoder shape, from a Hugging Face `config.json`
//! (`model_type: "gemma3_text"` with `use_bidirectional_attention: true`):
//! every count bounded before it sizes anything, and whatever this forward
//! pass does not implement refused by name.

use serde::Deserialize;

use super::bert_config::{bounded, MAX_DIM, MAX_VOCAB};
use crate::kernels::attention::bidir::MAX_HEAD_DIM;
use crate::model::ModelError;

/// One layer's attention span and rotary base.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmaLayer {
    /// Some(w): a local layer, each token seeing those less than `w`
    /// positions away on either side (`sliding_window / 2 + 1`, see
    /// `parse`); None: a global layer.
    pub window: Option<usize>,
    pub rope_theta: f32,
}

/// The Gemma 3 encoder as this forward pass runs it: pre- and post-norm
/// blocks (RMSNorm with Gemma's `1 + weight`), grouped-query attention with
/// per-head q/k RMSNorm and rotary positions (half-split pairs over the whole
/// head, one base for local layers and one for global ones), GELU-tanh gated
/// MLP, embeddings scaled by sqrt(hidden_size), no biases.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmaConfig {
    pub vocab: usize,
    pub dim: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub max_positions: usize,
    pub norm_eps: f32,
    /// Multiplies q.k: `query_pre_attn_scalar ^ -0.5`.
    pub attn_scale: f32,
    pub layers: Vec<GemmaLayer>,
}

#[derive(Deserialize)]
struct Raw {
    model_type: Option<String>,
    vocab_size: u64,
    hidden_size: u64,
    num_hidden_layers: u64,
    num_attention_heads: u64,
    num_key_value_heads: u64,
    head_dim: u64,
    intermediate_size: u64,
    max_position_embeddings: u64,
    rms_norm_eps: f64,
    query_pre_attn_scalar: f64,
    rope_theta: f64,
    rope_local_base_freq: f64,
    sliding_window: u64,
    layer_types: Vec<String>,
    #[serde(default)]
    use_bidirectional_attention: bool,
    #[serde(default)]
    hidden_activation: Option<String>,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    attn_logit_softcapping: Option<f64>,
    #[serde(default)]
    final_logit_softcapping: Option<f64>,
    #[serde(default)]
    rope_scaling: Option<serde_json::Value>,
}

fn refuse<T>(what: String) -> Result<T, ModelError> {
    Err(ModelError::Config(format!(
        "config.json: {what}, which wick does not implement"
    )))
}

fn positive(key: &str, v: f64) -> Result<f64, ModelError> {
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        refuse(format!("{key} {v}"))
    }
}

impl GemmaConfig {
    /// Whether `config.json` names this architecture (before parsing it whole).
    pub fn is_gemma(json: &[u8]) -> bool {
        #[derive(Deserialize)]
        struct Kind {
            model_type: Option<String>,
        }
        serde_json::from_slice::<Kind>(json)
            .is_ok_and(|k| k.model_type.as_deref() == Some("gemma3_text"))
    }

    pub fn parse(json: &[u8]) -> Result<GemmaConfig, ModelError> {
        let raw: Raw = serde_json::from_slice(json)
            .map_err(|e| ModelError::Config(format!("config.json: {e}")))?;
        let arch = raw.model_type.as_deref().unwrap_or("(none)");
        if arch != "gemma3_text" {
            return Err(ModelError::UnsupportedArchitecture(format!(
                "{arch} (as a Gemma embedding model wick runs: gemma3_text)"
            )));
        }
        if !raw.use_bidirectional_attention {
            return refuse(
                "a causal gemma3_text as an embedding model (use_bidirectional_attention is not true)"
                    .into(),
            );
        }
        let act = raw.hidden_activation.as_deref().unwrap_or("(none)");
        if act != "gelu_pytorch_tanh" {
            return refuse(format!(
                "hidden_activation '{act}' (wick's Gemma runs 'gelu_pytorch_tanh')"
            ));
        }
        if raw.attention_bias {
            return refuse("attention_bias: true".into());
        }
        if let Some(cap) = raw.attn_logit_softcapping.or(raw.final_logit_softcapping) {
            return refuse(format!("logit soft-capping ({cap})"));
        }
        if raw.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return refuse("rope_scaling".into());
        }
        let dim = bounded("hidden_size", raw.hidden_size, MAX_DIM)?;
        let heads = bounded("num_attention_heads", raw.num_attention_heads, 1024)?;
        let kv_heads = bounded("num_key_value_heads", raw.num_key_value_heads, 1024)?;
        let head_dim = bounded("head_dim", raw.head_dim, MAX_HEAD_DIM as u64)?;
        if heads % kv_heads != 0 || head_dim % 4 != 0 {
            return refuse(format!(
                "{heads} query heads over {kv_heads} key/value heads of {head_dim} (grouped evenly, heads a multiple of 4 up to {MAX_HEAD_DIM})"
            ));
        }
        let n_layers = bounded("num_hidden_layers", raw.num_hidden_layers, 256)?;
        if raw.layer_types.len() != n_layers {
            return Err(ModelError::Config(format!(
                "config.json: {} layer_types for {n_layers} layers",
                raw.layer_types.len()
            )));
        }
        // `sliding_window` is the span of a local layer's window, centred on
        // the query: transformers' Gemma3TextConfig turns it into the
        // exclusive bound sliding_window / 2 + 1 when the attention is
        // bidirectional, and masks keys with |i - j| >= that bound. So with
        // EmbeddingGemma's 512 a token sees 256 positions either side.
        let window = bounded("sliding_window", raw.sliding_window, 1 << 20)? / 2 + 1;
        let (global, local) = (
            positive("rope_theta", raw.rope_theta)? as f32,
            positive("rope_local_base_freq", raw.rope_local_base_freq)? as f32,
        );
        let layers = raw
            .layer_types
            .iter()
            .map(|t| match t.as_str() {
                "sliding_attention" => Ok(GemmaLayer {
                    window: Some(window),
                    rope_theta: local,
                }),
                "full_attention" => Ok(GemmaLayer {
                    window: None,
                    rope_theta: global,
                }),
                other => refuse(format!("layer type '{other}'")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !(raw.rms_norm_eps >= 0.0 && raw.rms_norm_eps.is_finite()) {
            return refuse(format!("rms_norm_eps {}", raw.rms_norm_eps));
        }
        Ok(GemmaConfig {
            vocab: bounded("vocab_size", raw.vocab_size, MAX_VOCAB)?,
            dim,
            heads,
            kv_heads,
            head_dim,
            ffn: bounded("intermediate_size", raw.intermediate_size, 4 * MAX_DIM)?,
            max_positions: bounded(
                "max_position_embeddings",
                raw.max_position_embeddings,
                1 << 16,
            )?,
            norm_eps: raw.rms_norm_eps as f32,
            attn_scale: (1.0 / positive("query_pre_attn_scalar", raw.query_pre_attn_scalar)?.sqrt())
                as f32,
            layers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EmbeddingGemma-300M's config.json, less keys this parser ignores.
    pub const EMBEDDINGGEMMA: &str = r#"{"architectures": ["Gemma3TextModel"], "attention_bias": false,
        "attn_logit_softcapping": null, "final_logit_softcapping": null, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 768, "intermediate_size": 1152,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
        "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention",
        "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
        "sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
        "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
        "max_position_embeddings": 2048, "model_type": "gemma3_text", "num_attention_heads": 3,
        "num_hidden_layers": 24, "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_scaling": null, "rope_theta": 1000000.0,
        "sliding_window": 512, "use_bidirectional_attention": true, "vocab_size": 262144}"#;

    #[test]
    fn reads_embeddinggemma() {
        assert!(GemmaConfig::is_gemma(EMBEDDINGGEMMA.as_bytes()));
        let c = GemmaConfig::parse(EMBEDDINGGEMMA.as_bytes()).unwrap();
        assert_eq!(
            (c.dim, c.heads, c.kv_heads, c.head_dim, c.ffn, c.vocab),
            (768, 3, 1, 256, 1152, 262144)
        );
        assert_eq!(c.attn_scale, 1.0 / 16.0);
        assert_eq!(c.layers.len(), 24);
        for (i, l) in c.layers.iter().enumerate() {
            // Every 6th layer is global.
            let global = i % 6 == 5;
            // 512 is the window's whole span: 256 positions either side.
            assert_eq!(l.window, if global { None } else { Some(257) }, "layer {i}");
            assert_eq!(l.rope_theta, if global { 1e6 } else { 1e4 }, "layer {i}");
        }
    }

    #[test]
    fn refuses_what_it_does_not_run_by_name() {
        for (from, to, word) in [
            (
                r#""use_bidirectional_attention": true"#,
                r#""use_bidirectional_attention": false"#,
                "causal",
            ),
            (
                r#""model_type": "gemma3_text""#,
                r#""model_type": "gemma2""#,
                "gemma2",
            ),
            (
                r#""hidden_activation": "gelu_pytorch_tanh""#,
                r#""hidden_activation": "silu""#,
                "silu",
            ),
            (
                r#""attn_logit_softcapping": null"#,
                r#""attn_logit_softcapping": 50.0"#,
                "soft-capping",
            ),
            (
                r#""rope_scaling": null"#,
                r#""rope_scaling": {"rope_type": "linear", "factor": 8.0}"#,
                "rope_scaling",
            ),
            (
                r#""num_key_value_heads": 1"#,
                r#""num_key_value_heads": 2"#,
                "3 query heads over 2",
            ),
            (r#""head_dim": 256"#, r#""head_dim": 512"#, "head_dim"),
            (
                r#""sliding_attention", "full_attention"]"#,
                r#""sliding_attention", "chunked_attention"]"#,
                "chunked_attention",
            ),
            (
                r#""num_hidden_layers": 24"#,
                r#""num_hidden_layers": 23"#,
                "24 layer_types for 23 layers",
            ),
        ] {
            let json = EMBEDDINGGEMMA.replace(from, to);
            assert_ne!(json, EMBEDDINGGEMMA, "{from}");
            let err = GemmaConfig::parse(json.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(word), "{to}: {err}");
        }
    }
}
