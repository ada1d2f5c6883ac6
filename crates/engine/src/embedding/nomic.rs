//! nomic-bert (nomic-embed-text-v1.5 and its kin) from a GGUF, as llama.cpp's
//! converter writes it: the shape from `nomic-bert.*` metadata, bounded and
//! checked, and the tensors uploaded for the shared encoder forward pass.
//! Whatever that pass does not run (causal attention, rope scaling, a
//! pooling it lacks, a tensor it would not read) is refused by name rather
//! than ignored.

use std::collections::HashSet;

use crate::format::gguf::{GgufFile, TensorInfo};
use crate::format::quant::{dequantize, GgmlType};
use crate::gpu::{BufferRef, GpuContext};
use crate::kernels::attention::bidir::MAX_HEAD_DIM;
use crate::kernels::encoder::pool::PoolMode;
use crate::kernels::weights::QuantMatrix;
use crate::model::ModelError;

use super::bert_config::{bounded, BertConfig, Ffn, Positions, MAX_DIM, MAX_VOCAB};
use super::bert_weights::{BertLayer, BertWeights, Dense, InputTables, Norm};

pub const ARCH: &str = "nomic-bert";

fn config_err(msg: String) -> ModelError {
    ModelError::Config(format!("{ARCH}: {msg}"))
}

fn key(k: &str) -> String {
    format!("{ARCH}.{k}")
}

/// The encoder's shape and its pooling, from the GGUF's metadata.
pub fn config(file: &GgufFile) -> Result<(BertConfig, PoolMode), ModelError> {
    let arch = file.architecture()?;
    if arch != ARCH {
        return Err(ModelError::UnsupportedArchitecture(format!(
            "{arch} (as an embedding GGUF wick runs: {ARCH})"
        )));
    }
    let u = |k: &str, max: u64| -> Result<usize, ModelError> {
        bounded(&key(k), file.meta_u64(&key(k))?, max)
    };
    let dim = u("embedding_length", MAX_DIM)?;
    let heads = u("attention.head_count", 1024)?;
    if let Some(kv) = file.meta_u64_opt(&key("attention.head_count_kv"))? {
        if kv as usize != heads {
            return Err(config_err(format!(
                "{kv} key/value heads for {heads} query heads (grouped attention), which wick's encoder does not implement"
            )));
        }
    }
    let head_dim = dim / heads;
    if dim % heads != 0 || head_dim % 4 != 0 || head_dim > MAX_HEAD_DIM {
        return Err(config_err(format!(
            "embedding_length {dim} over {heads} heads (heads of a multiple of 4 up to {MAX_HEAD_DIM} elements are supported)"
        )));
    }
    if file.meta_bool_opt(&key("attention.causal"))? == Some(true) {
        return Err(config_err(
            "attention.causal is true, which wick's encoder does not implement".into(),
        ));
    }
    if let Some(kind) = file.meta_str_opt(&key("rope.scaling.type"))? {
        if kind != "none" {
            return Err(config_err(format!(
                "rope.scaling.type '{kind}', which wick's encoder does not implement"
            )));
        }
    }
    let theta = file
        .meta_f32_opt(&key("rope.freq_base"))?
        .unwrap_or(10000.0);
    if !(theta > 0.0 && theta.is_finite()) {
        return Err(config_err(format!("rope.freq_base {theta}")));
    }
    let n_rot = match file.meta_u64_opt(&key("rope.dimension_count"))? {
        None => head_dim,
        Some(n) if n > 0 && n % 2 == 0 && n as usize <= head_dim => n as usize,
        Some(n) => {
            return Err(config_err(format!(
                "rope.dimension_count {n} (even, at most the head's {head_dim})"
            )))
        }
    };
    let eps = file
        .meta_f32_opt(&key("attention.layer_norm_epsilon"))?
        .unwrap_or(1e-12);
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(config_err(format!("attention.layer_norm_epsilon {eps}")));
    }
    // llama.cpp's enum llama_pooling_type.
    let pooling = match file.meta_i64_opt(&key("pooling_type"))?.unwrap_or(1) {
        1 => PoolMode::Mean,
        2 => PoolMode::First,
        3 => PoolMode::Last,
        other => {
            let name = match other {
                0 => "0 (none: one vector a token)",
                4 => "4 (rank: a reranker)",
                _ => "unknown",
            };
            return Err(config_err(format!(
                "pooling_type {name}, which wick's embeddings do not implement (mean, cls, last)"
            )));
        }
    };
    let word = file
        .tensor("token_embd.weight")
        .ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))?;
    let vocab = bounded(
        "token_embd.weight rows",
        word.dims.get(1).copied().unwrap_or(0),
        MAX_VOCAB,
    )?;
    let cfg = BertConfig {
        vocab,
        dim,
        layers: u("block_count", 256)?,
        heads,
        head_dim,
        ffn: u("feed_forward_length", 4 * MAX_DIM)?,
        max_positions: u("context_length", 1 << 16)?,
        token_types: 1,
        norm_eps: eps,
        positions: Positions::Rotary { theta, n_rot },
        ffn_kind: Ffn::SwiGlu,
    };
    Ok((cfg, pooling))
}

/// Reads the file's tensors, remembering which were read.
struct Reader<'a> {
    file: &'a GgufFile,
    bytes: &'a [u8],
    read: HashSet<String>,
}

impl<'a> Reader<'a> {
    /// The tensor `name`, which must have `dims` (ggml order: row length first).
    fn get(
        &mut self,
        name: &str,
        dims: &[usize],
    ) -> Result<(&'a TensorInfo, &'a [u8]), ModelError> {
        let t = self
            .file
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor(name.into()))?;
        let expected: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        if t.dims != expected {
            return Err(ModelError::TensorShape {
                name: name.into(),
                expected,
                found: t.dims.clone(),
            });
        }
        self.read.insert(name.into());
        Ok((t, self.file.tensor_bytes(self.bytes, t)?))
    }

    fn f32s(&mut self, name: &str, dims: &[usize]) -> Result<Vec<f32>, ModelError> {
        let (t, raw) = self.get(name, dims)?;
        Ok(dequantize(t.dtype, raw, t.n_elements as usize)?)
    }

    /// A projection in its stored type: `rows` outputs of `cols` inputs.
    fn matrix(
        &mut self,
        ctx: &GpuContext,
        name: &str,
        rows: usize,
        cols: usize,
    ) -> Result<QuantMatrix, ModelError> {
        let (t, raw) = self.get(name, &[cols, rows])?;
        Ok(QuantMatrix::upload(ctx, name, t.dtype, rows, cols, raw)?)
    }
}

/// Checks and uploads every tensor of the encoder `cfg` describes; a tensor
/// the forward pass would not read is refused by name.
pub fn upload(
    ctx: &GpuContext,
    cfg: &BertConfig,
    file: &GgufFile,
    bytes: &[u8],
) -> Result<BertWeights, ModelError> {
    let mut r = Reader {
        file,
        bytes,
        read: HashSet::new(),
    };
    let (d, ffn) = (cfg.dim, cfg.ffn);
    let vector = |r: &mut Reader, name: &str| -> Result<BufferRef, ModelError> {
        let v = r.f32s(name, &[d])?;
        Ok(ctx.upload_f32(name, &v)?)
    };
    let norm = |r: &mut Reader, name: &str| -> Result<Norm, ModelError> {
        Ok(Norm {
            weight: vector(r, &format!("{name}.weight"))?,
            bias: vector(r, &format!("{name}.bias"))?,
        })
    };

    // Every token is type 0: fold that row into the word table.
    let types = file
        .tensor("token_types.weight")
        .map_or(1, |t| t.dims.get(1).copied().unwrap_or(0) as usize);
    let type_rows = r.f32s("token_types.weight", &[d, types.max(1)])?;
    let mut word = r.f32s("token_embd.weight", &[d, cfg.vocab])?;
    for row in word.chunks_exact_mut(d) {
        for (w, t) in row.iter_mut().zip(&type_rows[..d]) {
            *w += t;
        }
    }
    let word = QuantMatrix::upload(
        ctx,
        "token_embd.weight + token_types.weight[0]",
        GgmlType::F32,
        cfg.vocab,
        d,
        bytemuck::cast_slice(&word),
    )?;
    let embed_norm = norm(&mut r, "token_embd_norm")?;

    let mut layers = Vec::with_capacity(cfg.layers);
    for i in 0..cfg.layers {
        let l = |s: &str| format!("blk.{i}.{s}");
        // Gate and up as one matrix of interleaved row pairs (gate row j,
        // then up row j): the gated epilogue of the linear kernel reads a
        // pair side by side. Rows move as stored bytes, any type.
        let (gate_t, gate) = r.get(&l("ffn_gate.weight"), &[d, ffn])?;
        let (up_t, up) = r.get(&l("ffn_up.weight"), &[d, ffn])?;
        if gate_t.dtype != up_t.dtype {
            return Err(ModelError::UnsupportedQuant {
                tensor: l("ffn_up.weight"),
                dtype: format!(
                    "{:?} beside ffn_gate's {:?} (gate and up must share a type to run as one matrix)",
                    up_t.dtype, gate_t.dtype
                ),
            });
        }
        let row = gate.len() / ffn;
        let mut joined = Vec::with_capacity(2 * gate.len());
        for (g, u) in gate.chunks_exact(row).zip(up.chunks_exact(row)) {
            joined.extend_from_slice(g);
            joined.extend_from_slice(u);
        }
        let label = l("ffn_gate_up.weight");
        layers.push(BertLayer {
            qkv: Dense {
                w: r.matrix(ctx, &l("attn_qkv.weight"), 3 * d, d)?,
                bias: None,
            },
            attn_out: Dense {
                w: r.matrix(ctx, &l("attn_output.weight"), d, d)?,
                bias: None,
            },
            attn_norm: norm(&mut r, &l("attn_output_norm"))?,
            up: Dense {
                w: QuantMatrix::upload(ctx, &label, gate_t.dtype, 2 * ffn, d, &joined)?,
                bias: None,
            },
            down: Dense {
                w: r.matrix(ctx, &l("ffn_down.weight"), d, ffn)?,
                bias: None,
            },
            ffn_norm: norm(&mut r, &l("layer_output_norm"))?,
        });
    }
    if let Some(t) = file.tensors.iter().find(|t| !r.read.contains(&t.name)) {
        return Err(config_err(format!(
            "tensor '{}', which wick's nomic-bert does not read (a bias or a layer it does not implement)",
            t.name
        )));
    }
    Ok(BertWeights {
        input: InputTables::Gathered(word),
        embed_norm,
        layers,
    })
}

#[cfg(test)]
#[path = "nomic_tests.rs"]
mod tests;
