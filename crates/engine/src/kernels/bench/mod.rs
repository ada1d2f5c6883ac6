//! Bandwidth benchmarks: how close the GEMV comes to the memory system's
//! speed. A decode step is memory bound, so GB/s of weights read by the GEMV
//! against GB/s of a plain buffer copy (the best a kernel can hope for) says
//! how much of a step's time the kernels leave on the table. A prompt's
//! matmuls (many token rows, the prefill form) are timed the same way and
//! judged by multiply-adds per second (`matmul_throughput`).
//!
//! Timing is wall clock around many dispatches recorded into a few submits,
//! after a warm-up that compiles the pipelines and faults in the buffers;
//! batches grow until they last long enough that submit latency is noise.
//! Native only: the browser has no blocking wait.

pub mod load_probe;

use std::time::Instant;

use crate::format::quant::{quantize, GgmlType};
use crate::gpu::{GpuBuffer, GpuContext, GpuError, Recorder};
use crate::kernels::matmul::linear::{linear, linear_as, Epilogue, Forced, Linear, LinearScratch};
use crate::kernels::matmul::tiled::{matmul, matmul_form, Form, VecShape};
use crate::kernels::norm::rms_q8::{quantize_row_q8, Q8Rows};
use crate::kernels::weights::QuantMatrix;

/// Weights rotate over copies adding up to at least this many bytes, so that
/// repeated GEMVs stream memory instead of re-reading a cached matrix (GPU
/// L2 caches reach 50-100 MB).
const ROTATION_BYTES: usize = 192 << 20;
/// Timed batches per measurement; the fastest counts (both for GEMVs and
/// copies, so their ratio compares like with like).
const BATCHES: usize = 4;
/// Shortest timed batch: a batch grows until it lasts this long, so that a
/// fast GPU's submit-and-wait latency (around a millisecond) is not counted
/// as the kernels' time. On a software adapter the first batch already does.
const MIN_BATCH_SECONDS: f64 = 0.025;
/// Most items one timed batch grows to.
const MAX_BATCH: usize = 1 << 14;
/// Dispatches per submit: well under the uniform arena's 8192 slots.
const PER_SUBMIT: usize = 256;

/// One GEMV (or many-token matmul) benchmark's result.
#[derive(Clone, Debug)]
pub struct GemvBench {
    pub dtype: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// Token rows of x per matmul: 1 for a GEMV (decode), more for the
    /// prefill form (`matmul_throughput`).
    pub tokens: usize,
    /// Stored bytes of one weight matrix: what one GEMV must read.
    pub weight_bytes: usize,
    /// Wall-clock seconds per GEMV or matmul (all its token rows).
    pub seconds: f64,
    /// Weight bytes read per second, in GB/s (10^9), counting each matrix
    /// once per matmul.
    pub gbps: f64,
}

impl GemvBench {
    /// Multiply-adds per second, in 10^9: what the prefill form is judged by.
    pub fn gmacs(&self) -> f64 {
        (self.rows * self.cols * self.tokens) as f64 / self.seconds / 1e9
    }
}

/// Deterministic values in [-1, 1) without a rand dependency (a 64-bit LCG):
/// any spread of values does, the kernel's work does not depend on them.
pub(crate) fn pseudo_random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Times at least `iters` single-token GEMVs `y = W x` with a `rows x cols` matrix of
/// `dtype` (cols a whole number of blocks), in the form `matmul` picks.
/// 2048 x 2048 takes seconds on lavapipe.
pub async fn gemv_bandwidth(
    ctx: &GpuContext,
    dtype: GgmlType,
    rows: usize,
    cols: usize,
    iters: usize,
) -> Result<GemvBench, GpuError> {
    gemv_bandwidth_in(ctx, dtype, rows, cols, iters, Input::Matmul(None), 1).await
}

/// Times at least `iters` matmuls of `tokens` token rows through a `rows x cols`
/// matrix of `dtype`: for more than one row the fused linear layer's
/// prefill form (`linear`, storing its output), for one `matmul`'s GEMV:
/// how fast a prompt's projections run.
pub async fn matmul_throughput(
    ctx: &GpuContext,
    dtype: GgmlType,
    (rows, cols): (usize, usize),
    tokens: usize,
    iters: usize,
) -> Result<GemvBench, GpuError> {
    if tokens == 0 {
        let message = "a matmul of 0 token rows".to_string();
        return Err(crate::gpu::error::shape_err("matmul_throughput", message));
    }
    gemv_bandwidth_in(ctx, dtype, rows, cols, iters, Input::Matmul(None), tokens).await
}

/// As `gemv_bandwidth`, through the fused linear layer with x in 8-bit
/// blocks (`Q8Rows`): a decode projection's path where activations are
/// q8 (`ActDtype`), its 8-bit x in integer dot products if `dot4` (an
/// error where not `linear::q8_dot4_fits`). `cols` a multiple of 32.
pub async fn gemv_bandwidth_q8(
    ctx: &GpuContext,
    dtype: GgmlType,
    rows: usize,
    cols: usize,
    iters: usize,
    dot4: bool,
) -> Result<GemvBench, GpuError> {
    gemv_bandwidth_in(ctx, dtype, rows, cols, iters, Input::Q8 { dot4 }, 1).await
}

/// What x a verifying pass's projection reads (`pass_throughput`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassX {
    /// f32 rows (the output and down projections, and every projection on
    /// adapters without 8-bit activations).
    F32,
    /// Rows in 8-bit blocks, in integer dot products or not (the normed
    /// projections with `--activations q8`).
    Q8 { dot4: bool },
}

/// Times at least `iters` matmuls of `tokens` (1..=8) token rows through a
/// `rows x cols` matrix of `dtype` in the form a verifying pass runs its
/// projections: the fused linear layer's matrix-vector form, each row
/// summed as a decode step sums it (`Linear::as_decode`). Side by side with
/// `matmul_throughput`, what a pass pays for being exact.
pub async fn pass_throughput(
    ctx: &GpuContext,
    dtype: GgmlType,
    (rows, cols): (usize, usize),
    tokens: usize,
    iters: usize,
    x: PassX,
) -> Result<GemvBench, GpuError> {
    let input = match x {
        PassX::F32 => Input::AsDecode,
        PassX::Q8 { dot4 } => Input::Q8 { dot4 },
    };
    gemv_bandwidth_in(ctx, dtype, rows, cols, iters, input, tokens).await
}

/// How the timed GEMVs get x.
#[derive(Clone, Copy)]
enum Input {
    /// f32 x through `matmul`, in the form it picks or this one (one token
    /// row), or through the fused linear layer's prefill form (more).
    Matmul(Option<Form>),
    /// f32 x through `linear`'s matrix-vector form, each row as decode.
    AsDecode,
    /// 8-bit x through `linear`'s matrix-vector form (each row as decode),
    /// in integer dot products or not (`linear::q8_dot4`).
    Q8 { dot4: bool },
}

/// As `gemv_bandwidth`, on the vec4 matrix-vector core in `shape`: what
/// `bench-kernels --sweep` compares to choose the defaults per adapter class.
pub async fn gemv_bandwidth_vec(
    ctx: &GpuContext,
    dtype: GgmlType,
    rows: usize,
    cols: usize,
    iters: usize,
    shape: VecShape,
) -> Result<GemvBench, GpuError> {
    let form = Form::Vec(shape);
    gemv_bandwidth_in(ctx, dtype, rows, cols, iters, Input::Matmul(Some(form)), 1).await
}

async fn gemv_bandwidth_in(
    ctx: &GpuContext,
    dtype: GgmlType,
    rows: usize,
    cols: usize,
    iters: usize,
    input: Input,
    tokens: usize,
) -> Result<GemvBench, GpuError> {
    let bad = |message: String| crate::gpu::error::shape_err("gemv_bandwidth", message);
    let bytes = quantize(dtype, &pseudo_random(rows * cols, 1)).map_err(|e| bad(e.to_string()))?;
    let copies = ROTATION_BYTES.div_ceil(bytes.len().max(1)).clamp(1, 64);
    let mats = (0..copies)
        .map(|i| QuantMatrix::upload(ctx, &format!("bench w{i}"), dtype, rows, cols, &bytes))
        .collect::<Result<Vec<_>, _>>()?;
    let x_values = pseudo_random(tokens * cols, 2);
    let x = ctx.upload_f32("bench x", &x_values)?;
    // The 8-bit x of the GEMVs that take it: every token row's blocks.
    let (q, scales) = quantize_row_q8(&x_values);
    let words: Vec<u32> = q
        .chunks(4)
        .map(|b| b.iter().rev().fold(0u32, |w, &v| w << 8 | v as u8 as u32))
        .collect();
    let pairs: Vec<f32> = scales.iter().flat_map(|&(d, s)| [d, s]).collect();
    let x8 = (
        ctx.upload_u32("bench x q8", &words)?,
        ctx.upload_f32("bench x q8 scales", &pairs)?,
    );
    let x8 = Q8Rows {
        quants: &x8.0,
        scales: &x8.1,
    };
    let y = ctx.create_storage("bench y", (tokens * rows) as u64 * 4)?;
    // x's rows in ranges of columns, as a model's scratch offers them.
    let ranges = ctx.create_storage("bench x ranges", (tokens * cols) as u64 * 4)?;
    let gemvs = Gemvs {
        ctx,
        mats: &mats,
        x: &x,
        x8,
        y: &y,
        ranges: &ranges,
        input,
        tokens,
    };
    // Warm-up: compiles the pipeline and touches every copy.
    gemvs.run(copies.max(4)).await?;
    let seconds = seconds_each(iters.div_ceil(BATCHES), async |n| gemvs.run(n).await).await?;
    Ok(GemvBench {
        dtype,
        rows,
        cols,
        tokens,
        weight_bytes: bytes.len(),
        seconds,
        gbps: bytes.len() as f64 / seconds / 1e9,
    })
}

/// The timed GEMVs' operands.
struct Gemvs<'a> {
    ctx: &'a GpuContext,
    mats: &'a [QuantMatrix],
    x: &'a GpuBuffer,
    x8: Q8Rows<'a>,
    y: &'a GpuBuffer,
    ranges: &'a GpuBuffer,
    input: Input,
    /// Token rows of x per matmul (1 but for `matmul_throughput`).
    tokens: usize,
}

impl Gemvs<'_> {
    /// Records `n` GEMVs over the rotating copies, a few hundred per
    /// submit, and waits for them.
    async fn run(&self, n: usize) -> Result<(), GpuError> {
        let mut done = 0;
        while done < n {
            let end = (done + PER_SUBMIT).min(n);
            let mut rec = Recorder::new(self.ctx);
            for i in done..end {
                self.record(&mut rec, &self.mats[i % self.mats.len()])?;
            }
            rec.submit().await?;
            done = end;
        }
        self.ctx.wait_idle();
        Ok(())
    }

    /// `m` rows of x (and its 8-bit blocks, if given) through `w` into y,
    /// stored plainly; `as_decode` picks the matrix-vector form for several.
    fn stored<'b>(
        &'b self,
        w: &'b QuantMatrix,
        x_q8: Option<Q8Rows<'b>>,
        m: usize,
        as_decode: bool,
    ) -> Linear<'b> {
        Linear {
            x: self.x,
            x_q8,
            x_offset: 0,
            norm: None,
            w,
            bias: None,
            out: self.y,
            out_offset: 0,
            out_stride: w.rows,
            epilogue: Epilogue::Store,
            m,
            as_decode,
        }
    }

    fn record(&self, rec: &mut Recorder, w: &QuantMatrix) -> Result<(), GpuError> {
        let (x, y) = (self.x, self.y);
        match self.input {
            Input::Matmul(Some(f)) => matmul_form(rec, f, x, 0, w, y, 0, 1),
            Input::Matmul(None) if self.tokens == 1 => matmul(rec, x, 0, w, y, 0, 1),
            // A prompt chunk: the fused linear layer's prefill form, as a
            // model's projections run it (without a norm it needs no scratch).
            Input::Matmul(None) => {
                let op = self.stored(w, None, self.tokens, false);
                let scratch = LinearScratch {
                    normed: y,
                    ranges: Some(self.ranges),
                };
                linear(rec, &op, &scratch)
            }
            Input::AsDecode => {
                let op = self.stored(w, None, self.tokens, true);
                // The matrix-vector form needs no scratch.
                let scratch = LinearScratch {
                    normed: y,
                    ranges: None,
                };
                linear(rec, &op, &scratch)
            }
            Input::Q8 { dot4 } => {
                let op = self.stored(w, Some(self.x8), self.tokens, true);
                // The matrix-vector form needs no scratch.
                let scratch = LinearScratch {
                    normed: y,
                    ranges: None,
                };
                let forced = Forced {
                    dot4: Some(dot4),
                    ..Forced::default()
                };
                linear_as(rec, &op, &scratch, forced)
            }
        }
    }
}

/// GB/s (10^9 bytes read per second) of at least `iters` buffer-to-buffer copies of
/// `bytes` bytes (rounded up to 4, capped at one binding: 128 MiB on
/// lavapipe). Give it well over the GPU's last-level cache (e.g. 128 MiB) to
/// measure memory rather than cache.
pub async fn copy_bandwidth(ctx: &GpuContext, bytes: u64, iters: usize) -> Result<f64, GpuError> {
    let bytes = bytes
        .max(4)
        .next_multiple_of(4)
        .min(ctx.max_binding_bytes() / 4 * 4);
    let src = ctx.create_storage("bench copy src", bytes)?;
    let dst = ctx.create_storage("bench copy dst", bytes)?;
    // create_storage makes buffers, never textures.
    let (src, dst) = (src.raw().expect("a buffer"), dst.raw().expect("a buffer"));
    let run = |n: usize| {
        let mut rec = Recorder::new(ctx);
        for _ in 0..n {
            rec.copy_buffer(src, 0, dst, 0, bytes);
        }
        rec.submit()
    };
    run(2).await?;
    ctx.wait_idle();
    let seconds = seconds_each(iters.div_ceil(BATCHES), async |n| {
        run(n).await?;
        ctx.wait_idle();
        Ok(())
    })
    .await?;
    Ok(bytes as f64 / seconds / 1e9)
}

/// Seconds per item of `run(n)` (which runs `n` items and waits for them):
/// the fastest of `BATCHES` timed batches, since on a shared machine the
/// slow ones measure the neighbours. A batch has at least `min_items`; one
/// shorter than `MIN_BATCH_SECONDS` does not count, and the next is twice
/// as large.
pub(crate) async fn seconds_each(
    min_items: usize,
    mut run: impl AsyncFnMut(usize) -> Result<(), GpuError>,
) -> Result<f64, GpuError> {
    let mut batch = min_items.max(1);
    let (mut seconds, mut timed) = (f64::INFINITY, 0);
    while timed < BATCHES {
        let start = Instant::now();
        run(batch).await?;
        let elapsed = start.elapsed().as_secs_f64();
        if elapsed < MIN_BATCH_SECONDS && batch < MAX_BATCH {
            batch = (batch * 2).min(MAX_BATCH);
            continue;
        }
        seconds = seconds.min(elapsed / batch as f64);
        timed += 1;
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::matmul::tiled::Reduce;
    use crate::testutil::ctx;

    /// A batch too short to time well is not counted and the next doubles;
    /// then the fastest of `BATCHES` batches of that size counts.
    #[test]
    fn short_batches_grow_until_they_can_be_timed() {
        let mut sizes = Vec::new();
        // Batches under 32 items take 1-8 ms, far under MIN_BATCH_SECONDS
        // (a loaded machine's late wake-up cannot lift them past it); from
        // 32 items, 4 ms an item, far over it.
        let per_item = pollster::block_on(seconds_each(2, async |n| {
            sizes.push(n);
            let ms = if n < 32 { n as u64 / 2 } else { 4 * n as u64 };
            std::thread::sleep(std::time::Duration::from_millis(ms));
            Ok(())
        }))
        .unwrap();
        assert_eq!(sizes, [2, 4, 8, 16, 32, 32, 32, 32], "{sizes:?}");
        // The fastest of four batches: late wake-ups only lengthen them.
        assert!((4e-3..8e-3).contains(&per_item), "{per_item}");
    }

    #[test]
    fn benchmarks_report_sane_numbers() {
        let ctx = ctx();
        let b = pollster::block_on(gemv_bandwidth(ctx, GgmlType::Q8_0, 256, 512, 8)).unwrap();
        assert_eq!(b.weight_bytes, 256 * 512 / 32 * 34);
        assert!(
            b.seconds > 0.0 && b.gbps.is_finite() && b.gbps > 0.0,
            "{b:?}"
        );
        let c = pollster::block_on(copy_bandwidth(ctx, 1 << 20, 4)).unwrap();
        assert!(c.is_finite() && c > 0.0, "{c}");
        let shape = VecShape {
            lanes: 8,
            group_rows: 4,
            chunked: true,
            reduce: Reduce::Serial,
            workgroup: 64,
        };
        let v =
            pollster::block_on(gemv_bandwidth_vec(ctx, GgmlType::Q4_K, 8, 512, 2, shape)).unwrap();
        assert!(v.gbps.is_finite() && v.gbps > 0.0, "{v:?}");
        for dot4 in [false, true] {
            let q = pollster::block_on(gemv_bandwidth_q8(ctx, GgmlType::Q4_1, 16, 576, 2, dot4));
            if dot4 && !crate::kernels::matmul::linear::q8_dot4_fits(&ctx.features, GgmlType::Q4_1)
            {
                let err = q.unwrap_err();
                assert!(err.to_string().contains("integer dot products"), "{err}");
                continue;
            }
            let q = q.unwrap();
            assert!(q.gbps.is_finite() && q.gbps > 0.0, "{q:?}");
        }
        let err = pollster::block_on(gemv_bandwidth_vec(ctx, GgmlType::F16, 8, 40, 2, shape))
            .unwrap_err();
        assert!(err.to_string().contains("vec4 core"), "{err}");
        let t = pollster::block_on(matmul_throughput(ctx, GgmlType::Q5_0, (40, 96), 9, 2)).unwrap();
        assert_eq!((t.tokens, t.weight_bytes), (9, 40 * 3 * 22), "{t:?}");
        assert!(t.gmacs().is_finite() && t.gmacs() > 0.0, "{t:?}");
        let err =
            pollster::block_on(matmul_throughput(ctx, GgmlType::Q5_0, (40, 96), 0, 2)).unwrap_err();
        assert!(err.to_string().contains("0 token rows"), "{err}");
    }
}
