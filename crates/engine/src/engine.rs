//! `Engine`: a loaded model ready to generate — the GGUF header, the
//! tokenizer built from it, and a pipeline over the uploaded weights. This is
//! what the CLI and the browser bindings hold.
//!
//! `ModelLoader` builds one from a file's bytes fed in order, in chunks of any
//! size: the header is parsed as soon as it is complete, the architecture's
//! tensors are checked before any upload, and each tensor goes to the GPU as
//! soon as its bytes are in. A `fetch()` body or a `File` stream is therefore
//! never held whole in memory.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use crate::error::WickError;
use crate::format::gguf::{GgufError, GgufFile, TensorInfo};
use crate::format::gguf_split::{self as split, SplitError};
use crate::gpu::{GpuContext, PendingPipeline};
use crate::model::loader::{check_needs, Need, Streaming};
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

    /// Loads a model split into shards (llama.cpp's `gguf-split`) from the
    /// bytes of each whole shard, in order.
    pub async fn load_split(
        ctx: Arc<GpuContext>,
        shards: &[&[u8]],
        opts: &PipelineOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Engine, WickError> {
        let mut loader = ModelLoader::split(ctx, opts.clone(), shards.len());
        if shards.is_empty() {
            return Err(SplitError::NoShards.into());
        }
        for (i, bytes) in shards.iter().enumerate() {
            if !loader.push_header(i, bytes)? {
                // The whole shard ends inside its header: say where.
                let detail = GgufFile::parse(bytes)
                    .err()
                    .unwrap_or(GgufError::NeedMoreHeader {
                        needed_at_least: bytes.len() as u64 + 1,
                    });
                return Err(SplitError::Header { shard: i, detail }.into());
            }
        }
        for (i, bytes) in shards.iter().enumerate() {
            loader.push_shard(i, bytes, progress)?;
        }
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

    /// Attaches `draft` as this model's draft model for speculative
    /// decoding (`Speculation::Draft`): refused unless the two vocabularies
    /// are the same, token for token (`check_draft_vocabulary`), and the
    /// draft is on the same GPU context.
    pub fn set_draft_model(&mut self, draft: Engine) -> Result<(), WickError> {
        check_draft_vocabulary(&self.tokenizer, &draft.tokenizer)?;
        Ok(self.pipeline.set_draft_model(draft.pipeline)?)
    }
}

/// Whether `draft` can draft for `model`: the same vocabulary, token for
/// token; the error names the first token that differs and both texts.
pub fn check_draft_vocabulary(model: &Tokenizer, draft: &Tokenizer) -> Result<(), WickError> {
    let n = model.vocab_size().max(draft.vocab_size());
    if let Some(id) = (0..n as u32).find(|&id| model.token_text(id) != draft.token_text(id)) {
        let text = |t: &Tokenizer| {
            t.token_text(id)
                .map_or("(none)".into(), |s| format!("{s:?}"))
        };
        return Err(WickError::InvalidOption(format!(
            "the draft model's vocabulary differs from the model's at token {id}: {} against {} ({} and {} tokens)",
            text(draft),
            text(model),
            draft.vocab_size(),
            model.vocab_size()
        )));
    }
    Ok(())
}

/// The memory preflight of a model from its header alone (every shard's
/// header, in order, for a split model): the checks a load makes before its
/// first upload (one model, a known architecture, every tensor there in a
/// GPU type), then what it would hold on `ctx`'s GPU under `opts` and
/// whether that fits, measured as the load measures it (`preflight`). A
/// page asks this before downloading the weights.
pub fn preflight_headers(
    ctx: &GpuContext,
    headers: Vec<GgufFile>,
    opts: &PipelineOptions,
) -> Result<preflight::Report, WickError> {
    let gguf = match headers.len() {
        0 => return Err(SplitError::NoShards.into()),
        1 => {
            let gguf = headers.into_iter().next().expect("one header");
            split::check_alone(&gguf)?;
            gguf
        }
        _ => split::merge(&headers)?.file,
    };
    let plan = Plan::for_file(&gguf)?;
    check_vocabulary(&gguf, plan.config.vocab_size)?;
    let needs = check_needs(&gguf, &plan.needs)?;
    let typed: Vec<_> = needs
        .iter()
        .map(|(info, need)| (info.dtype, need))
        .collect();
    preflight::report(ctx, &plan, &typed, opts)
}

/// Everything known once the header (every shard's header) is parsed.
struct Loading {
    gguf: GgufFile,
    tokenizer: Tokenizer,
    plan: Plan,
    /// Needed tensors in the order their bytes arrive (by shard, then by
    /// offset), each with its shard and its byte range in that shard.
    queue: Vec<(TensorInfo, Need, usize, Range<u64>)>,
    next: usize,
    /// Bytes of `queue[next]` received so far, when it spans chunks and is
    /// gathered (a vector, a fused group's member).
    pending: Vec<u8>,
    /// The upload of `queue[next]` when it spans chunks and streams (a
    /// matrix or an expert stack of its own, a fused group's last member).
    streaming: Option<Streaming>,
    store: TensorStore,
    /// Each shard's data end: the bytes that count for progress.
    sizes: Vec<u64>,
    total: u64,
}

impl Loading {
    /// Progress at byte `at` of `shard`: the shards before it whole.
    fn progress(&self, shard: usize, at: u64) -> LoadProgress {
        let before: u64 = self.sizes[..shard].iter().sum();
        LoadProgress {
            loaded: before + at.min(self.sizes[shard]),
            total: self.total,
        }
    }
}

/// Streams a model into GPU buffers: one GGUF file's bytes in order
/// ([`push`](Self::push)), or a split model's shards
/// ([`split`](Self::split): every shard's header first, then each shard's
/// bytes in turn), so the plan and the memory preflight see every tensor
/// before the first upload.
pub struct ModelLoader {
    ctx: Arc<GpuContext>,
    opts: PipelineOptions,
    /// Shards of a split model; `None` for one file.
    split: Option<usize>,
    /// Bytes received of each shard (of the file, for one file): the offset
    /// of the next byte to arrive.
    received: Vec<u64>,
    /// The start of each shard, kept only until its header parses.
    header: Vec<Vec<u8>>,
    /// A split model's shard headers as they parse.
    headers: Vec<Option<GgufFile>>,
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
            split: None,
            received: vec![0],
            header: vec![Vec::new()],
            headers: Vec::new(),
            tokenizer: None,
            loading: None,
        }
    }

    /// A loader for a model split into `shards` files (llama.cpp's
    /// `gguf-split`): feed every shard's header with
    /// [`push_header`](Self::push_header) (checked against each other when
    /// the last one is in), then each shard's bytes from its start, shard
    /// after shard, with [`push_shard`](Self::push_shard).
    pub fn split(ctx: Arc<GpuContext>, opts: PipelineOptions, shards: usize) -> ModelLoader {
        ModelLoader {
            split: Some(shards),
            received: vec![0; shards],
            header: vec![Vec::new(); shards],
            headers: vec![None; shards],
            ..ModelLoader::new(ctx, opts)
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
        match &self.loading {
            Some(l) => {
                let loaded = (self.received.iter().zip(&l.sizes))
                    .map(|(r, s)| *r.min(s))
                    .sum();
                LoadProgress {
                    loaded,
                    total: l.total,
                }
            }
            None => LoadProgress {
                loaded: self.received.iter().sum(),
                total: 0,
            },
        }
    }

    /// Whether the header (every shard's) is in: the model is planned and
    /// its tensors checked, and the bytes that follow are uploaded.
    pub fn header_parsed(&self) -> bool {
        self.loading.is_some()
    }

    /// Once the header is in: the pipelines the engine's warm-up will ask
    /// for that the context lacks, learnt from
    /// [`stand_in_pipeline`](Self::stand_in_pipeline) (freed again before
    /// this returns). The page creates them with
    /// `createComputePipelineAsync` while the weights download, so they
    /// compile meanwhile and the warm-up's own creation finds them compiled.
    pub fn pipelines_ahead(&self) -> Result<Vec<PendingPipeline>, WickError> {
        Ok(self.stand_in_pipeline()?.pending_pipelines()?.into_list())
    }

    /// Once the header is in: the pipeline this load will build, over
    /// stand-ins for its weights (`TensorStore::stand_ins`: the same
    /// configuration, tensor types and parts, none of the bytes) and with
    /// buffers of its own. It records the steps the real one will, so it
    /// names the kernels the model needs before its weights arrive; it is
    /// never run. A model that its build refuses is refused here, before
    /// its weights download.
    pub fn stand_in_pipeline(&self) -> Result<Pipeline, WickError> {
        let Some(l) = &self.loading else {
            return Err(WickError::InvalidOption(
                "a stand-in pipeline is built once the header is in".into(),
            ));
        };
        let typed: Vec<_> = l
            .queue
            .iter()
            .map(|(info, need, _, _)| (info.dtype, need))
            .collect();
        let mut stand_ins = TensorStore::stand_ins(&self.ctx, &l.plan.fusions, &typed)?;
        let model = l.plan.clone().build(&mut stand_ins)?;
        Ok(Pipeline::new(self.ctx.clone(), model, &self.opts)?)
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
        if self.split.is_some() {
            return Err(WickError::InvalidOption(
                "this loader takes a split model: push_header, then push_shard".into(),
            ));
        }
        let offset = self.received[0];
        self.received[0] += chunk.len() as u64;
        if self.loading.is_some() {
            self.consume(0, offset, chunk, progress)?;
            return Ok(self.progress());
        }
        let buffered = !self.header[0].is_empty();
        if let Some(gguf) = self.parse_start(0, chunk)? {
            split::check_alone(&gguf)?;
            let sizes = vec![data_end(&gguf)];
            let ranges: HashMap<String, (usize, Range<u64>)> = gguf
                .tensors
                .iter()
                .map(|t| (t.name.clone(), (0, gguf.tensor_range(t))))
                .collect();
            self.start(gguf, &ranges, sizes)?;
            if buffered {
                let start = std::mem::take(&mut self.header[0]);
                self.consume(0, 0, &start, progress)?;
            } else {
                self.consume(0, 0, chunk, progress)?;
            }
        }
        Ok(self.progress())
    }

    /// Feeds bytes from the start of `shard`'s header; `Ok(true)` once that
    /// header is complete (more bytes of it are then ignored). Bytes past the
    /// header are not kept: [`push_shard`](Self::push_shard) takes the shard
    /// again from its start. When the last header completes, the shards are
    /// checked to be one model, and planned and preflighted as one.
    pub fn push_header(&mut self, shard: usize, chunk: &[u8]) -> Result<bool, WickError> {
        let count = self.shard_count(shard)?;
        if self.headers[shard].is_some() || self.loading.is_some() {
            return Ok(true);
        }
        let Some(gguf) = self.parse_start(shard, chunk)? else {
            return Ok(false);
        };
        self.header[shard] = Vec::new();
        self.headers[shard] = Some(gguf);
        if self.headers.iter().all(Option::is_some) {
            let headers: Vec<GgufFile> = self.headers.iter_mut().filter_map(Option::take).collect();
            debug_assert_eq!(headers.len(), count);
            let sizes = headers.iter().map(data_end).collect();
            let merged = split::merge(&headers)?;
            self.start(merged.file, &merged.location, sizes)?;
        }
        Ok(true)
    }

    /// Feeds the next bytes of `shard` (from its start, header included),
    /// once every header is in; shards in order, each whole before the next.
    pub fn push_shard(
        &mut self,
        shard: usize,
        chunk: &[u8],
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<LoadProgress, WickError> {
        self.shard_count(shard)?;
        let Some(l) = &self.loading else {
            return Err(SplitError::HeadersFirst { shard }.into());
        };
        // A shard's bytes mean the shards before it are done.
        if let Some((info, _, s, range)) = l.queue.get(l.next) {
            if *s < shard {
                return Err(self.short(*s, info, range).into());
            }
        }
        let offset = self.received[shard];
        self.received[shard] += chunk.len() as u64;
        self.consume(shard, offset, chunk, progress)?;
        Ok(self.progress())
    }

    fn shard_count(&self, shard: usize) -> Result<usize, WickError> {
        let Some(count) = self.split else {
            return Err(WickError::InvalidOption(
                "this loader takes one file: push its bytes with push".into(),
            ));
        };
        if shard >= count {
            return Err(SplitError::NoSuchShard { shard, count }.into());
        }
        Ok(count)
    }

    /// Parses a header from the start of `shard`: straight from the chunk
    /// when it holds the whole header (the native case, so a mapped file is
    /// never copied), else from the bytes kept so far. `None`: more needed.
    fn parse_start(&mut self, shard: usize, chunk: &[u8]) -> Result<Option<GgufFile>, WickError> {
        let parsed = if self.header[shard].is_empty() {
            GgufFile::parse_header(chunk)
        } else {
            self.header[shard].extend_from_slice(chunk);
            GgufFile::parse_header(&self.header[shard])
        };
        let named = |detail: GgufError| -> WickError {
            match self.split {
                Some(_) => SplitError::Header { shard, detail }.into(),
                None => detail.into(),
            }
        };
        match parsed {
            Ok(gguf) => Ok(Some(gguf)),
            Err(GgufError::NeedMoreHeader { .. }) => {
                if self.header[shard].is_empty() {
                    self.header[shard].extend_from_slice(chunk);
                }
                Ok(None)
            }
            Err(e) => Err(named(e)),
        }
    }

    /// Plans the model, checks its tensors and preflights its memory, with
    /// each tensor's shard and byte range from `ranges`.
    fn start(
        &mut self,
        gguf: GgufFile,
        ranges: &HashMap<String, (usize, Range<u64>)>,
        sizes: Vec<u64>,
    ) -> Result<(), WickError> {
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
        let mut queue: Vec<_> = check_needs(&gguf, &plan.needs)?
            .into_iter()
            .map(|(info, need)| {
                let (shard, range) = ranges[&info.name].clone();
                (info.clone(), need, shard, range)
            })
            .collect();
        // The order the bytes arrive in.
        queue.sort_by_key(|(_, _, shard, range)| (*shard, range.start));
        // Before the first upload: refused here, with the numbers, rather
        // than part way through the upload.
        let typed: Vec<_> = queue
            .iter()
            .map(|(info, need, _, _)| (info.dtype, need))
            .collect();
        let fit = preflight::check(&self.ctx, &plan, &typed, &self.opts)?;
        self.opts.ctx_len = Some(fit.ctx_len);
        let store = TensorStore::new(plan.fusions.clone());
        let total = sizes.iter().sum();
        self.loading = Some(Loading {
            gguf,
            tokenizer,
            plan,
            queue,
            next: 0,
            pending: Vec::new(),
            streaming: None,
            store,
            sizes,
            total,
        });
        Ok(())
    }

    /// Takes bytes `offset..offset + bytes.len()` of `shard`: uploads every
    /// needed tensor they complete, keeps the start of one they do not.
    fn consume(
        &mut self,
        shard: usize,
        offset: u64,
        bytes: &[u8],
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<(), WickError> {
        let end = offset + bytes.len() as u64;
        let l = self.loading.as_mut().expect("header parsed");
        while let Some((info, need, s, range)) = l.queue.get(l.next) {
            if *s != shard || range.start >= end {
                break;
            }
            let received = match &l.streaming {
                Some(up) => up.received(),
                None => l.pending.len() as u64,
            };
            let from = (range.start + received).max(offset);
            let to = range.end.min(end);
            let part = &bytes[(from - offset) as usize..(to - offset) as usize];
            if received == 0 && to - from == range.end - range.start {
                // Whole in this chunk (always, natively: a mapped file is
                // one chunk).
                l.store.upload(&self.ctx, info, need, part)?;
            } else if l.streaming.is_some() || (received == 0 && l.store.streams(need)) {
                // A matrix across chunks goes up as its rows arrive, never
                // held whole (the page's chunks are 16 MiB; an 8B model's
                // token embedding is 282 MiB).
                if l.streaming.is_none() {
                    l.streaming = Some(l.store.begin_stream(&self.ctx, info, need)?);
                }
                let up = l.streaming.as_mut().expect("just set");
                up.push(&self.ctx, part)?;
                if to < range.end {
                    break;
                }
                let up = l.streaming.take().expect("streaming");
                l.store.finish_stream(&self.ctx, need, up)?;
            } else {
                // A vector or a fused group's member, gathered: room for
                // exactly its bytes (grown by doubling, a 33 MiB member of
                // an 8B's gate/up pair could take twice that).
                if l.pending.is_empty() {
                    l.pending.reserve_exact((range.end - range.start) as usize);
                }
                l.pending.extend_from_slice(part);
                if (l.pending.len() as u64) < range.end - range.start {
                    break;
                }
                let whole = std::mem::take(&mut l.pending);
                l.store.upload_vec(&self.ctx, info, need, whole)?;
            }
            l.next += 1;
            progress(l.progress(shard, to));
        }
        Ok(())
    }

    /// The error for a file (or shard) that ended before `info`'s bytes.
    fn short(&self, shard: usize, info: &TensorInfo, range: &Range<u64>) -> ModelError {
        let what = match self.split {
            Some(_) => format!("shard {}", shard + 1),
            None => "the file".into(),
        };
        ModelError::Truncated(format!(
            "{what} ended after {} bytes; tensor '{}' needs bytes up to {}",
            self.received[shard], info.name, range.end
        ))
    }

    /// Builds the engine once every needed tensor is in.
    pub fn finish(self) -> Result<Engine, WickError> {
        let Some(l) = &self.loading else {
            if let Some(shard) = self.headers.iter().position(Option::is_none) {
                return Err(SplitError::Header {
                    shard,
                    detail: GgufError::Truncated {
                        what: "the header".into(),
                        offset: 0,
                        needed: self.header[shard].len() as u64 + 1,
                        available: self.header[shard].len() as u64,
                    },
                }
                .into());
            }
            return Err(ModelError::Truncated(format!(
                "the file ended after {} bytes, inside its header",
                self.received[0]
            ))
            .into());
        };
        if let Some((info, _, shard, range)) = l.queue.get(l.next) {
            return Err(self.short(*shard, info, range).into());
        }
        let mut l = self.loading.expect("checked above");
        let model = l.plan.build(&mut l.store)?;
        let pipeline = Pipeline::new(self.ctx, model, &self.opts)?;
        Ok(Engine {
            gguf: l.gguf,
            tokenizer: l.tokenizer,
            pipeline,
        })
    }
}

/// Where a file's tensor data ends (its data section start when it has none).
fn data_end(gguf: &GgufFile) -> u64 {
    gguf.tensors
        .iter()
        .map(|t| gguf.tensor_range(t).end)
        .max()
        .unwrap_or(gguf.data_offset)
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
