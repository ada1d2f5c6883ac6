//! No compile on the first token: loading records every step shape a
//! generation will use through a compile-only recorder (each pipeline and
//! bind group is created once, nothing runs), then runs one real step so the
//! GPU has touched every buffer before the first `generate`. Natively the
//! pipelines are created first, on all cores (`gpu::pipeline_batch`).

use super::sampling::SamplingParams;
use super::step::InferenceStep;
use super::{Pipeline, StepIds, StepOutput};
use crate::gpu::pipeline_batch::PendingSet;
use crate::gpu::Recorder;
use crate::kernels::matmul::tiled::GEMV_MAX_TOKENS;
use crate::pipeline::error::PipelineError;

/// Row counts that select every kernel variant a prefill chunk can use: the
/// matrix-vector form (1 row, and up to `GEMV_MAX_TOKENS`) and the prefill
/// form at several widths. Its token tiles a workgroup are a parameter, not
/// a variant, but the x window a CPU adapter's prefill reads through is
/// sized by the rows (`kernels::matmul::linear::window`). Mixtures of
/// experts pick their expert form by rows too (up to 4 rows: indexed).
const ROW_CLASSES: [usize; 5] = [1, 2, 5, 9, 17];

/// Most threads a load creates pipelines on (one a core up to this).
#[cfg(not(target_arch = "wasm32"))]
const MAX_COMPILE_THREADS: usize = 8;

impl Pipeline {
    /// Prepares every kernel a prompt and sampled decoding will record (reading
    /// logits of many rows, for teacher forcing, may still compile its head on
    /// first use), then runs a one-token step and forgets it.
    pub async fn warm_up(&mut self) -> Result<(), PipelineError> {
        let ctx = self.ctx.clone();
        #[cfg(not(target_arch = "wasm32"))]
        {
            // The pipelines first, side by side (gpu::pipeline_batch).
            let pending = self.pending_pipelines()?.into_list();
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            crate::gpu::pipeline_batch::create_all(
                &ctx,
                pending,
                threads.min(MAX_COMPILE_THREADS),
            )?;
        }
        let mut rec = Recorder::compile_only(&ctx);
        self.record_warm_up_steps(&mut rec)?;
        rec.submit().await?;
        self.reset();
        self.configure_sampler(&SamplingParams::default(), &[])?;
        self.prefill_sampled(&[0], 0.0).await?;
        self.reset();
        Ok(())
    }

    /// The pipelines `warm_up` would create that the context lacks.
    pub(crate) fn pending_pipelines(&self) -> Result<PendingSet, PipelineError> {
        let mut collect = Recorder::collect_pipelines(&self.ctx);
        self.record_warm_up_steps(&mut collect)?;
        Ok(collect.into_pending()?)
    }

    /// The name and WGSL of every kernel variant `warm_up` prepares for
    /// this model on its context's adapter, each once: what the engine asks
    /// the adapter to compile (a test validates them all with naga, on
    /// every adapter class).
    pub fn kernel_sources(&self) -> Result<Vec<(String, String)>, PipelineError> {
        let mut collect = Recorder::collect_all_pipelines(&self.ctx);
        self.record_warm_up_steps(&mut collect)?;
        Ok(collect.into_pending()?.into_sources())
    }

    /// Prepares the step shapes a verifying pass of up to `rows` rows
    /// records (`speculative::verify`), so the first pass compiles nothing.
    /// Exact passes of a dense model take the same pipelines for any rows
    /// (the matrix-vector form with its token slices); a mixture of
    /// experts' matmuls, and a pass run as a prefill chunk, take one a
    /// width up to `GEMV_MAX_TOKENS`, then the prefill form's row classes.
    pub async fn warm_up_verifying(&mut self, rows: usize) -> Result<(), PipelineError> {
        let ctx = self.ctx.clone();
        let mut rec = Recorder::compile_only(&ctx);
        let zeros = vec![0u32; rows];
        let gemv = 2..=GEMV_MAX_TOKENS.min(rows);
        let tiled = ROW_CLASSES
            .iter()
            .copied()
            .filter(|&r| r > GEMV_MAX_TOKENS && r < rows);
        let mut sizes: Vec<usize> = gemv.chain(tiled).chain([rows]).collect();
        if self.model.config.moe.is_none() && self.exact_passes() {
            sizes = vec![rows];
        }
        sizes.dedup();
        for r in sizes.into_iter().filter(|&r| r >= 2) {
            let step = self.verify_step(0, r);
            self.record_step(
                &mut rec,
                step,
                StepIds::Host(&zeros[..r]),
                StepOutput::SampleRows(r),
            )?;
        }
        rec.submit().await?;
        Ok(())
    }

    /// Every step shape `warm_up` prepares, recorded into `rec`.
    fn record_warm_up_steps(&self, rec: &mut Recorder) -> Result<(), PipelineError> {
        // A step longer than the context would not fit the KV cache.
        let chunk = self.act.max_rows.min(self.ctx_len());
        let zeros = vec![0u32; chunk];
        let sizes = ROW_CLASSES.iter().copied().filter(|&r| r < chunk);
        for rows in sizes.chain([chunk]) {
            let step = InferenceStep::Prefill { pos0: 0, rows };
            let sample = StepOutput::Sample { step: 0, slot: 0 };
            self.record_step(rec, step, StepIds::Host(&zeros[..rows]), sample)?;
        }
        self.record_decode_step(rec)
    }

    /// Records one sampled decode step into `rec` (tests count what the
    /// recording allocates through a compile-only recorder).
    pub fn record_decode_step(&self, rec: &mut Recorder) -> Result<(), PipelineError> {
        let decode = InferenceStep::Decode { pos: 0 };
        let sample = StepOutput::Sample { step: 0, slot: 1 };
        self.record_step(rec, decode, StepIds::Ring(0), sample)
    }
}
