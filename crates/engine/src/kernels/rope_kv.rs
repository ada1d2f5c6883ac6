//! What follows the fused QKV projection, in one dispatch: per-head q/k
//! RMSNorm (optional), RoPE on queries and keys, queries out to their own
//! buffer for attention, keys and values into the KV cache.
//!
//! Its results equal those of the separate kernels it replaces (`rms_norm`
//! per head, `rope`, `kv_write`; each tested against a CPU reference), which
//! is what its test checks.

use std::borrow::Cow;

use bytemuck::{Pod, Zeroable};

use super::check_elems;
use super::kv::{KvDtype, KvLayout};
use super::rope::RopeLayout;
use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    rows: u32,
    q_heads: u32,
    kv_heads: u32,
    head_dim: u32,
    n_rot: u32,
    pos0: u32,
    neox: u32,
    qkv_offset: u32,
    q_offset: u32,
    layer_offset: u32,
    log2_base_step: f32,
    freq_scale: f32,
    eps: f32,
    _pad: [u32; 3],
}

const SOURCE: &str = include_str!("../../../../shaders/rope_kv.wgsl");
const RW: Access = Access::ReadWrite;
const R: Access = Access::Read;

const ON: Cow<str> = Cow::Borrowed("");
const OFF: Cow<str> = Cow::Borrowed("//");
const F32_WORD: (&str, Cow<str>) = ("KV_WORD", Cow::Borrowed("f32"));
const F16_WORD: (&str, Cow<str>) = ("KV_WORD", Cow::Borrowed("u32"));
const PLAIN_STORAGE: &[Access] = &[R, RW, RW, RW];
const NORMED_STORAGE: &[Access] = &[R, RW, RW, RW, R, R];

/// Variants: with or without the q/k norms, for each cache type.
const fn spec(
    name: &'static str,
    defines: &'static [(&'static str, Cow<'static, str>)],
    storage: &'static [Access],
) -> KernelSpec<'static> {
    KernelSpec {
        name,
        sources: &[SOURCE],
        defines,
        entry: "main",
        storage,
    }
}
const PLAIN_F32: KernelSpec = spec(
    "rope_kv",
    &[("QK_NORM", OFF), ("F32", ON), ("F16", OFF), F32_WORD],
    PLAIN_STORAGE,
);
const NORMED_F32: KernelSpec = spec(
    "rope_kv_qk_norm",
    &[("QK_NORM", ON), ("F32", ON), ("F16", OFF), F32_WORD],
    NORMED_STORAGE,
);
const PLAIN_F16: KernelSpec = spec(
    "rope_kv_f16",
    &[("QK_NORM", OFF), ("F32", OFF), ("F16", ON), F16_WORD],
    PLAIN_STORAGE,
);
const NORMED_F16: KernelSpec = spec(
    "rope_kv_qk_norm_f16",
    &[("QK_NORM", ON), ("F32", OFF), ("F16", ON), F16_WORD],
    NORMED_STORAGE,
);

/// The rotation: as `rope::rope` takes it.
#[derive(Clone, Copy, Debug)]
pub struct Rotary {
    pub n_rot: usize,
    pub theta: f32,
    pub layout: RopeLayout,
    pub freq_scale: f32,
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
    pub rotary: Rotary,
    pub rows: usize,
    pub pos0: u32,
}

pub fn rope_kv(rec: &mut Recorder, a: &RopeKv) -> Result<(), GpuError> {
    const K: &str = "rope_kv";
    let (kv, rot) = (&a.kv, &a.rotary);
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
    if rot.n_rot == 0 || rot.n_rot % 2 == 1 || rot.n_rot > hd {
        return Err(shape_err(
            K,
            format!("n_rot {} must be even, > 0 and <= head_dim {hd}", rot.n_rot),
        ));
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
    let params = Params {
        rows: a.rows as u32,
        q_heads: a.q_heads as u32,
        kv_heads: kv.kv_heads as u32,
        head_dim: hd as u32,
        n_rot: rot.n_rot as u32,
        pos0: a.pos0,
        neox: (rot.layout == RopeLayout::NeoX) as u32,
        qkv_offset: a.qkv_offset as u32,
        q_offset: a.q_offset as u32,
        layer_offset: kv.layer_offset(a.layer) as u32,
        // In f64, so the only rounding is the one to f32 (as rope.rs).
        log2_base_step: (2.0 * (rot.theta as f64).log2() / rot.n_rot as f64) as f32,
        freq_scale: rot.freq_scale,
        eps: a.qk_norm.map_or(0.0, |n| n.2),
        _pad: [0; 3],
    };
    let groups = workgroups_for((a.rows * slots) as u32, 1);
    let f16 = kv.dtype == KvDtype::F16;
    match a.qk_norm {
        None => rec.dispatch(
            if f16 { &PLAIN_F16 } else { &PLAIN_F32 },
            &params,
            &[a.qkv, a.q_out, a.k_cache, a.v_cache],
            groups,
        ),
        Some((qn, kn, _)) => {
            check_elems(K, "q norm", qn, hd)?;
            check_elems(K, "k norm", kn, hd)?;
            rec.dispatch(
                if f16 { &NORMED_F16 } else { &NORMED_F32 },
                &params,
                &[a.qkv, a.q_out, a.k_cache, a.v_cache, qn, kn],
                groups,
            )
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "rope_kv_tests.rs"]
mod tests;
