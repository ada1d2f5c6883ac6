//! Where a context keeps weight matrices: in storage buffers, or in 2-D
//! textures read with `textureLoad`.
//!
//! Kernels read a weight part only through quant.wgsl's `w_word(i)` (word
//! i) and `w_vec4(i)` (16-byte vector i); the bindings behind them are
//! declared where a kernel's source says `{{WEIGHT_WORDS}}` (binding 1) and
//! `{{WEIGHT_VEC4S}}` (binding 4, the vec4 cores), and its spec marks those
//! bindings `Access::Weights`. Pipeline creation fills both in for the
//! context's store, so every kernel over weights runs on either store
//! unchanged.
//!
//! Why textures at all: on Mesa's llvmpipe (lavapipe) a storage-buffer load
//! whose address differs per invocation runs as a loop over the SIMD lanes
//! that puts each word into the vector through the stack, a store-forwarding
//! stall per 4 bytes, whatever the load's width; a texel fetch is a gather
//! without that loop. `wick bench-kernels --load-paths` measures the two on
//! one plain GEMV (docs/kernels.md, "What bounds the GEMV on lavapipe"). Other
//! adapters keep buffers: no GPU was measured to gain from textures, and
//! buffers have no texture-size limits.

use super::error::GpuError;

/// A weight store, chosen once per context (`GpuContext::weight_store`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightStore {
    /// Each part one read-only storage buffer.
    Buffers,
    /// Each part one rgba32uint texture, `TEXTURE_WIDTH` texels wide, the
    /// part's bytes in row-major texel order (16 bytes a texel), zero past
    /// the end.
    Textures,
}

/// Texels in a weight texture's row (a power of two: the shader splits an
/// index with a shift and a mask). 32 KiB a row, so a part rounds up by
/// less than that.
pub const TEXTURE_WIDTH: u32 = 2048;
const TEXTURE_SHIFT: u32 = TEXTURE_WIDTH.trailing_zeros();

/// The environment variable that overrides the adapter's default store
/// natively (`buffers` or `textures`), for side-by-side measurements.
pub const WEIGHT_STORE_ENV: &str = "WICK_WEIGHT_STORE";

const BUFFER_WORDS: &str =
    "@group(0) @binding(1) var<storage, read> w: array<u32>; // part, GPU layout (quant.wgsl)
fn w_word(i: u32) -> u32 {
    return w[i];
}
";

const BUFFER_VEC4S: &str =
    "@group(0) @binding(4) var<storage, read> w4: array<vec4<u32>>; // the same part, as vec4s
fn w_vec4(i: u32) -> vec4<u32> {
    return w4[i];
}
";

impl WeightStore {
    /// The default: textures where the tuning asks for them (llvmpipe, see
    /// the module's doc), natively, and the largest texture holds a full
    /// row; buffers elsewhere.
    pub(crate) fn default_for(textures: bool, max_texture_side: u32) -> WeightStore {
        if textures && !cfg!(target_arch = "wasm32") && max_texture_side >= TEXTURE_WIDTH {
            WeightStore::Textures
        } else {
            WeightStore::Buffers
        }
    }

    /// A store named as `WICK_WEIGHT_STORE` names it.
    pub fn parse(name: &str) -> Result<WeightStore, GpuError> {
        match name {
            "buffers" => Ok(WeightStore::Buffers),
            "textures" => Ok(WeightStore::Textures),
            other => Err(GpuError::Setting(format!(
                "{WEIGHT_STORE_ENV}={other:?}: expected \"buffers\" or \"textures\""
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightStore::Buffers => "buffers",
            WeightStore::Textures => "textures",
        }
    }

    /// Bytes a part of `bytes` bytes occupies: whole words in a buffer,
    /// whole texture rows in a texture.
    pub fn part_bytes(self, bytes: u64) -> u64 {
        match self {
            WeightStore::Buffers => bytes.max(4).next_multiple_of(4),
            WeightStore::Textures => bytes.max(1).next_multiple_of(texture_row_bytes()),
        }
    }

    /// The most bytes one part may take, given the adapter's largest
    /// storage binding and texture side.
    pub fn max_part_bytes(self, max_binding: u64, max_texture_side: u32) -> u64 {
        match self {
            WeightStore::Buffers => max_binding,
            WeightStore::Textures => max_binding.min(texture_row_bytes() * max_texture_side as u64),
        }
    }

    /// `source` with its weight declarations filled in for this store.
    pub(crate) fn declare(self, source: &str) -> String {
        let (words, vec4s) = match self {
            WeightStore::Buffers => (BUFFER_WORDS.to_string(), BUFFER_VEC4S),
            // One texture behind both: binding 4 is in the layout (the
            // bind group binds the part there too) but not declared.
            WeightStore::Textures => (texture_words(), ""),
        };
        source
            .replace("{{WEIGHT_WORDS}}", &words)
            .replace("{{WEIGHT_VEC4S}}", vec4s)
    }
}

/// Bytes of one texture row.
pub fn texture_row_bytes() -> u64 {
    TEXTURE_WIDTH as u64 * 16
}

/// Both readers over the one texture. A word is a component of its texel,
/// picked with selects (a dynamic vector index can cost a trip through
/// memory on a CPU adapter).
fn texture_words() -> String {
    format!(
        "@group(0) @binding(1) var w_tex: texture_2d<u32>; // part, GPU layout (quant.wgsl), {TEXTURE_WIDTH} texels a row
fn w_vec4(i: u32) -> vec4<u32> {{
    return textureLoad(w_tex, vec2<u32>(i & {mask}u, i >> {TEXTURE_SHIFT}u), 0);
}}
fn w_word(i: u32) -> u32 {{
    let v = w_vec4(i >> 2u);
    let j = i & 3u;
    return select(select(v.x, v.y, j == 1u), select(v.z, v.w, j == 3u), j >= 2u);
}}
",
        mask = TEXTURE_WIDTH - 1
    )
}
