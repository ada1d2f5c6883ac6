//! The pipeline: owns all runtime state (KV cache, scratch activations, the
//! logits readback, the position) and drives the model one step at a time.
//! The work lives in the submodules; this file only wires them together.

pub mod decode;
pub mod embed;
pub mod error;
pub mod generate;
pub mod kv_cache;
pub mod logits;
pub mod logprobs;
pub mod prefill;
pub mod prefix;
pub mod reasoning;
pub mod sampling;
pub mod speculative;
pub mod stats;
pub mod step;
pub mod stop_strings;
pub mod stopping;
pub mod tokens;
pub mod warm_up;

use std::sync::Arc;

use crate::gpu::{GpuContext, Recorder};
use crate::model::activations::Activations;
use crate::model::{Decoder, Forward};
pub use error::PipelineError;

pub use crate::kernels::attention::kv::KvDtype;
pub use crate::kernels::norm::rms_q8::ActDtype;
use crate::kernels::norm::rms_q8::Q8_BLOCK;
use crate::kernels::sample::{sample, SampleTarget, SamplerState, MAX_BIAS};
use kv_cache::KvCache;
use logits::LogitsReader;
use prefix::HeldIds;
use step::InferenceStep;
use tokens::TokenRing;

#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// Positions the KV cache holds. Default: the model's training context,
    /// capped at 4096 and at the largest context that fits the adapter (one
    /// storage binding for the cache, and the memory preflight's budget).
    pub ctx_len: Option<usize>,
    /// Most prompt tokens per prefill step (see `DEFAULT_PREFILL_CHUNK`).
    pub prefill_chunk: usize,
    /// Decode steps recorded into one submit when generating: sampled
    /// tokens feed the next step on the GPU, and their ids are read back once
    /// per submit. Tokens sampled past a stop are discarded.
    pub tokens_per_submit: usize,
    /// How the KV cache stores K and V: f16 (the default, as llama.cpp's)
    /// or f32.
    pub kv_dtype: KvDtype,
    /// What decode steps feed the projections after a norm: f32 (the
    /// default) or 8-bit blocks (`ActDtype::Q8`, opt-in).
    pub act_dtype: ActDtype,
    /// Bytes of GPU memory the model may take, checked before the upload
    /// (`preflight`). Default: the device memory the adapter reports, where
    /// it reports any (see `GpuContext::device_memory`).
    pub memory_budget: Option<u64>,
    /// Whether `Engine::load` and `Engine::load_hf` compile every pipeline
    /// a generation can use and run one step before returning (default),
    /// or leave each pipeline to compile when first used (llama.cpp's
    /// `--no-warmup`): a quicker load when few kernels will run, and a
    /// slower first generation. A `ModelLoader` never warms up by itself;
    /// its caller does (`Pipeline::warm_up`).
    pub warm_up: bool,
}

/// Default prompt tokens per prefill step. A step reads every weight once
/// and pays each dispatch once, so larger chunks prefill faster: on lavapipe
/// 64-token chunks prefilled Gemma 3 20-30 % faster than 32-token ones
/// (SmolLM2 and Qwen2.5: from inside the noise to 16 %), 128 no faster than
/// 64 (`wick bench --prefill-chunk`). The page keeps 32 (the web
/// crate's loader): a chunk is one submit there, and a long submit holds
/// the browser's GPU process.
pub const DEFAULT_PREFILL_CHUNK: usize = 64;
/// Most rows of logits one step returns, however long its chunk: the logits
/// buffer and its readback hold this many rows of the vocabulary (8 MiB a
/// row for Gemma 3's 262144 entries). `prefill` asking for more runs the
/// prompt in chunks of this size.
pub const MAX_LOGIT_ROWS: usize = 32;

/// Rows of logits a pipeline with `prefill_chunk`-token steps holds.
pub(crate) fn logit_rows(prefill_chunk: usize) -> usize {
    prefill_chunk.min(MAX_LOGIT_ROWS)
}

/// Tokens one submit samples at most, what the token ring and the
/// sampler's random numbers hold: a submit of decode steps, or a verifying
/// pass's rows (`speculative`).
pub(crate) fn sampled_per_submit(tokens_per_submit: usize) -> usize {
    tokens_per_submit.max(speculative::MAX_DRAFT_TOKENS + 1)
}

/// Default decode steps per submit (docs/kernels.md says why).
pub const DEFAULT_TOKENS_PER_SUBMIT: usize = 4;
/// Most decode steps per submit: the uniform arena holds 8192 dispatch
/// parameter blocks, about 40 steps of a 30-layer model.
pub const MAX_TOKENS_PER_SUBMIT: usize = 32;

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            ctx_len: None,
            prefill_chunk: DEFAULT_PREFILL_CHUNK,
            tokens_per_submit: DEFAULT_TOKENS_PER_SUBMIT,
            kv_dtype: KvDtype::default(),
            act_dtype: ActDtype::default(),
            memory_budget: None,
            warm_up: true,
        }
    }
}

/// Where a step's token ids come from.
#[derive(Clone, Copy)]
enum StepIds<'a> {
    /// Written from the CPU (one such step per submit).
    Host(&'a [u32]),
    /// One token sampled on the GPU, in this slot of the token ring.
    Ring(usize),
}

/// What a step leaves besides its K/V rows.
enum StepOutput {
    /// Logits of its last `n` rows, copied for reading back.
    Logits(usize),
    /// Its last row's token, sampled into a slot of the token ring with
    /// random number `step` of the sampler state.
    Sample { step: usize, slot: usize },
    /// A token sampled after each of its last `n` rows: row j's with random
    /// number j into ring slot `output_slot(j)` (a verifying pass).
    SampleRows(usize),
}

pub struct Pipeline {
    ctx: Arc<GpuContext>,
    model: Decoder,
    kv: KvCache,
    act: Activations,
    logits: LogitsReader,
    tokens: TokenRing,
    /// The GPU sampler's buffers, configured per generation.
    sampler: SamplerState,
    /// Decode steps one submit records when generating.
    tokens_per_submit: usize,
    /// How generations draft tokens (`speculative`).
    speculation: speculative::Speculation,
    /// A smaller model with the same vocabulary on the same device, for
    /// `Speculation::Draft`.
    draft: Option<Box<Pipeline>>,
    /// Rows of the largest verifying pass whose pipelines were created.
    verify_rows_warmed: usize,
    /// Verifying passes run their rows as decode steps would
    /// (`set_exact_passes`).
    exact_passes: bool,
    /// Next free position in the KV cache.
    pos: usize,
    /// The ids whose K/V the cache holds, for prefix reuse.
    held: HeldIds,
}

impl Pipeline {
    pub fn new(
        ctx: Arc<GpuContext>,
        model: Decoder,
        opts: &PipelineOptions,
    ) -> Result<Pipeline, PipelineError> {
        let cfg = &model.config;
        let fits = KvCache::max_ctx_len(&ctx, cfg, opts.kv_dtype);
        let ctx_len = match opts.ctx_len {
            Some(0) => {
                return Err(PipelineError::InvalidOption(
                    "context length must be > 0".into(),
                ))
            }
            Some(n) if n > fits => {
                return Err(PipelineError::InvalidOption(format!(
                    "context length {n} does not fit the adapter (at most {fits} for this model)"
                )))
            }
            Some(n) => n,
            None => cfg.ctx_train.min(fits).min(4096),
        };
        if opts.prefill_chunk == 0 {
            return Err(PipelineError::InvalidOption(
                "prefill chunk must be > 0".into(),
            ));
        }
        if !(1..=MAX_TOKENS_PER_SUBMIT).contains(&opts.tokens_per_submit) {
            return Err(PipelineError::InvalidOption(format!(
                "tokens per submit must be 1..={MAX_TOKENS_PER_SUBMIT}, got {}",
                opts.tokens_per_submit
            )));
        }
        let rows = opts.prefill_chunk;
        let kv = KvCache::new(&ctx, cfg, ctx_len, opts.kv_dtype)?;
        let q8_input = opts.act_dtype == ActDtype::Q8;
        if q8_input && cfg.d_model % Q8_BLOCK != 0 {
            return Err(PipelineError::InvalidOption(format!(
                "8-bit activations need a model width that is a multiple of {Q8_BLOCK}, not {}",
                cfg.d_model
            )));
        }
        // Rows a step may run as decode: an exact verifying pass's.
        let decode_rows = speculative::verify::verify_rows(rows);
        let act = Activations::new(&ctx, cfg, rows, logit_rows(rows), decode_rows, q8_input)?;
        let exact_passes = ctx.tuning.exact_passes;
        let logits = LogitsReader::new(&ctx, cfg.vocab_size, act.max_logit_rows);
        let sampled_per_submit = sampled_per_submit(opts.tokens_per_submit);
        let tokens = TokenRing::new(&ctx, sampled_per_submit)?;
        let sampler = SamplerState::with_capacity(
            &ctx,
            cfg.vocab_size,
            sampled_per_submit,
            ctx_len.max(64),
            MAX_BIAS,
            speculative::verify::verify_rows(rows),
        )?;
        Ok(Pipeline {
            ctx,
            model,
            kv,
            act,
            logits,
            tokens,
            sampler,
            tokens_per_submit: opts.tokens_per_submit,
            speculation: speculative::Speculation::Off,
            draft: None,
            verify_rows_warmed: 0,
            exact_passes,
            pos: 0,
            held: HeldIds::default(),
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
    /// How the KV cache stores K and V.
    pub fn kv_dtype(&self) -> KvDtype {
        self.kv.layout.dtype
    }
    /// What decode steps feed the projections after a norm.
    pub fn act_dtype(&self) -> ActDtype {
        match self.act.q8_input {
            true => ActDtype::Q8,
            false => ActDtype::F32,
        }
    }
    /// Positions already in the KV cache.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Forgets the sequence: the next step starts at position 0, and the
    /// next generation reuses nothing.
    pub fn reset(&mut self) {
        self.pos = 0;
        self.held.clear();
    }
    /// The ids whose K/V the cache holds (positions `0..len`), which the
    /// next generation's prompt may reuse.
    pub fn held_ids(&self) -> &[u32] {
        self.held.as_slice()
    }

    /// Decode steps per submit when generating.
    pub fn tokens_per_submit(&self) -> usize {
        self.tokens_per_submit
    }

    /// How generations started from now on draft tokens.
    pub fn speculation(&self) -> speculative::Speculation {
        self.speculation
    }

    /// Attaches `draft` as the draft model of `Speculation::Draft` (the
    /// engine checks first that the two share a vocabulary: `Engine::set_draft_model`).
    /// Refused where it is on another GPU device.
    pub fn set_draft_model(&mut self, draft: Pipeline) -> Result<(), PipelineError> {
        if !Arc::ptr_eq(&self.ctx, &draft.ctx) {
            return Err(PipelineError::InvalidOption(
                "the draft model must be loaded on the same GPU context as the model".into(),
            ));
        }
        // The draft model drafts greedily, and only drafts: its sampler is
        // set once here, not each pass.
        let mut draft = draft;
        draft.configure_sampler(&sampling::SamplingParams::default(), &[])?;
        self.draft = Some(Box::new(draft));
        Ok(())
    }

    /// The attached draft model, if any.
    pub fn draft_model(&self) -> Option<&Pipeline> {
        self.draft.as_deref()
    }

    /// Sets how generations started from now on draft tokens, preparing
    /// the pipelines a verifying pass uses (unless the load skipped its
    /// warm-up); refused where a pass of that many drafts does not fit one
    /// step.
    pub async fn set_speculation(
        &mut self,
        speculation: speculative::Speculation,
        warm_up: bool,
    ) -> Result<(), PipelineError> {
        speculation
            .check(self.verify_rows())
            .map_err(PipelineError::InvalidOption)?;
        if matches!(speculation, speculative::Speculation::Draft { .. }) && self.draft.is_none() {
            return Err(PipelineError::InvalidOption(
                "speculative decoding with a draft model needs one: load it and attach it first (set_draft_model)".into(),
            ));
        }
        if speculation == self.speculation {
            return Ok(());
        }
        if warm_up && speculation.draft_tokens() > 0 {
            let rows = speculation.draft_tokens() + 1;
            // Once for each larger pass: the smaller ones' shapes are in it.
            if rows > self.verify_rows_warmed {
                self.warm_up_verifying(rows).await?;
                self.verify_rows_warmed = rows;
            }
        }
        self.speculation = speculation;
        Ok(())
    }

    /// Records and submits one step (one encoder, one submit) and returns the
    /// logits of its last `logit_rows` rows.
    async fn run_step(
        &mut self,
        step: InferenceStep,
        ids: &[u32],
        logit_rows: usize,
    ) -> Result<Vec<Vec<f32>>, PipelineError> {
        let rows = step.rows();
        debug_assert!(ids.len() == rows && logit_rows <= rows && step.pos0() == self.pos);
        let ctx = self.ctx.clone();
        let mut rec = Recorder::new(&ctx);
        let output = StepOutput::Logits(logit_rows);
        self.held.forget_from(step.pos0());
        self.record_step(&mut rec, step, StepIds::Host(ids), output)?;
        rec.submit().await?;
        self.held.wrote(step.pos0(), ids);
        self.pos += rows;
        if logit_rows == 0 {
            return Ok(Vec::new());
        }
        Ok(self.logits.read(&ctx, logit_rows).await?)
    }

    /// Records one step into `rec` (the caller submits): embedding, blocks,
    /// then its output. Positions come from `step`, not from `self.pos`, so
    /// several decode steps can go into one submit.
    fn record_step(
        &self,
        rec: &mut Recorder,
        step: InferenceStep,
        ids: StepIds,
        output: StepOutput,
    ) -> Result<(), PipelineError> {
        let rows = step.rows();
        let mut f = Forward {
            rec,
            act: &self.act,
            k_cache: &self.kv.k,
            v_cache: &self.kv.v,
            kv: self.kv.layout,
            rows,
            pos0: step.pos0() as u32,
            as_decode: step.as_decode(),
        };
        match ids {
            StepIds::Host(ids) => embed::record(&self.ctx, &self.model, &mut f, ids)?,
            StepIds::Ring(slot) => self.model.record_embed(&mut f, &self.tokens.buffer, slot)?,
        }
        self.model.record_blocks(&mut f)?;
        match output {
            StepOutput::Logits(0) => {}
            StepOutput::Logits(n) => self.logits.record(&self.model, &mut f, rows - n, n)?,
            StepOutput::Sample { step, slot } => {
                self.model.record_logits(&mut f, rows - 1, 1)?;
                let target = SampleTarget {
                    logits: &self.act.logits,
                    logits_offset: 0,
                    out_ids: &self.tokens.buffer,
                    out_index: slot,
                    step,
                    mask_row: 0,
                };
                sample(f.rec, &self.sampler, &target)?;
            }
            StepOutput::SampleRows(n) => {
                self.model.record_logits(&mut f, rows - n, n)?;
                let vocab = self.model.config.vocab_size;
                for j in 0..n {
                    let target = SampleTarget {
                        logits: &self.act.logits,
                        logits_offset: j * vocab,
                        out_ids: &self.tokens.buffer,
                        out_index: self.tokens.output_slot(j),
                        step: j,
                        // A pass under a grammar uploads a mask a row.
                        mask_row: j,
                    };
                    sample(f.rec, &self.sampler, &target)?;
                }
            }
        }
        Ok(())
    }

    fn check_room(&self, tokens: usize) -> Result<(), PipelineError> {
        if self.pos + tokens > self.ctx_len() {
            return Err(PipelineError::ContextOverflow {
                tokens,
                used: self.pos,
                ctx_len: self.ctx_len(),
            });
        }
        Ok(())
    }
}
