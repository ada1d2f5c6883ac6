//! The KV cache: owned by the pipeline, preallocated for the whole context.

use crate::gpu::{BufferRef, GpuContext, GpuError};
use crate::kernels::attention::kv::{KvDtype, KvLayout};
use crate::model::activations::f32_bytes;
use crate::model::ModelConfig;

pub struct KvCache {
    pub layout: KvLayout,
    pub k: BufferRef,
    pub v: BufferRef,
}

impl KvCache {
    /// The longest context whose K (or V) cache fits one storage binding.
    pub fn max_ctx_len(ctx: &GpuContext, cfg: &ModelConfig, dtype: KvDtype) -> usize {
        // Saturating: a row past u64 fits no binding, so nothing fits.
        let per_pos = (cfg.n_layers as u64)
            .saturating_mul(cfg.kv_dim() as u64)
            .saturating_mul(dtype.bytes_per_elem());
        usize::try_from(ctx.max_binding_bytes() / per_pos.max(1)).unwrap_or(usize::MAX)
    }

    fn layout(cfg: &ModelConfig, ctx_len: usize, dtype: KvDtype) -> KvLayout {
        KvLayout {
            layers: cfg.n_layers,
            ctx_len,
            kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            dtype,
        }
    }

    /// Bytes of the K (or the V) cache for `ctx_len` positions: what `new`
    /// allocates twice and the memory preflight counts.
    pub fn buffer_bytes(
        ctx: &GpuContext,
        cfg: &ModelConfig,
        ctx_len: usize,
        dtype: KvDtype,
    ) -> Result<u64, GpuError> {
        let layout = Self::layout(cfg, ctx_len, dtype);
        // Checked: `ctx_len` is the caller's. An f16 cache takes half the
        // bytes of f32 (row_elems is even: head_dim is whole vec4s).
        let dims = [cfg.n_layers, ctx_len, layout.row_elems()];
        Ok(f32_bytes(ctx, "k cache", &dims)? / (4 / dtype.bytes_per_elem()))
    }

    pub fn new(
        ctx: &GpuContext,
        cfg: &ModelConfig,
        ctx_len: usize,
        dtype: KvDtype,
    ) -> Result<KvCache, GpuError> {
        let layout = Self::layout(cfg, ctx_len, dtype);
        let bytes = Self::buffer_bytes(ctx, cfg, ctx_len, dtype)?;
        Ok(KvCache {
            layout,
            k: ctx.create_storage("k cache", bytes)?,
            v: ctx.create_storage("v cache", bytes)?,
        })
    }
}
