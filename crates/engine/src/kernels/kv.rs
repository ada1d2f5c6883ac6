//! The KV cache layout and the kernel that writes new K/V rows into it.
//!
//! Layout: one f32 buffer for K and one for V, each
//! `[layers][ctx_len][kv_heads][head_dim]`. Positions are absolute: the row of
//! the token at position `p` of layer `l` starts at element
//! `l * ctx_len * kv_heads * head_dim + p * kv_heads * head_dim`.
//! Position-major inside a layer means that a prefill chunk's rows, which come
//! out of the K/V projections as `[rows][kv_heads * head_dim]`, land as one
//! contiguous run, and that attention reads one key's heads from one place.
//! Slots at positions not yet written hold whatever was there (zeros, or
//! garbage after a reset); attention never reads past the query's position.

use bytemuck::{Pod, Zeroable};

use super::check_elems;
use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};

/// Shape of a KV cache (of K or of V: both have the same layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    pub layers: usize,
    pub ctx_len: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl KvLayout {
    /// Elements of one token's row: all its KV heads.
    pub fn row_elems(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Elements of one layer's slice: `ctx_len` rows.
    pub fn layer_elems(&self) -> usize {
        self.ctx_len * self.row_elems()
    }

    /// First element of layer `layer`'s slice (pass it as `cache_layer_offset`
    /// / `layer_offset` to the kernels). A layer past the end gives an offset
    /// past the buffer, which the kernels reject as a shape error.
    pub fn layer_offset(&self, layer: usize) -> usize {
        debug_assert!(layer < self.layers, "layer {layer} of {}", self.layers);
        layer * self.layer_elems()
    }

    /// Elements of the whole cache (one of K or V).
    pub fn elements(&self) -> usize {
        self.layers * self.layer_elems()
    }

    /// Bytes of the whole cache (one of K or V).
    pub fn bytes(&self) -> u64 {
        self.elements() as u64 * 4
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n: u32,
    src_offset: u32,
    layer_offset: u32,
    pos0: u32,
    row_elems: u32,
    _pad: [u32; 3],
}

const SPEC: KernelSpec = KernelSpec {
    name: "kv_write",
    sources: &[include_str!("../../../../shaders/kv_write.wgsl")],
    defines: &[],
    entry: "main",
    storage: &[Access::Read, Access::ReadWrite],
};

/// Copies `rows` token rows `[rows][kv_heads * head_dim]` from `src` (at
/// element `src_offset`) into positions `pos0 .. pos0 + rows` of the layer
/// slice of `cache` starting at element `cache_layer_offset`.
#[allow(clippy::too_many_arguments)]
pub fn kv_write(
    rec: &mut Recorder,
    src: &GpuBuffer,
    src_offset: usize,
    cache: &GpuBuffer,
    cache_layer_offset: usize,
    rows: usize,
    pos0: u32,
    kv_heads: usize,
    head_dim: usize,
    ctx_len: usize,
) -> Result<(), GpuError> {
    const K: &str = "kv_write";
    if kv_heads == 0 || head_dim == 0 {
        return Err(shape_err(
            K,
            format!("kv_heads {kv_heads} and head_dim {head_dim} must be > 0"),
        ));
    }
    // pos0 is an argument, not a GPU-side value, so the bound is checked here,
    // when recording: a write past the context would corrupt the next layer.
    if pos0 as usize + rows > ctx_len {
        return Err(shape_err(
            K,
            format!(
                "positions {pos0}..{} exceed the context length {ctx_len}",
                pos0 as usize + rows
            ),
        ));
    }
    let row_elems = kv_heads * head_dim;
    check_elems(K, "src", src, src_offset + rows * row_elems)?;
    // The whole layer slice must exist, not just the rows written: a wrong
    // layer offset or ctx_len shows up here rather than as a silent overlap.
    check_elems(K, "cache", cache, cache_layer_offset + ctx_len * row_elems)?;
    if rows == 0 {
        return Ok(());
    }
    let n = rows * row_elems;
    let params = Params {
        n: n as u32,
        src_offset: src_offset as u32,
        layer_offset: cache_layer_offset as u32,
        pos0,
        row_elems: row_elems as u32,
        _pad: [0; 3],
    };
    rec.dispatch(&SPEC, &params, &[src, cache], workgroups_for(n as u32, 256));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_shape_err;
    use crate::testutil::{ctx, random_vec};

    #[test]
    fn layout_offsets() {
        let l = KvLayout {
            layers: 3,
            ctx_len: 10,
            kv_heads: 2,
            head_dim: 4,
        };
        assert_eq!(l.row_elems(), 8);
        assert_eq!(l.layer_offset(0), 0);
        assert_eq!(l.layer_offset(2), 160);
        assert_eq!(l.elements(), 240);
        assert_eq!(l.bytes(), 960);
    }

    #[test]
    fn kv_write_places_rows_and_touches_nothing_else() {
        let ctx = ctx();
        let l = KvLayout {
            layers: 2,
            ctx_len: 13,
            kv_heads: 3,
            head_dim: 5,
        };
        let row = l.row_elems();
        // NaN everywhere: any slot the kernel should not touch stays NaN.
        let mut want = vec![f32::NAN; l.elements()];
        let cache = ctx.upload_f32("cache", &want).unwrap();
        let src_off = 7;
        let src = random_vec(src_off + 6 * row, 11);
        let gsrc = ctx.upload_f32("src", &src).unwrap();
        // An earlier prefill of 4 rows at 0, then a chunk of 6 at 4 and a
        // decode row at 12 (the last slot), all in layer 1.
        let mut rec = Recorder::new(ctx);
        for (rows, pos0) in [(4, 0u32), (6, 4), (1, 12)] {
            kv_write(
                &mut rec,
                &gsrc,
                src_off,
                &cache,
                l.layer_offset(1),
                rows,
                pos0,
                3,
                5,
                13,
            )
            .unwrap();
            let dst = l.layer_offset(1) + pos0 as usize * row;
            want[dst..dst + rows * row].copy_from_slice(&src[src_off..src_off + rows * row]);
        }
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&cache, 0, l.elements())).unwrap();
        // A copy: bit-identical, NaNs included.
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
    }

    #[test]
    fn kv_write_rejects_bad_shapes() {
        let ctx = ctx();
        let l = KvLayout {
            layers: 2,
            ctx_len: 8,
            kv_heads: 2,
            head_dim: 4,
        };
        let cache = ctx.create_storage("cache", l.bytes()).unwrap();
        let src = ctx.create_storage("src", 3 * 8 * 4).unwrap();
        let mut rec = Recorder::new(ctx);
        let off = l.layer_offset(1);
        let mut call = |rows, pos0, src_off, cache_off| {
            kv_write(
                &mut rec, &src, src_off, &cache, cache_off, rows, pos0, 2, 4, 8,
            )
            .unwrap_err()
        };
        let err = call(3, 6, 0, off); // 6 + 3 > 8
        assert_shape_err(&err, "kv_write");
        assert!(err.to_string().contains("context length 8"), "{err}");
        let err = call(3, 0, 1, off); // src too short by one element
        assert!(err.to_string().contains("src"), "{err}");
        let err = call(1, 0, 0, off + 1); // layer slice runs past the cache
        assert!(err.to_string().contains("cache"), "{err}");
    }
}
