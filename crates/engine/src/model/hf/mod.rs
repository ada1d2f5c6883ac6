//! Hugging Face checkpoints (`config.json`, `model.safetensors` or shards,
//! `tokenizer.json`) loaded through the GGUF path.
//!
//! A checkpoint is turned, as it streams in, into the GGUF file llama.cpp's
//! converter would make of it: `config.json` becomes the architecture's GGUF
//! metadata (`config.rs`), tensor names become GGUF's (`names.rs`), and each
//! tensor's bytes are converted where GGUF stores them differently
//! (`convert.rs`). That GGUF stream feeds the engine's `ModelLoader`
//! unchanged, so both formats run the same checks, uploads and model code,
//! and a checkpoint is never held whole in memory: each tensor is converted
//! and uploaded as its bytes arrive (`stream.rs`).
//!
//! Everything is decided from `config.json` and the safetensors headers
//! before the first tensor byte is read: an unknown tensor, a type wick does
//! not read or a shape that cannot be converted fails naming the tensor.

pub mod config;
pub mod convert;
pub mod names;
pub mod stream;

use crate::format::gguf::MetaValue;
use crate::format::gguf_write::GgufWriter;
use crate::format::quant::GgmlType;
use crate::format::safetensors::SafetensorsHeader;
use crate::tokenizer::chat_template::CHAT_TEMPLATE_KEY;

use super::ModelError;
pub use config::HfConfig;
use convert::{stored_type, Conversion};
use names::Mapped;
pub use stream::HfStream;

/// Choices made at load.
#[derive(Clone, Debug, Default)]
pub struct HfOptions {
    /// Quantize every matrix to this type (`Q8_0`): an F32 checkpoint then
    /// needs about a quarter of the GPU memory.
    pub quantize: Option<GgmlType>,
}

/// The types `HfOptions::quantize` accepts.
pub const QUANTIZE_TYPES: [GgmlType; 1] = [GgmlType::Q8_0];

/// One tensor of the checkpoint as it goes into the GGUF stream.
#[derive(Clone, Debug)]
struct Job {
    shard: usize,
    /// Byte range in its shard file.
    start: u64,
    end: u64,
    hf_name: String,
    rows: usize,
    conversion: Conversion,
}

/// A checkpoint planned from its config and headers, ready to stream.
#[derive(Debug)]
pub struct HfCheckpoint {
    pub config: HfConfig,
    /// The header of the GGUF stream: metadata and tensor table.
    header: Vec<u8>,
    /// In stream order: shard by shard, each in file order.
    jobs: Vec<Job>,
}

impl HfCheckpoint {
    /// `shards`: the headers of the safetensors files in order (one for an
    /// unsharded checkpoint). `chat_template`: from `tokenizer_config.json`.
    pub fn new(
        config_json: &[u8],
        shards: &[SafetensorsHeader],
        chat_template: Option<&str>,
        opts: &HfOptions,
    ) -> Result<HfCheckpoint, ModelError> {
        let config = config::parse(config_json)?;
        if let Some(q) = opts.quantize.filter(|q| !QUANTIZE_TYPES.contains(q)) {
            return Err(ModelError::Config(format!(
                "quantizing at load to {} is not offered (only q8_0)",
                q.name()
            )));
        }
        let mut w = GgufWriter::new();
        for (k, v) in &config.metadata {
            w = w.meta(k.clone(), v.clone());
        }
        if let Some(t) = chat_template {
            w = w.meta(CHAT_TEMPLATE_KEY, MetaValue::String(t.to_string()));
        }
        let mut jobs = Vec::new();
        for (shard, header) in shards.iter().enumerate() {
            for t in &header.tensors {
                let (gguf, layer) = match names::to_gguf(config.architecture, &t.name) {
                    Mapped::Tensor { gguf, layer } => (gguf, layer),
                    Mapped::Ignored => continue,
                    Mapped::Unknown => {
                        return Err(ModelError::Config(format!(
                            "tensor `{}` is not part of a {} model",
                            t.name, config.architecture
                        )))
                    }
                };
                if layer.is_some_and(|l| l >= config.n_layers) {
                    return Err(ModelError::Config(format!(
                        "tensor `{}` belongs to a block past num_hidden_layers {}",
                        t.name, config.n_layers
                    )));
                }
                // A tied head is the embedding: a copy in the file is not loaded.
                if gguf == "output.weight" && config.tied {
                    continue;
                }
                let conversion = conversion(&config, t, &gguf, opts)?;
                // ggml order: the contiguous dimension first.
                let dims: Vec<u64> = t.shape.iter().rev().copied().collect();
                w = w.declare_tensor(gguf, &dims, conversion.target);
                jobs.push(Job {
                    shard,
                    start: t.start,
                    end: t.end,
                    hf_name: t.name.clone(),
                    rows: t.shape.first().copied().unwrap_or(1) as usize,
                    conversion,
                });
            }
        }
        if !config.tied && !jobs.iter().any(|j| j.hf_name == "lm_head.weight") {
            return Err(ModelError::MissingTensor(
                "lm_head.weight (tie_word_embeddings is false)".into(),
            ));
        }
        let header = w
            .try_header()
            .map_err(|e| ModelError::Config(format!("the checkpoint as GGUF: {e}")))?;
        Ok(HfCheckpoint {
            config,
            header,
            jobs,
        })
    }

    /// The stream that turns the shards' bytes into the GGUF file.
    pub fn into_stream(self) -> HfStream {
        HfStream::new(self)
    }
}

/// How tensor `t` (GGUF name `gguf`) is converted.
fn conversion(
    config: &HfConfig,
    t: &crate::format::safetensors::SafeTensor,
    gguf: &str,
    opts: &HfOptions,
) -> Result<Conversion, ModelError> {
    let stored = stored_type(t)?;
    let is_matrix = t.shape.len() == 2;
    let target = match (opts.quantize, stored) {
        (Some(q), _) if is_matrix => {
            let cols = t.shape[1] as usize;
            if cols % q.block_elements() != 0 {
                return Err(ModelError::Config(format!(
                    "tensor `{}`: rows of {cols} cannot be {} blocks of {}",
                    t.name,
                    q.name(),
                    q.block_elements()
                )));
            }
            q
        }
        (_, GgmlType::BF16) => GgmlType::F32,
        (_, s) => s,
    };
    let add_one = config.architecture == "gemma3" && names::is_norm(gguf);
    // Only Llama's converter permutes (Qwen2 and Gemma 3 keep HF's layout);
    // q and k alike, weights and biases, in heads of head_dim rows.
    let rotary = [
        "attn_q.weight",
        "attn_k.weight",
        "attn_q.bias",
        "attn_k.bias",
    ];
    let rotary_rows = (config.architecture == "llama" && rotary.iter().any(|s| gguf.ends_with(s)))
        .then_some(config.head_dim);
    Ok(Conversion {
        stored,
        // Added in f32: the sum is kept as F32 (vectors are uploaded as f32).
        target: if add_one && !is_matrix {
            GgmlType::F32
        } else {
            target
        },
        rotary_rows,
        add_one,
    })
}
