//! What a model will hold on the GPU, from its header and the pipeline
//! options, before anything is uploaded. Every size comes from the sizing
//! the allocating code itself uses (`plan_parts` for weights in their GPU
//! layout, `Activations::shapes`, `KvCache::buffer_bytes`, `storage_size`,
//! `readback_size`); a test loads models and checks the engine's live-bytes
//! counter grows by exactly this footprint.

use crate::format::quant::GgmlType;
use crate::gpu::buffer::storage_size;
use crate::gpu::readback::readback_size;
use crate::gpu::{GpuContext, GpuError};
use crate::kernels::sample::{SamplerState, MAX_BIAS};
use crate::kernels::weights::plan_parts;
use crate::model::activations::{f32_bytes, Activations};
use crate::model::fusion::Fusion;
use crate::model::loader::{padded_vector_len, stored_tensors, Need, StoredKind};
use crate::model::moe::MoeActivations;
use crate::model::ModelConfig;
use crate::pipeline::kv_cache::KvCache;
use crate::pipeline::speculative::verify::verify_rows;
use crate::pipeline::{logit_rows, sampled_per_submit, PipelineOptions};

/// Bytes of GPU memory by what they hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Weight matrices in their GPU layout (split into parts that fit a
    /// binding, each padded), norms and biases as f32.
    pub weights: u64,
    /// K and V for every position of the context.
    pub kv_cache: u64,
    /// Scratch of one prefill chunk (and the MoE scratch).
    pub activations: u64,
    /// Staging buffers the logits and sampled ids are read through.
    pub readback: u64,
    /// The GPU sampler's buffers and the ring of sampled ids.
    pub sampler: u64,
}

impl Footprint {
    pub fn total(&self) -> u64 {
        [
            self.weights,
            self.kv_cache,
            self.activations,
            self.readback,
            self.sampler,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// Bytes of the weights as the loader will upload them: fused groups
/// (`fusion.rs`) as one matrix or vector each, the rest one by one.
pub fn weights_bytes(
    ctx: &GpuContext,
    fusions: &[Fusion],
    needs: &[(GgmlType, &Need)],
) -> Result<u64, GpuError> {
    let max_part = ctx.max_weight_part_bytes();
    let parts_bytes = |name: &str, dtype, rows, cols, group| -> Result<u64, GpuError> {
        let parts = plan_parts(name, dtype, rows, cols, max_part, group, ctx.weight_store)?;
        Ok(parts.iter().map(|p| p.buffer_bytes).sum())
    };
    let mut total = 0u64;
    for t in stored_tensors(fusions, needs) {
        let add = match t.kind {
            StoredKind::Matrix {
                rows,
                cols,
                row_group,
            } => parts_bytes(&t.name, t.dtype, rows, cols, row_group)?,
            StoredKind::Vector { len } => storage_size(4 * padded_vector_len(len) as u64),
            StoredKind::Experts {
                experts,
                rows,
                cols,
            } => parts_bytes(&t.name, t.dtype, experts * rows, cols, rows)?,
        };
        total = total.saturating_add(add);
    }
    Ok(total)
}

/// The pipeline's buffers for a context of `ctx_len` positions, as
/// `Pipeline::new` makes them (each but the KV cache checked against the
/// binding limit as `create_storage` will check it), with `weights` beside
/// them.
pub fn footprint(
    ctx: &GpuContext,
    cfg: &ModelConfig,
    opts: &PipelineOptions,
    weights: u64,
    ctx_len: usize,
) -> Result<Footprint, GpuError> {
    let storage = |label: &str, bytes: u64| -> Result<u64, GpuError> {
        let size = storage_size(bytes);
        let limit = ctx.max_binding_bytes();
        if size > limit {
            return Err(GpuError::BufferTooLarge {
                label: label.to_string(),
                size,
                limit_name: "max_storage_buffer_binding_size",
                limit,
            });
        }
        Ok(size)
    };
    let rows = opts.prefill_chunk;
    let steps = sampled_per_submit(opts.tokens_per_submit) as u64;
    let mut activations = 0u64;
    let logit_rows = logit_rows(rows);
    // Rows a step may run as decode: an exact verifying pass's.
    for (label, n, width) in Activations::shapes(cfg, rows, logit_rows, verify_rows(rows)) {
        activations += storage(label, f32_bytes(ctx, label, &[n, width])?)?;
    }
    if let Some(moe) = &cfg.moe {
        for (label, words) in MoeActivations::shapes(cfg, moe, rows) {
            activations += storage(label, 4 * words as u64)?;
        }
    }
    // Not checked against the binding limit here: the preflight finds the
    // largest context whose cache fits one (`KvCache::max_ctx_len`).
    let kv = storage_size(KvCache::buffer_bytes(ctx, cfg, ctx_len, opts.kv_dtype)?);
    let vocab = cfg.vocab_size as u64;
    let mut sampler = vec![storage(
        "token ring",
        steps.saturating_add(1).saturating_mul(4),
    )?];
    let sizes = SamplerState::buffer_sizes(
        cfg.vocab_size,
        steps as usize,
        ctx_len.max(64),
        MAX_BIAS,
        verify_rows(rows),
    );
    for (label, bytes) in sizes {
        sampler.push(storage(label, bytes)?);
    }
    Ok(Footprint {
        weights,
        kv_cache: 2 * kv,
        activations,
        // The logits readback is as large as the logits buffer checked above.
        readback: readback_size(4 * vocab * logit_rows as u64)
            .saturating_add(2 * readback_size(steps.saturating_mul(4))),
        sampler: sampler.iter().sum(),
    })
}
