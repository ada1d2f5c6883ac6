//! Shared helpers for the engine's unit tests: one GPU context per test
//! process, seeded random data, and closeness checks that say where they fail.

use std::sync::OnceLock;

use rand::{Rng, SeedableRng};

use crate::gpu::{GpuContext, WeightStore};

/// The test process's GPU context. Tests that need a GPU fail, loudly, when
/// none is found: CI always has lavapipe, so a missing adapter is a setup bug.
pub fn ctx() -> &'static GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| {
        // These tests compile hundreds of kernel variants to run each once
        // on a small shape, so on lavapipe (llvmpipe's LLVM) compiling is
        // most of their time when the shader cache is cold, as on a fresh
        // CI machine. Skipping LLVM's optimization passes compiles faster
        // and still runs the same WGSL; a caller's own setting is kept.
        if std::env::var_os("GALLIVM_PERF").is_none() {
            std::env::set_var("GALLIVM_PERF", "nopt");
        }
        new_ctx()
    })
}

/// A context of the test process keeping weights in `store`, whatever the
/// adapter's default (`ctx()` keeps that): tests run both stores with it.
pub fn ctx_with_store(store: WeightStore) -> &'static GpuContext {
    static BUFFERS: OnceLock<GpuContext> = OnceLock::new();
    static TEXTURES: OnceLock<GpuContext> = OnceLock::new();
    let ctx = ctx();
    if ctx.weight_store == store {
        return ctx;
    }
    let cell = match store {
        WeightStore::Buffers => &BUFFERS,
        WeightStore::Textures => &TEXTURES,
    };
    cell.get_or_init(|| new_ctx_with(Some(store)))
}

fn new_ctx() -> GpuContext {
    new_ctx_with(None)
}

fn new_ctx_with(store: Option<WeightStore>) -> GpuContext {
    match pollster::block_on(GpuContext::with_weight_store(store)) {
        Ok(ctx) => ctx,
        Err(e) => panic!(
            "GPU tests need an adapter: {e}. Install mesa-vulkan-drivers and set WGPU_BACKEND=vulkan"
        ),
    }
}

/// Uniform values in [-1, 1) from a fixed seed.
pub fn random_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

/// Fails naming the first index where |got - want| > tol * max(1, |want|).
pub fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= tol * w.abs().max(1.0) && g.is_finite() == w.is_finite(),
            "{what}: index {i}: got {g}, want {w} (|err| {err}, tol {tol})"
        );
    }
}

/// Checks GPU dot products of length k (matmul rows) against an f64
/// reference, given each result's scale `sum |x w|`.
///
/// The GPU sums k products in f32 in an order unlike the reference's, and
/// decodes each weight with a rounding or two (the CPU decoder may round
/// differently, e.g. Q4_K's d*sc*q - dmin*m). Summation errors behave like a
/// random walk: about sqrt(k) * eps * sum|x w|. The largest seen over the
/// matmul tests' cases is 0.31 of that; 4x leaves 13x margin, while one wrong
/// weight (an error near sum|x w| / k) is 100x over the tolerance even at
/// k = 768.
pub fn assert_dot_close(got: &[f32], want: &[f32], scale: &[f64], k: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let tol = 4.0 * (k as f64).sqrt() * f32::EPSILON as f64;
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let err = (g as f64 - w as f64).abs();
        assert!(
            err <= tol * s + 1e-30,
            "{what}: index {i}: got {g}, want {w} (|err| {err:e}, allowed {:e})",
            tol * s
        );
    }
}

/// RMSNorm of `rows` rows of `dim` in f64, each rounded to f32 as the GPU
/// stores it: `x * w / sqrt(mean(x^2) + eps)`.
pub fn reference_rms_norm(x: &[f32], w: &[f32], rows: usize, dim: usize, eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * dim);
    for row in x.chunks(dim).take(rows) {
        let mean_sq = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / dim as f64;
        let scale = 1.0 / (mean_sq + eps as f64).sqrt();
        out.extend(
            row.iter()
                .zip(w)
                .map(|(&v, &w)| (v as f64 * scale * w as f64) as f32),
        );
    }
    out
}

/// `out[t][n] = sum_k x[t][k] * w[n][k]` in f64, and the scale of each
/// result, `sum_k |x[t][k] * w[n][k]|`, that bounds its rounding error.
pub fn reference_matmul(
    x: &[f32],
    w: &[f32],
    m: usize,
    n: usize,
    k: usize,
) -> (Vec<f32>, Vec<f64>) {
    let mut out = Vec::with_capacity(m * n);
    let mut scale = Vec::with_capacity(m * n);
    for t in 0..m {
        for r in 0..n {
            let (mut s, mut a) = (0.0f64, 0.0f64);
            for i in 0..k {
                let p = x[t * k + i] as f64 * w[r * k + i] as f64;
                s += p;
                a += p.abs();
            }
            out.push(s as f32);
            scale.push(a);
        }
    }
    (out, scale)
}

/// Fails unless `err` is a shape error raised by `kernel`.
pub fn assert_shape_err(err: &crate::gpu::GpuError, kernel: &str) {
    assert!(
        matches!(err, crate::gpu::GpuError::Shape { kernel: k, .. } if *k == kernel),
        "{err}"
    );
}

/// Every reduction of the vec4 matrix-vector core this adapter runs:
/// subgroups where it has them (lavapipe does, 8 lanes a subgroup, so rows
/// of 16 to 64 lanes span several subgroups there).
pub fn vec_reductions() -> Vec<crate::kernels::matmul::tiled::Reduce> {
    use crate::kernels::matmul::tiled::Reduce;
    let mut all = vec![Reduce::Serial, Reduce::Tree];
    if ctx().features.subgroups {
        all.push(Reduce::Subgroup);
    }
    all
}
