//! The pipeline: owns all runtime state (KV cache, scratch activations, the
//! logits readback, the position) and drives the model one step at a time.
//! The work lives in the submodules; this file only wires them together.

pub mod decode;
pub mod embed;
pub mod generate;
pub mod kv_cache;
pub mod logits;
pub mod prefill;
pub mod sampling;
pub mod stats;
pub mod step;
pub mod stopping;

use std::sync::Arc;

use crate::error::WickError;
use crate::gpu::{GpuContext, Recorder};
use crate::model::decoder::Activations;
use crate::model::{Decoder, Forward};

use kv_cache::KvCache;
use logits::LogitsReader;
use step::InferenceStep;

#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// Positions the KV cache holds. Default: the smaller of the model's
    /// training context and what fits one storage binding of the adapter.
    pub ctx_len: Option<usize>,
    /// Most prompt tokens per prefill step.
    pub prefill_chunk: usize,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            ctx_len: None,
            prefill_chunk: 32,
        }
    }
}

pub struct Pipeline {
    ctx: Arc<GpuContext>,
    model: Decoder,
    kv: KvCache,
    act: Activations,
    logits: LogitsReader,
    /// Next free position in the KV cache.
    pos: usize,
}

impl Pipeline {
    pub fn new(
        ctx: Arc<GpuContext>,
        model: Decoder,
        opts: &PipelineOptions,
    ) -> Result<Pipeline, WickError> {
        let cfg = &model.config;
        let fits = KvCache::max_ctx_len(&ctx, cfg);
        let ctx_len = match opts.ctx_len {
            Some(0) => {
                return Err(WickError::InvalidOption(
                    "context length must be > 0".into(),
                ))
            }
            Some(n) if n > fits => {
                return Err(WickError::InvalidOption(format!(
                    "context length {n} does not fit the adapter (at most {fits} for this model)"
                )))
            }
            Some(n) => n,
            None => cfg.ctx_train.min(fits).min(4096),
        };
        if opts.prefill_chunk == 0 {
            return Err(WickError::InvalidOption("prefill chunk must be > 0".into()));
        }
        let rows = opts.prefill_chunk;
        let kv = KvCache::new(&ctx, cfg, ctx_len)?;
        let act = Activations::new(&ctx, cfg, rows, rows)?;
        let logits = LogitsReader::new(&ctx, cfg.vocab_size, rows);
        Ok(Pipeline {
            ctx,
            model,
            kv,
            act,
            logits,
            pos: 0,
        })
    }

    pub fn model(&self) -> &Decoder {
        &self.model
    }
    pub fn ctx(&self) -> &Arc<GpuContext> {
        &self.ctx
    }
    pub fn ctx_len(&self) -> usize {
        self.kv.layout.ctx_len
    }
    /// Positions already in the KV cache.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Forgets the sequence: the next step starts at position 0.
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// Records and submits one step (one encoder, one submit) and returns the
    /// logits of its last `logit_rows` rows.
    async fn run_step(
        &mut self,
        step: InferenceStep,
        ids: &[u32],
        logit_rows: usize,
    ) -> Result<Vec<Vec<f32>>, WickError> {
        let rows = step.rows();
        debug_assert!(ids.len() == rows && logit_rows <= rows && step.pos0() == self.pos);
        let ctx = self.ctx.clone();
        let mut rec = Recorder::new(&ctx);
        let mut f = Forward {
            rec: &mut rec,
            act: &self.act,
            k_cache: &self.kv.k,
            v_cache: &self.kv.v,
            kv: self.kv.layout,
            rows,
            pos0: step.pos0() as u32,
        };
        embed::record(&ctx, &self.model, &mut f, ids)?;
        self.model.record_blocks(&mut f)?;
        if logit_rows > 0 {
            self.logits
                .record(&self.model, &mut f, rows - logit_rows, logit_rows)?;
        }
        rec.submit().await?;
        self.pos += rows;
        if logit_rows == 0 {
            return Ok(Vec::new());
        }
        Ok(self.logits.read(&ctx, logit_rows).await?)
    }

    fn check_room(&self, tokens: usize) -> Result<(), WickError> {
        if self.pos + tokens > self.ctx_len() {
            return Err(WickError::ContextOverflow {
                tokens,
                used: self.pos,
                ctx_len: self.ctx_len(),
            });
        }
        Ok(())
    }
}
