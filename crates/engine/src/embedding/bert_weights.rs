//! A BERT checkpoint's tensors (Hugging Face names, mapped in one place:
//! `names`), checked and uploaded: embedding tables and norms as f32
//! vectors, each block's projections as f32 matrices for the linear
//! kernel, q/k/v joined into one matrix (and bias) so that one projection
//! gives the rows attention reads.

use crate::format::quant::GgmlType;
use crate::format::safetensors::{Dtype, SafeTensor, SafetensorsHeader};
use crate::gpu::{BufferRef, GpuContext};
use crate::kernels::weights::QuantMatrix;
use crate::model::ModelError;

use super::bert_config::BertConfig;

/// Every tensor name the encoder reads, as the checkpoint spells it, behind
/// `prefix` (`""`, or `"bert."` in checkpoints saved from a task model).
mod names {
    pub const WORD: &str = "embeddings.word_embeddings.weight";
    pub const POSITION: &str = "embeddings.position_embeddings.weight";
    pub const TOKEN_TYPE: &str = "embeddings.token_type_embeddings.weight";
    pub const EMBED_NORM: &str = "embeddings.LayerNorm";
    /// Per layer, after `encoder.layer.{i}.`.
    pub const Q: &str = "attention.self.query";
    pub const K: &str = "attention.self.key";
    pub const V: &str = "attention.self.value";
    pub const ATTN_OUT: &str = "attention.output.dense";
    pub const ATTN_NORM: &str = "attention.output.LayerNorm";
    pub const UP: &str = "intermediate.dense";
    pub const DOWN: &str = "output.dense";
    pub const FFN_NORM: &str = "output.LayerNorm";

    pub fn layer(i: usize, name: &str) -> String {
        format!("encoder.layer.{i}.{name}")
    }
}

/// A LayerNorm's weight and bias.
pub struct Norm {
    pub weight: BufferRef,
    pub bias: BufferRef,
}

/// A projection and its bias (BERT has biases; nomic-bert none).
pub struct Dense {
    pub w: QuantMatrix,
    pub bias: Option<BufferRef>,
}

pub struct BertLayer {
    /// Rows: q's, then k's, then v's (`3 * dim` by `dim`).
    pub qkv: Dense,
    pub attn_out: Dense,
    pub attn_norm: Norm,
    /// BERT: `ffn` rows. SwiGLU: `2 * ffn` rows, gate and up rows
    /// interleaved (gate 0, up 0, gate 1, ...), as the linear kernel's
    /// gated epilogue reads them.
    pub up: Dense,
    pub down: Dense,
    pub ffn_norm: Norm,
}

/// The tables a token's input row comes from.
pub enum InputTables {
    /// BERT: word + absolute position + token type, f32, summed per token
    /// by `encoder_embed`.
    Summed {
        word: BufferRef,
        position: BufferRef,
        token_type: BufferRef,
    },
    /// One table gathered by id (nomic-bert: no position table, and every
    /// token has type 0, so that row is added to every word row at load, in
    /// f32 as the encoder would add it).
    Gathered(QuantMatrix),
}

pub struct BertWeights {
    pub input: InputTables,
    pub embed_norm: Norm,
    pub layers: Vec<BertLayer>,
}

/// A safetensors file: its header and its bytes.
pub type Shard<'a> = (SafetensorsHeader, &'a [u8]);

/// Reads tensors from a checkpoint's safetensors files (one, or a sharded
/// checkpoint's), checking each one's presence, shape and type before
/// converting it.
pub(super) struct Reader<'a> {
    pub shards: &'a [Shard<'a>],
    pub prefix: &'static str,
}

/// The shard holding tensor `name`, and its entry there.
fn find<'a>(shards: &'a [Shard<'a>], name: &str) -> Option<(&'a SafeTensor, &'a [u8])> {
    shards
        .iter()
        .find_map(|(h, bytes)| h.tensor(name).map(|t| (t, *bytes)))
}

impl Reader<'_> {
    /// The tensor `name` as f32, which must have `shape` (row-major, as the
    /// checkpoint lists it).
    pub fn f32s(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
        let full = format!("{}{name}", self.prefix);
        let (t, bytes) =
            find(self.shards, &full).ok_or_else(|| ModelError::MissingTensor(full.clone()))?;
        let expected: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        if t.shape != expected {
            return Err(ModelError::TensorShape {
                name: full,
                expected,
                found: t.shape.clone(),
            });
        }
        // Absolute offsets in the file (SafeTensor's start and end).
        let (start, end) = (t.start as usize, t.end as usize);
        let raw = bytes
            .get(start..end)
            .ok_or_else(|| ModelError::Truncated(format!("tensor '{full}' ends past the file")))?;
        let n = t.n_elements() as usize;
        let values: Vec<f32> = match t.dtype {
            Dtype::F32 => raw
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => raw
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => raw
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(ModelError::UnsupportedQuant {
                    tensor: full,
                    dtype: format!("{other:?} (wick's encoders read F32, F16 and BF16)"),
                })
            }
        };
        if values.len() != n {
            return Err(ModelError::Truncated(format!(
                "tensor '{full}': {} values for shape {shape:?}",
                values.len()
            )));
        }
        Ok(values)
    }
}

impl BertWeights {
    /// Checks and uploads every tensor of the encoder `cfg` describes, each
    /// from whichever of the checkpoint's files holds it.
    pub fn upload(
        ctx: &GpuContext,
        cfg: &BertConfig,
        shards: &[Shard],
    ) -> Result<BertWeights, ModelError> {
        let prefix = if find(shards, names::WORD).is_none()
            && find(shards, &format!("bert.{}", names::WORD)).is_some()
        {
            "bert."
        } else {
            ""
        };
        let r = Reader { shards, prefix };
        let d = cfg.dim;
        let vector = |name: &str, shape: &[usize]| -> Result<BufferRef, ModelError> {
            let v = r.f32s(name, shape)?;
            Ok(ctx.upload_f32(name, &v)?)
        };
        let norm = |name: &str| -> Result<Norm, ModelError> {
            Ok(Norm {
                weight: vector(&format!("{name}.weight"), &[d])?,
                bias: vector(&format!("{name}.bias"), &[d])?,
            })
        };
        let dense = |name: &str, rows: usize, cols: usize| -> Result<Dense, ModelError> {
            let w = r.f32s(&format!("{name}.weight"), &[rows, cols])?;
            Ok(Dense {
                w: QuantMatrix::upload(
                    ctx,
                    name,
                    GgmlType::F32,
                    rows,
                    cols,
                    bytemuck::cast_slice(&w),
                )?,
                bias: Some(vector(&format!("{name}.bias"), &[rows])?),
            })
        };
        let mut layers = Vec::with_capacity(cfg.layers);
        for i in 0..cfg.layers {
            let l = |name: &str| names::layer(i, name);
            // q, k, v stacked by rows: one projection, and attention reads
            // its columns 0, d and 2d.
            let mut qkv_w = Vec::with_capacity(3 * d * d);
            let mut qkv_b = Vec::with_capacity(3 * d);
            for part in [names::Q, names::K, names::V] {
                qkv_w.extend(r.f32s(&format!("{}.weight", l(part)), &[d, d])?);
                qkv_b.extend(r.f32s(&format!("{}.bias", l(part)), &[d])?);
            }
            let label = l("attention.self.qkv");
            layers.push(BertLayer {
                qkv: Dense {
                    w: QuantMatrix::upload(
                        ctx,
                        &label,
                        GgmlType::F32,
                        3 * d,
                        d,
                        bytemuck::cast_slice(&qkv_w),
                    )?,
                    bias: Some(ctx.upload_f32(&label, &qkv_b)?),
                },
                attn_out: dense(&l(names::ATTN_OUT), d, d)?,
                attn_norm: norm(&l(names::ATTN_NORM))?,
                up: dense(&l(names::UP), cfg.ffn, d)?,
                down: dense(&l(names::DOWN), d, cfg.ffn)?,
                ffn_norm: norm(&l(names::FFN_NORM))?,
            });
        }
        Ok(BertWeights {
            input: InputTables::Summed {
                word: vector(names::WORD, &[cfg.vocab, d])?,
                position: vector(names::POSITION, &[cfg.max_positions, d])?,
                token_type: vector(names::TOKEN_TYPE, &[cfg.token_types, d])?,
            },
            embed_norm: norm(names::EMBED_NORM)?,
            layers,
        })
    }
}
