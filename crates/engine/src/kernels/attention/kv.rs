//! The KV cache layout and the kernel that writes new K/V rows into it.
//!
//! Layout: one buffer for K and one for V, each
//! `[layers][ctx_len][kv_heads][head_dim]` of f32, or of f16 two to a
//! `u32` (`KvDtype::F16`, what llama.cpp's cache holds by default: half the
//! memory and half the bytes attention reads). Positions are absolute: the row of
//! the token at position `p` of layer `l` starts at element
//! `l * ctx_len * kv_heads * head_dim + p * kv_heads * head_dim`.
//! Position-major inside a layer means that a prefill chunk's rows, which come
//! out of the K/V projections as `[rows][kv_heads * head_dim]`, land as one
//! contiguous run, and that attention reads one key's heads from one place.
//! Slots at positions not yet written hold whatever was there (zeros, or
//! garbage after a reset); attention never reads past the query's position.

use crate::gpu::params::kernel_params;
use std::borrow::Cow;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;

/// How the cache stores each element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum KvDtype {
    F32,
    /// IEEE half, element `2i` in the low 16 bits of word `i` and `2i + 1`
    /// in the high 16 (WGSL's `pack2x16float` / `unpack2x16float`, core
    /// WGSL: no `shader-f16` needed). Rounded to nearest when written, as
    /// llama.cpp rounds its f16 cache.
    #[default]
    F16,
}

impl KvDtype {
    pub fn bytes_per_elem(self) -> u64 {
        match self {
            KvDtype::F32 => 4,
            KvDtype::F16 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::F16 => "f16",
        }
    }

    /// 32-bit words holding `elems` elements (an even count for f16).
    pub(crate) fn words(self, elems: usize) -> usize {
        match self {
            KvDtype::F32 => elems,
            KvDtype::F16 => elems.div_ceil(2),
        }
    }
}

impl std::str::FromStr for KvDtype {
    type Err = String;
    fn from_str(s: &str) -> Result<KvDtype, String> {
        match s {
            "f32" => Ok(KvDtype::F32),
            "f16" => Ok(KvDtype::F16),
            _ => Err(format!("KV cache type '{s}': expected f16 or f32")),
        }
    }
}

/// Shape of a KV cache (of K or of V: both have the same layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    pub layers: usize,
    pub ctx_len: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub dtype: KvDtype,
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
        self.elements() as u64 * self.dtype.bytes_per_elem()
    }
}

kernel_params! {
    pub(crate) struct Params {
        /// rows * row_elems elements (f32) or words (f16) to write
        n: u32,
        /// first element of src
        src_offset: u32,
        /// first element of this layer's slice of the cache
        layer_offset: u32,
        /// absolute position of the first row
        pos0: u32,
        /// kv_heads * head_dim
        row_elems: u32,
    }
}

const SOURCES: &[&str] = &[include_str!(
    "../../../../../shaders/attention/kv_write.wgsl"
)];
const STORAGE: &[Access] = &[Access::Read, Access::ReadWrite];
const SPEC_F32: KernelSpec = KernelSpec {
    name: "kv_write",
    sources: SOURCES,
    flags: &[],
    defines: &[
        (
            "WRITE",
            Cow::Borrowed(
                "cache[p.layer_offset + p.pos0 * p.row_elems + i] = src[p.src_offset + i];",
            ),
        ),
        ("WORD", Cow::Borrowed("f32")),
    ],
    entry: "main",
    storage: STORAGE,
};
const SPEC_F16: KernelSpec = KernelSpec {
    name: "kv_write_f16",
    sources: SOURCES,
    flags: &[],
    defines: &[(
        "WRITE",
        Cow::Borrowed("let s = p.src_offset + 2u * i;\n    cache[(p.layer_offset + p.pos0 * p.row_elems) / 2u + i] = pack2x16float(vec2(src[s], src[s + 1u]));"),
    ), ("WORD", Cow::Borrowed("u32"))],
    entry: "main",
    storage: STORAGE,
};

/// Copies `rows` token rows `[rows][kv_heads * head_dim]` from `src` (at
/// element `src_offset`) into positions `pos0 .. pos0 + rows` of the layer
/// slice of `cache` (laid out as `kv`) starting at element
/// `cache_layer_offset`, rounding to f16 for an f16 cache.
#[allow(clippy::too_many_arguments)]
pub fn kv_write(
    rec: &mut Recorder,
    src: &GpuBuffer,
    src_offset: usize,
    cache: &GpuBuffer,
    kv: &KvLayout,
    cache_layer_offset: usize,
    rows: usize,
    pos0: u32,
) -> Result<(), GpuError> {
    const K: &str = "kv_write";
    let (kv_heads, head_dim, ctx_len) = (kv.kv_heads, kv.head_dim, kv.ctx_len);
    if kv_heads == 0 || head_dim == 0 {
        return Err(shape_err(
            K,
            format!("kv_heads {kv_heads} and head_dim {head_dim} must be > 0"),
        ));
    }
    // An f16 cache is written a word (two elements) at a time.
    let f16 = kv.dtype == KvDtype::F16;
    if f16 && (head_dim % 2 != 0 || cache_layer_offset % 2 != 0) {
        return Err(shape_err(
            K,
            format!("an f16 cache needs an even head_dim ({head_dim}) and layer offset ({cache_layer_offset})"),
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
    let slice_end = kv.dtype.words(cache_layer_offset + ctx_len * row_elems);
    check_elems(K, "cache", cache, slice_end)?;
    if rows == 0 {
        return Ok(());
    }
    // Invocations: one per element, or per pair of an f16 cache.
    let n = kv.dtype.words(rows * row_elems);
    let params = Params {
        n: n as u32,
        src_offset: src_offset as u32,
        layer_offset: cache_layer_offset as u32,
        pos0,
        row_elems: row_elems as u32,
    };
    let spec = if f16 { &SPEC_F16 } else { &SPEC_F32 };
    rec.dispatch(spec, &params, &[src, cache], workgroups_for(n as u32, 256));
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
            dtype: KvDtype::F32,
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
            dtype: KvDtype::F32,
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
                &l,
                l.layer_offset(1),
                rows,
                pos0,
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
            dtype: KvDtype::F32,
        };
        let cache = ctx.create_storage("cache", l.bytes()).unwrap();
        let src = ctx.create_storage("src", 3 * 8 * 4).unwrap();
        let mut rec = Recorder::new(ctx);
        let off = l.layer_offset(1);
        let mut call = |rows, pos0, src_off, cache_off| {
            kv_write(&mut rec, &src, src_off, &cache, &l, cache_off, rows, pos0).unwrap_err()
        };
        let err = call(3, 6, 0, off); // 6 + 3 > 8
        assert_shape_err(&err, "kv_write");
        assert!(err.to_string().contains("context length 8"), "{err}");
        let err = call(3, 0, 1, off); // src too short by one element
        assert!(err.to_string().contains("src"), "{err}");
        let err = call(1, 0, 0, off + 1); // layer slice runs past the cache
        assert!(err.to_string().contains("cache"), "{err}");
        let f16 = KvLayout {
            dtype: KvDtype::F16,
            ..l
        };
        let err = kv_write(&mut rec, &src, 0, &cache, &f16, 1, 1, 0).unwrap_err();
        assert!(err.to_string().contains("even"), "{err}");
    }

    #[test]
    fn f16_cache_rounds_to_nearest_and_touches_nothing_else() {
        let ctx = ctx();
        let l = KvLayout {
            layers: 2,
            ctx_len: 9,
            kv_heads: 3,
            head_dim: 6,
            dtype: KvDtype::F16,
        };
        assert_eq!(l.bytes(), 2 * l.elements() as u64);
        let row = l.row_elems();
        // Words of all ones (a NaN pair) mark what must stay untouched.
        let words = l.elements() / 2;
        let mut want = vec![u32::MAX; words];
        let cache = ctx
            .upload_f32("cache", &vec![f32::from_bits(u32::MAX); words])
            .unwrap();
        // Values between f16 steps, so rounding direction matters, and
        // values beyond f16's range, which become infinities.
        let mut src = random_vec(5 + 4 * row, 3);
        src[5] = 70000.0;
        src[6] = 1.0 + 1.75 * f32::EPSILON * 8192.0; // 3/4 of the way from one f16 to the next
        let gsrc = ctx.upload_f32("src", &src).unwrap();
        let mut rec = Recorder::new(ctx);
        for (rows, pos0) in [(3, 0u32), (1, 8)] {
            let src_off = 5 + (pos0 as usize / 8) * 3 * row;
            kv_write(
                &mut rec,
                &gsrc,
                src_off,
                &cache,
                &l,
                l.layer_offset(1),
                rows,
                pos0,
            )
            .unwrap();
            let dst = (l.layer_offset(1) + pos0 as usize * row) / 2;
            for (i, pair) in src[src_off..src_off + rows * row].chunks(2).enumerate() {
                let h = |x: f32| half::f16::from_f32(x).to_bits() as u32;
                want[dst + i] = h(pair[0]) | (h(pair[1]) << 16);
            }
        }
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&cache, 0, words)).unwrap();
        let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want);
    }
}
