//! `Engine`: a loaded model ready to generate — the GGUF header, the
//! tokenizer built from it, and a pipeline over the uploaded weights. This is
//! what the CLI and the browser bindings hold.
//!
//! `ModelLoader` builds one from a file's bytes fed in order, in chunks of any
//! size: the header is parsed as soon as it is complete, the architecture's
//! tensors are checked before any upload, and each tensor goes to the GPU as
//! soon as its bytes are in. A `fetch()` body or a `File` stream is therefore
//! never held whole in memory.

use std::sync::Arc;

use crate::error::WickError;
use crate::format::gguf::{GgufError, GgufFile, TensorInfo};
use crate::gpu::GpuContext;
use crate::model::loader::{check_needs, Need};
use crate::model::{LoadProgress, ModelError, Plan, TensorStore};
use crate::pipeline::{Pipeline, PipelineOptions};
use crate::preflight;
use crate::tokenizer::Tokenizer;

pub struct Engine {
    pub gguf: GgufFile,
    pub tokenizer: Tokenizer,
    pub pipeline: Pipeline,
}

impl Engine {
    /// Loads a model from the bytes of a whole GGUF file.
    pub async fn load(
        ctx: Arc<GpuContext>,
        bytes: &[u8],
        opts: &PipelineOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Engine, WickError> {
        let mut loader = ModelLoader::new(ctx, opts.clone());
        loader.push_with_progress(bytes, progress)?;
        let mut engine = loader.finish()?;
        if opts.warm_up {
            engine.pipeline.warm_up().await?;
        }
        Ok(engine)
    }

    /// Releases the model's GPU memory: every buffer (weights, KV cache,
    /// activations, staging) and every cached bind group that binds one
    /// (dropping the engine does the same). Natively it then waits for the
    /// device, so wgpu has freed them too when it returns. Compiled
    /// pipelines stay cached on the context for the next model.
    pub fn dispose(self) {
        let ctx = self.pipeline.ctx().clone();
        drop(self);
        ctx.wait_idle();
    }

    /// Prompt text to ids the way llama.cpp does for a raw prompt: BOS where
    /// the model asks for it, special-token text not parsed.
    pub fn tokenize_prompt(&self, text: &str) -> Result<Vec<u32>, WickError> {
        Ok(self.tokenizer.encode(text, true, false)?)
    }
}

/// Everything known once the header is parsed.
struct Loading {
    gguf: GgufFile,
    tokenizer: Tokenizer,
    plan: Plan,
    /// Needed tensors in file order, with their absolute byte ranges.
    queue: Vec<(TensorInfo, Need, std::ops::Range<u64>)>,
    next: usize,
    /// Bytes of `queue[next]` received so far, when it spans chunks.
    pending: Vec<u8>,
    store: TensorStore,
    total: u64,
}

pub struct ModelLoader {
    ctx: Arc<GpuContext>,
    opts: PipelineOptions,
    /// File offset of the next byte to arrive.
    received: u64,
    /// The start of the file, kept only until the header parses.
    header: Vec<u8>,
    /// The tokenizer, when it comes from elsewhere than the GGUF metadata
    /// (a Hugging Face `tokenizer.json`).
    tokenizer: Option<Tokenizer>,
    loading: Option<Loading>,
}

impl ModelLoader {
    pub fn new(ctx: Arc<GpuContext>, opts: PipelineOptions) -> ModelLoader {
        ModelLoader {
            ctx,
            opts,
            received: 0,
            header: Vec::new(),
            tokenizer: None,
            loading: None,
        }
    }

    /// A loader for a file whose tokenizer is given rather than read from its
    /// metadata (a Hugging Face checkpoint streamed as GGUF, `model::hf`).
    pub fn with_tokenizer(
        ctx: Arc<GpuContext>,
        opts: PipelineOptions,
        tokenizer: Tokenizer,
    ) -> ModelLoader {
        ModelLoader {
            tokenizer: Some(tokenizer),
            ..ModelLoader::new(ctx, opts)
        }
    }

    pub fn progress(&self) -> LoadProgress {
        LoadProgress {
            loaded: self.received,
            total: self.loading.as_ref().map_or(0, |l| l.total),
        }
    }

    /// Feeds the next bytes of the file.
    pub fn push(&mut self, chunk: &[u8]) -> Result<LoadProgress, WickError> {
        self.push_with_progress(chunk, &mut |_| {})
    }

    /// Feeds the next bytes, reporting progress after each uploaded tensor.
    pub fn push_with_progress(
        &mut self,
        chunk: &[u8],
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<LoadProgress, WickError> {
        let offset = self.received;
        self.received += chunk.len() as u64;
        if self.loading.is_some() {
            self.consume(offset, chunk, progress)?;
            return Ok(self.progress());
        }
        // Parse straight from the chunk when it is the whole start of the
        // file (the native case), so a mapped file is never copied.
        let parsed = if self.header.is_empty() {
            GgufFile::parse_header(chunk)
        } else {
            self.header.extend_from_slice(chunk);
            GgufFile::parse_header(&self.header)
        };
        match parsed {
            Ok(gguf) => {
                self.start(gguf)?;
                if self.header.is_empty() {
                    self.consume(0, chunk, progress)?;
                } else {
                    let start = std::mem::take(&mut self.header);
                    self.consume(0, &start, progress)?;
                }
            }
            Err(GgufError::NeedMoreHeader { .. }) => {
                if self.header.is_empty() {
                    self.header.extend_from_slice(chunk);
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(self.progress())
    }

    fn start(&mut self, gguf: GgufFile) -> Result<(), WickError> {
        let plan = Plan::for_file(&gguf)?;
        let tokenizer = match self.tokenizer.take() {
            // A Hugging Face folder's tokenizer: embeddings padded past its
            // tokens are normal there (Qwen2.5: 151,936 rows, 151,665 tokens).
            Some(t) => t,
            None => {
                check_vocabulary(&gguf, plan.config.vocab_size)?;
                Tokenizer::from_gguf(&gguf)?
            }
        };
        let queue: Vec<_> = check_needs(&gguf, &plan.needs)?
            .into_iter()
            .map(|(info, need)| (info.clone(), need, gguf.tensor_range(info)))
            .collect();
        let total = gguf
            .tensors
            .iter()
            .map(|t| gguf.tensor_range(t).end)
            .max()
            .unwrap_or(gguf.data_offset);
        // Before the first upload: refused here, with the numbers, rather
        // than part way through the upload.
        let typed: Vec<_> = queue
            .iter()
            .map(|(info, need, _)| (info.dtype, need))
            .collect();
        let fit = preflight::check(&self.ctx, &plan, &typed, &self.opts)?;
        self.opts.ctx_len = Some(fit.ctx_len);
        let store = TensorStore::new(plan.fusions.clone());
        self.loading = Some(Loading {
            gguf,
            tokenizer,
            plan,
            queue,
            next: 0,
            pending: Vec::new(),
            store,
            total,
        });
        Ok(())
    }

    /// Takes bytes `offset..offset + bytes.len()` of the file: uploads every
    /// needed tensor they complete, keeps the start of one they do not.
    fn consume(
        &mut self,
        offset: u64,
        bytes: &[u8],
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<(), WickError> {
        let end = offset + bytes.len() as u64;
        let l = self.loading.as_mut().expect("header parsed");
        while let Some((info, need, range)) = l.queue.get(l.next) {
            if range.start >= end {
                break;
            }
            let have = range.start + l.pending.len() as u64;
            let from = have.max(offset);
            let to = range.end.min(end);
            let part = &bytes[(from - offset) as usize..(to - offset) as usize];
            if l.pending.is_empty() && to - from == range.end - range.start {
                l.store.upload(&self.ctx, info, need, part)?;
            } else {
                l.pending.extend_from_slice(part);
                if (l.pending.len() as u64) < range.end - range.start {
                    break;
                }
                l.store.upload(&self.ctx, info, need, &l.pending)?;
                l.pending = Vec::new();
            }
            l.next += 1;
            progress(LoadProgress {
                loaded: to,
                total: l.total,
            });
        }
        Ok(())
    }

    /// Builds the engine once every needed tensor is in.
    pub fn finish(self) -> Result<Engine, WickError> {
        let Some(mut l) = self.loading else {
            return Err(ModelError::Truncated(format!(
                "the file ended after {} bytes, inside its header",
                self.received
            ))
            .into());
        };
        if let Some((info, _, range)) = l.queue.get(l.next) {
            return Err(ModelError::Truncated(format!(
                "the file ended after {} bytes; tensor '{}' needs bytes up to {}",
                self.received, info.name, range.end
            ))
            .into());
        }
        let model = l.plan.build(&mut l.store)?;
        let pipeline = Pipeline::new(self.ctx, model, &self.opts)?;
        Ok(Engine {
            gguf: l.gguf,
            tokenizer: l.tokenizer,
            pipeline,
        })
    }
}

/// A GGUF's vocabulary (`tokenizer.ggml.tokens`) and embedding rows must
/// agree, as llama.cpp requires: a token past the embedding has no row, an
/// embedding row past the vocabulary is an id no text can give. (The
/// output matrix's rows are checked against the embedding's with the
/// tensors.) A file without the tokens is left to the tokenizer's own error.
fn check_vocabulary(gguf: &GgufFile, embedding_rows: usize) -> Result<(), ModelError> {
    let Ok(Some(tokens)) = gguf.meta_array_opt("tokenizer.ggml.tokens") else {
        return Ok(());
    };
    if tokens.len() != embedding_rows {
        return Err(ModelError::VocabularyMismatch {
            tokens: tokens.len(),
            tensor: "token_embd.weight".into(),
            rows: embedding_rows,
        });
    }
    Ok(())
}
