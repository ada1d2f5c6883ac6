//! The KV cache: owned by the pipeline, preallocated for the whole context.

use crate::gpu::{BufferRef, GpuContext, GpuError};
use crate::kernels::kv::{KvDtype, KvLayout};
use crate::model::ModelConfig;

pub struct KvCache {
    pub layout: KvLayout,
    pub k: BufferRef,
    pub v: BufferRef,
}

impl KvCache {
    /// The longest context whose K (or V) cache fits one storage binding.
    pub fn max_ctx_len(ctx: &GpuContext, cfg: &ModelConfig, dtype: KvDtype) -> usize {
        let per_pos = dtype.bytes_per_elem() * (cfg.n_layers * cfg.kv_dim()) as u64;
        (ctx.max_binding_bytes() / per_pos.max(1)) as usize
    }

    pub fn new(
        ctx: &GpuContext,
        cfg: &ModelConfig,
        ctx_len: usize,
        dtype: KvDtype,
    ) -> Result<KvCache, GpuError> {
        let layout = KvLayout {
            layers: cfg.n_layers,
            ctx_len,
            kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            dtype,
        };
        let bytes = layout.bytes();
        Ok(KvCache {
            layout,
            k: ctx.create_storage("k cache", bytes)?,
            v: ctx.create_storage("v cache", bytes)?,
        })
    }
}
