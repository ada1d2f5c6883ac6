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
//!
//! Folders of `model_type` llama, qwen2, gemma3_text, gemma2, phi3 and
//! smollm3 are read. A few GGUF tensors come from `config.json` rather than
//! the safetensors (Phi-3's LongRoPE factors): they lead the GGUF stream,
//! sent with its header.

pub mod config;
pub mod convert;
pub mod names;
pub mod stream;

use crate::format::gguf::MetaValue;
use crate::format::gguf_write::{GgufWriter, ALIGNMENT};
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
    /// The bytes of the tensors made from the config, each padded to GGUF's
    /// alignment: the first of the GGUF data, sent right after the header.
    inline: Vec<u8>,
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
        // The config's tensors first: their bytes are known now.
        let mut inline = Vec::new();
        for (name, values) in &config.tensors {
            w = w.declare_tensor(name.clone(), &[values.len() as u64], GgmlType::F32);
            inline.extend(values.iter().flat_map(|v| v.to_le_bytes()));
            inline.resize(
                (inline.len() as u64).next_multiple_of(ALIGNMENT) as usize,
                0,
            );
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
            inline,
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
    let add_one = matches!(config.architecture, "gemma3" | "gemma2") && names::is_norm(gguf);
    // Only Llama's converter permutes, and SmolLM3's, which subclasses it
    // (Qwen2, Gemma and Phi-3 keep HF's layout); q and k alike, weights and
    // biases, in heads of head_dim rows.
    let rotary = [
        "attn_q.weight",
        "attn_k.weight",
        "attn_q.bias",
        "attn_k.bias",
    ];
    let permuted = matches!(config.architecture, "llama" | "smollm3");
    let rotary_rows =
        (permuted && rotary.iter().any(|s| gguf.ends_with(s))).then_some(config.head_dim);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::gguf::GgufFile;

    /// A safetensors file of F32 tensors `(name, shape)`, values 0, 1, 2, ...
    fn safetensors(tensors: &[(&str, &[u64])]) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (name, shape) in tensors {
            let n: u64 = shape.iter().product();
            let at = data.len();
            data.extend((0..n).flat_map(|i| (i as f32).to_le_bytes()));
            header.insert(
                name.to_string(),
                serde_json::json!({"dtype": "F32", "shape": shape,
                                   "data_offsets": [at, data.len()]}),
            );
        }
        let mut json = serde_json::to_vec(&header).unwrap();
        json.resize(json.len().next_multiple_of(8), b' ');
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend(json);
        out.extend(data);
        out
    }

    #[test]
    fn config_tensors_lead_the_gguf_stream() {
        let config = r#"{"model_type": "phi3", "hidden_size": 8, "intermediate_size": 4,
            "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 64,
            "original_max_position_embeddings": 16, "rope_scaling": {"type": "longrope",
            "long_factor": [2.0, 3.0], "short_factor": [1.0, 1.5]}}"#;
        let file = safetensors(&[
            ("model.embed_tokens.weight", &[3, 8]),
            ("lm_head.weight", &[3, 8]),
            ("model.layers.0.self_attn.qkv_proj.weight", &[24, 8]),
        ]);
        let header = SafetensorsHeader::parse(&file).unwrap();
        let ckpt =
            HfCheckpoint::new(config.as_bytes(), &[header], None, &HfOptions::default()).unwrap();
        let mut gguf = Vec::new();
        let mut stream = ckpt.into_stream();
        // In two chunks, the cut inside a tensor.
        for chunk in [&file[..file.len() - 100], &file[file.len() - 100..]] {
            stream
                .push(0, chunk, &mut |b: &[u8]| -> Result<(), ModelError> {
                    gguf.extend_from_slice(b);
                    Ok(())
                })
                .unwrap();
        }
        stream.finish().unwrap();
        let parsed = GgufFile::parse(&gguf).unwrap();
        let values = |name: &str| {
            let t = parsed.tensor(name).unwrap();
            let bytes = parsed.tensor_bytes(&gguf, t).unwrap();
            crate::format::quant::dequantize(t.dtype, bytes, t.n_elements as usize).unwrap()
        };
        assert_eq!(values("rope_factors_long.weight"), [2.0, 3.0]);
        assert_eq!(values("rope_factors_short.weight"), [1.0, 1.5]);
        let qkv = values("blk.0.attn_qkv.weight");
        assert_eq!((qkv.len(), qkv[191]), (192, 191.0));
        assert_eq!(values("output.weight")[23], 23.0);
        assert_eq!(parsed.tensors[0].name, "rope_factors_long.weight");
    }
}
