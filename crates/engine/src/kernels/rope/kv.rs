//! What follows the fused QKV projection, in one dispatch: per-head q/k
//! RMSNorm (optional), RoPE on queries and keys, queries out to their own
//! buffer for attention, keys and values into the KV cache.
//!
//! Its results equal those of the separate kernels it replaces (`rms_norm`
//! per head, `rope`, `kv_write`; each tested against a CPU reference), which
//! is what its test checks.

use crate::gpu::params::kernel_params;
use std::borrow::Cow;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, OwnedSpec, Recorder, VariantKey,
};
use crate::kernels::attention::kv::{KvDtype, KvLayout};
use crate::kernels::rope::RopeLayout;
pub use crate::kernels::rope::{Rotary, Yarn};
use crate::kernels::{check_elems, words};

kernel_params! {
    pub(crate) struct Params {
        /// tokens
        rows: u32,
        q_heads: u32,
        kv_heads: u32,
        /// <= 256
        head_dim: u32,
        /// even, <= head_dim; 0: no rotation (a NoPE layer)
        n_rot: u32,
        /// position of token 0
        pos0: u32,
        /// 0: interleaved pairs, 1: neox pairs
        neox: u32,
        /// first element of qkv
        qkv_offset: u32,
        /// first element of q_out
        q_offset: u32,
        /// first element of this layer's slice of each cache
        layer_offset: u32,
        /// 2 * log2(base) / n_rot, computed in f64 on the CPU
        log2_base_step: f32,
        freq_scale: f32,
        /// of the q/k norms
        eps: f32,
        /// YaRN, see rope.wgsl; 0: off
        ext_factor: f32,
        corr_low: f32,
        corr_high: f32,
        /// multiplies cos and sin
        mscale: f32,
    }
}

const SOURCE: &str = include_str!("../../../../../shaders/rope/rope_kv.wgsl");
const RW: Access = Access::ReadWrite;
const R: Access = Access::Read;

/// The variant for q/k norms or none (bindings 5 and 6), frequency factors
/// or none (the binding after the rest), and the cache's element type.
fn spec(norm: bool, freq_factors: bool, dtype: KvDtype, serial: bool) -> OwnedSpec {
    let f16 = dtype == KvDtype::F16;
    let storage: &'static [Access] = match (norm, freq_factors) {
        (false, false) => &[R, RW, RW, RW],
        (true, false) => &[R, RW, RW, RW, R, R],
        (false, true) => &[R, RW, RW, RW, R],
        (true, true) => &[R, RW, RW, RW, R, R, R],
    };
    // Bindings count from 1 (0 is the parameters): the factors come last.
    let ff_binding = if norm { 7 } else { 5 };
    OwnedSpec {
        name: format!(
            "rope_kv_norm{}_ff{}_{}{}",
            norm as u8,
            freq_factors as u8,
            dtype.name(),
            if serial { "_serial" } else { "" }
        ),
        sources: vec![SOURCE],
        flags: vec![
            ("QK_NORM", norm),
            ("FREQ_FACTORS", freq_factors),
            ("F16", f16),
            ("SERIAL", serial),
        ],
        defines: vec![
            ("FF_BINDING", ff_binding.to_string().into()),
            ("KV_WORD", Cow::Borrowed(if f16 { "u32" } else { "f32" })),
            ("LANES", if serial { "1" } else { "64" }.into()),
        ],
        entry: "main",
        storage: storage.into(),
    }
}

/// Where one step's heads come from and go.
pub struct RopeKv<'a> {
    /// `[rows][(q_heads + 2 kv_heads) * head_dim]` from `qkv_offset`.
    pub qkv: &'a GpuBuffer,
    pub qkv_offset: usize,
    pub q_heads: usize,
    /// Rotated queries, `[rows][q_heads * head_dim]` from `q_offset`.
    pub q_out: &'a GpuBuffer,
    pub q_offset: usize,
    pub k_cache: &'a GpuBuffer,
    pub v_cache: &'a GpuBuffer,
    pub kv: KvLayout,
    pub layer: usize,
    /// Per-head norms of queries and keys (`head_dim` weights each) and eps.
    pub qk_norm: Option<(&'a GpuBuffer, &'a GpuBuffer, f32)>,
    /// `None`: the layer has no position embedding at all (SmolLM3's NoPE
    /// layers): q and k pass through, normed where `qk_norm` says.
    pub rotary: Option<Rotary<'a>>,
    pub rows: usize,
    pub pos0: u32,
}

pub fn rope_kv(rec: &mut Recorder, a: &RopeKv) -> Result<(), GpuError> {
    let serial = rec.ctx().tuning.rope_kv_serial;
    rope_kv_form(rec, a, serial)
}

/// `rope_kv` in the workgroup form (a workgroup of 64 a head: GPUs) or the
/// serial one (an invocation a head, so no barrier at all: CPU adapters,
/// where a prompt's thousands of one-head workgroups cost about 1.4 us each
/// on lavapipe whatever they did).
fn rope_kv_form(rec: &mut Recorder, a: &RopeKv, serial: bool) -> Result<(), GpuError> {
    const K: &str = "rope_kv";
    let kv = &a.kv;
    let hd = kv.head_dim;
    if a.q_heads == 0 || kv.kv_heads == 0 || hd == 0 || hd > 256 {
        return Err(shape_err(
            K,
            format!(
                "{} query heads, {} kv heads of {hd} (at most 256) elements",
                a.q_heads, kv.kv_heads
            ),
        ));
    }
    if let Some(rot) = &a.rotary {
        rot.check(K, hd)?;
    }
    if a.layer >= kv.layers || a.pos0 as usize + a.rows > kv.ctx_len {
        return Err(shape_err(
            K,
            format!(
                "positions {}..{} of layer {} do not fit a cache of {} layers x {} positions",
                a.pos0,
                a.pos0 as usize + a.rows,
                a.layer,
                kv.layers,
                kv.ctx_len
            ),
        ));
    }
    let slots = a.q_heads + 2 * kv.kv_heads;
    check_elems(K, "qkv", a.qkv, a.qkv_offset + a.rows * slots * hd)?;
    check_elems(K, "q_out", a.q_out, a.q_offset + a.rows * a.q_heads * hd)?;
    check_elems(K, "k_cache", a.k_cache, kv.dtype.words(kv.elements()))?;
    check_elems(K, "v_cache", a.v_cache, kv.dtype.words(kv.elements()))?;
    if kv.dtype == KvDtype::F16 && hd % 2 != 0 {
        return Err(shape_err(
            K,
            format!("an f16 cache needs an even head_dim, not {hd}"),
        ));
    }
    let ids = [a.qkv.id(), a.q_out.id(), a.k_cache.id(), a.v_cache.id()];
    if (1..4).any(|i| ids[..i].contains(&ids[i])) {
        return Err(shape_err(
            K,
            "qkv, q_out and the two caches must be four buffers",
        ));
    }
    // Without a rotation n_rot is 0: every element takes the kernel's
    // pass-through branch, which reads none of the angle parameters.
    let (n_rot, neox, log2_base_step, freq_scale, yarn) = match &a.rotary {
        Some(r) => (
            r.n_rot,
            r.layout == RopeLayout::NeoX,
            r.log2_base_step(),
            r.freq_scale,
            r.yarn_params(),
        ),
        None => (0, false, 0.0, 1.0, (0.0, 0.0, 1.0)),
    };
    let (corr_low, corr_high, mscale) = yarn;
    let ext_factor = a.rotary.map_or(0.0, |r| r.yarn.ext_factor);
    let params = Params {
        rows: a.rows as u32,
        q_heads: a.q_heads as u32,
        kv_heads: kv.kv_heads as u32,
        head_dim: hd as u32,
        n_rot: n_rot as u32,
        pos0: a.pos0,
        neox: neox as u32,
        qkv_offset: a.qkv_offset as u32,
        q_offset: a.q_offset as u32,
        layer_offset: kv.layer_offset(a.layer) as u32,
        log2_base_step,
        freq_scale,
        eps: a.qk_norm.map_or(0.0, |n| n.2),
        ext_factor,
        corr_low,
        corr_high,
        mscale,
    };
    let groups = workgroups_for((a.rows * slots) as u32, if serial { 64 } else { 1 });
    // An array, not a Vec: a decode step allocates nothing.
    let mut buffers = [a.qkv, a.q_out, a.k_cache, a.v_cache, a.qkv, a.qkv, a.qkv];
    let mut n = 4;
    if let Some((qn, kn, _)) = a.qk_norm {
        check_elems(K, "q norm", qn, hd)?;
        check_elems(K, "k norm", kn, hd)?;
        buffers[4..6].copy_from_slice(&[qn, kn]);
        n = 6;
    }
    let factors = a.rotary.and_then(|r| r.freq_factors);
    if let Some(f) = factors {
        buffers[n] = f;
        n += 1;
    }
    // q, k and v read; q and the cache's k and v rows written.
    let (q_dim, kv_dim) = (a.q_heads * hd, kv.kv_heads * hd);
    let cache = 2 * (a.rows * kv_dim) as u64 * kv.dtype.bytes_per_elem();
    rec.moved(words(a.rows * (2 * q_dim + 2 * kv_dim)) + cache);
    let (norm, ff) = (a.qk_norm.is_some(), factors.is_some());
    let key = VariantKey {
        family: "rope_kv",
        fmt: kv.dtype.name(),
        args: [norm as u32, ff as u32, serial as u32, 0, 0, 0],
    };
    let make = || spec(norm, ff, kv.dtype, serial);
    rec.dispatch_variant(&key, make, &params, &buffers[..n], groups);
    Ok(())
}

#[cfg(test)]
#[path = "kv_tests.rs"]
mod tests;
