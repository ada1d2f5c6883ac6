//! A BERT encoder's shape, from a Hugging Face `config.json` (`model_type:
//! "bert"`): every count bounded before it sizes anything, and whatever
//! this forward pass does not implement refused by name.

use serde::Deserialize;

use crate::model::ModelError;

/// How a token's position enters the encoder.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Positions {
    /// A learned table added to the input embedding (BERT).
    Absolute,
    /// Rotary on q and k in every layer, half-split (NeoX) pairs over the
    /// first `n_rot` elements of each head (nomic-bert).
    Rotary { theta: f32, n_rot: usize },
}

/// The feed-forward half of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ffn {
    /// `down(gelu_erf(up x))` (BERT).
    Gelu,
    /// `down(silu(gate x) * up x)` (nomic-bert).
    SwiGlu,
}

/// The encoder as this forward pass runs it: post-norm blocks, then either
/// BERT's learned absolute positions, token types, exact-erf GELU and
/// biases on every linear (`parse`, from config.json), or nomic-bert's
/// rotary positions and SwiGLU without biases (`embedding::nomic`, from a
/// GGUF).
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    pub vocab: usize,
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub max_positions: usize,
    pub token_types: usize,
    pub norm_eps: f32,
    pub positions: Positions,
    pub ffn_kind: Ffn,
}

#[derive(Deserialize)]
struct Raw {
    model_type: Option<String>,
    vocab_size: u64,
    hidden_size: u64,
    num_hidden_layers: u64,
    num_attention_heads: u64,
    intermediate_size: u64,
    max_position_embeddings: u64,
    #[serde(default = "default_types")]
    type_vocab_size: u64,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    #[serde(default = "default_act")]
    hidden_act: String,
    #[serde(default = "default_position_type")]
    position_embedding_type: String,
    #[serde(default)]
    is_decoder: bool,
}

fn default_types() -> u64 {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_act() -> String {
    "gelu".into()
}
fn default_position_type() -> String {
    "absolute".into()
}

/// Most of any count: far above real BERTs, below what overflows sizes.
pub(crate) const MAX_DIM: u64 = 1 << 16;
pub(crate) const MAX_VOCAB: u64 = 1 << 22;

pub(crate) fn bounded(key: &str, value: u64, max: u64) -> Result<usize, ModelError> {
    if value == 0 || value > max {
        return Err(ModelError::OutOfBounds {
            key: key.into(),
            value,
            max,
        });
    }
    Ok(value as usize)
}

impl BertConfig {
    pub fn parse(json: &[u8]) -> Result<BertConfig, ModelError> {
        let raw: Raw = serde_json::from_slice(json)
            .map_err(|e| ModelError::Config(format!("config.json: {e}")))?;
        let arch = raw.model_type.as_deref().unwrap_or("(none)");
        if arch != "bert" {
            return Err(ModelError::UnsupportedArchitecture(format!(
                "{arch} (as an embedding model wick runs: bert)"
            )));
        }
        let refuse = |what: String| {
            Err(ModelError::Config(format!(
                "config.json: {what}, which wick does not implement"
            )))
        };
        if raw.hidden_act != "gelu" {
            return refuse(format!(
                "hidden_act '{}' (wick's BERT runs 'gelu', the erf form)",
                raw.hidden_act
            ));
        }
        if raw.position_embedding_type != "absolute" {
            return refuse(format!(
                "position_embedding_type '{}'",
                raw.position_embedding_type
            ));
        }
        if raw.is_decoder {
            return refuse("is_decoder: true (a causal BERT)".into());
        }
        let dim = bounded("hidden_size", raw.hidden_size, MAX_DIM)?;
        let heads = bounded("num_attention_heads", raw.num_attention_heads, 1024)?;
        let head_dim = dim / heads;
        if dim % heads != 0
            || head_dim % 4 != 0
            || head_dim > crate::kernels::attention::bidir::MAX_HEAD_DIM
        {
            return refuse(format!(
                "hidden_size {dim} over {heads} heads (heads of a multiple of 4 up to {} elements are supported)",
                crate::kernels::attention::bidir::MAX_HEAD_DIM
            ));
        }
        if !(raw.layer_norm_eps >= 0.0 && raw.layer_norm_eps.is_finite()) {
            return refuse(format!("layer_norm_eps {}", raw.layer_norm_eps));
        }
        Ok(BertConfig {
            vocab: bounded("vocab_size", raw.vocab_size, MAX_VOCAB)?,
            dim,
            layers: bounded("num_hidden_layers", raw.num_hidden_layers, 256)?,
            heads,
            head_dim,
            ffn: bounded("intermediate_size", raw.intermediate_size, 4 * MAX_DIM)?,
            max_positions: bounded(
                "max_position_embeddings",
                raw.max_position_embeddings,
                1 << 16,
            )?,
            token_types: bounded("type_vocab_size", raw.type_vocab_size, 1 << 10)?,
            norm_eps: raw.layer_norm_eps as f32,
            positions: Positions::Absolute,
            ffn_kind: Ffn::Gelu,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINILM: &str = r#"{"architectures": ["BertModel"], "hidden_act": "gelu", "hidden_size": 384,
        "intermediate_size": 1536, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
        "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 6,
        "position_embedding_type": "absolute", "type_vocab_size": 2, "vocab_size": 30522}"#;

    #[test]
    fn reads_minilm() {
        let c = BertConfig::parse(MINILM.as_bytes()).unwrap();
        assert_eq!(
            (c.dim, c.heads, c.head_dim, c.layers, c.ffn),
            (384, 12, 32, 6, 1536)
        );
        assert_eq!((c.vocab, c.max_positions, c.token_types), (30522, 512, 2));
    }

    #[test]
    fn refuses_what_it_does_not_run_by_name() {
        for (from, to, word) in [
            (
                r#""model_type": "bert""#,
                r#""model_type": "nomic_bert""#,
                "nomic_bert",
            ),
            (r#""hidden_act": "gelu""#, r#""hidden_act": "relu""#, "relu"),
            (
                r#""position_embedding_type": "absolute""#,
                r#""position_embedding_type": "relative_key""#,
                "relative_key",
            ),
            (
                r#""num_attention_heads": 12"#,
                r#""num_attention_heads": 7"#,
                "7 heads",
            ),
            (
                r#""hidden_size": 384"#,
                r#""hidden_size": 0"#,
                "hidden_size",
            ),
        ] {
            let json = MINILM.replace(from, to);
            let err = BertConfig::parse(json.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(word), "{to}: {err}");
        }
    }
}
