//! An `Engine` from a Hugging Face checkpoint's files, given as bytes (no
//! filesystem here: the CLI maps a folder's files, a browser would fetch
//! them): whole (`Engine::load_hf`) or shard chunk by chunk (`HfLoader`).
//! The checkpoint streams into the GGUF `ModelLoader` through
//! `model::hf::HfStream`; errors about its tensors name them as the
//! checkpoint does.

use std::sync::Arc;

use crate::engine::{Engine, ModelLoader};
use crate::error::WickError;
use crate::format::safetensors::SafetensorsHeader;
use crate::format::safetensors_index::ShardIndex;
use crate::gpu::{GpuContext, PendingPipeline};
use crate::model::hf::{names, HfCheckpoint, HfOptions, HfStream};
use crate::model::{LoadProgress, ModelError};
use crate::pipeline::PipelineOptions;
use crate::tokenizer::hf_config::HfTokenizerConfig;
use crate::tokenizer::Tokenizer;

/// A checkpoint's small files: everything but the weights.
#[derive(Clone, Copy)]
pub struct HfConfigFiles<'a> {
    pub config: &'a [u8],
    pub tokenizer: &'a [u8],
    pub tokenizer_config: Option<&'a [u8]>,
    /// `model.safetensors.index.json` of a sharded checkpoint: checked
    /// against the shards' headers.
    pub index: Option<&'a [u8]>,
}

/// A checkpoint's files, whole.
pub struct HfFiles<'a> {
    pub meta: HfConfigFiles<'a>,
    /// The safetensors files, in the index's order (`ShardIndex::shards`).
    pub shards: Vec<&'a [u8]>,
}

/// A checkpoint's tokenizer and the chat template of its
/// `tokenizer_config.json`, as `hf_tokenizer` reads them.
pub struct HfTokenizer {
    pub tokenizer: Tokenizer,
    pub chat_template: Option<String>,
}

/// The tokenizer of `tokenizer.json` with `tokenizer_config.json`'s special
/// tokens, and the chat template the latter holds.
pub fn hf_tokenizer(
    tokenizer_json: &[u8],
    tokenizer_config: Option<&[u8]>,
) -> Result<(Tokenizer, Option<String>), WickError> {
    let tokenizer = Tokenizer::from_tokenizer_json(tokenizer_json)?;
    match tokenizer_config {
        None => Ok((tokenizer, None)),
        Some(json) => {
            let cfg = HfTokenizerConfig::parse(json)?;
            Ok((cfg.apply(tokenizer)?, cfg.chat_template))
        }
    }
}

/// Loads a checkpoint whose shards arrive in chunks (a browser's streams):
/// planned from the small files and the shards' headers (each parsed from
/// a prefix: `SafetensorsHeader::parse` says how much more it needs), then
/// fed each shard's bytes in order, from its first byte.
pub struct HfLoader {
    loader: ModelLoader,
    stream: HfStream,
    arch: &'static str,
}

impl HfLoader {
    pub fn new(
        ctx: Arc<GpuContext>,
        opts: PipelineOptions,
        hf_opts: &HfOptions,
        files: &HfConfigFiles,
        headers: &[SafetensorsHeader],
    ) -> Result<HfLoader, WickError> {
        let (tokenizer, template) = hf_tokenizer(files.tokenizer, files.tokenizer_config)?;
        let tokenizer = HfTokenizer {
            tokenizer,
            chat_template: template,
        };
        HfLoader::with_tokenizer(ctx, opts, hf_opts, files, headers, tokenizer)
    }

    /// As `new`, with the tokenizer files already read (`hf_tokenizer`): a
    /// caller that reports which file failed reads them itself.
    /// `files.tokenizer` and `files.tokenizer_config` are not read again.
    pub fn with_tokenizer(
        ctx: Arc<GpuContext>,
        opts: PipelineOptions,
        hf_opts: &HfOptions,
        files: &HfConfigFiles,
        headers: &[SafetensorsHeader],
        tokenizer: HfTokenizer,
    ) -> Result<HfLoader, WickError> {
        if let Some(index) = files.index {
            let index = ShardIndex::parse(index).map_err(ModelError::from)?;
            index.check(headers).map_err(ModelError::from)?;
        }
        let HfTokenizer {
            tokenizer,
            chat_template: template,
        } = tokenizer;
        let ckpt = HfCheckpoint::new(files.config, headers, template.as_deref(), hf_opts)?;
        Ok(HfLoader {
            arch: ckpt.config.architecture,
            loader: ModelLoader::with_tokenizer(ctx, opts, tokenizer),
            stream: ckpt.into_stream(),
        })
    }

    /// The next bytes of shard `shard`; `progress` hears of each tensor
    /// uploaded (in bytes of the GGUF stream the checkpoint becomes).
    pub fn push(
        &mut self,
        shard: usize,
        chunk: &[u8],
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<(), WickError> {
        let loader = &mut self.loader;
        self.stream
            .push(shard, chunk, &mut |gguf: &[u8]| {
                loader.push_with_progress(gguf, progress).map(|_| ())
            })
            .map_err(|e| with_hf_names(e, self.arch))
    }

    /// Whether the converted stream's header is in (see
    /// `ModelLoader::pipelines_ahead`).
    pub fn header_parsed(&self) -> bool {
        self.loader.header_parsed()
    }

    /// As `ModelLoader::pipelines_ahead`.
    pub fn pipelines_ahead(&self) -> Result<Vec<PendingPipeline>, WickError> {
        self.loader
            .pipelines_ahead()
            .map_err(|e| with_hf_names(e, self.arch))
    }

    /// Checks shard `shard` has arrived whole (every tensor it holds), so
    /// that a short file is reported when it ends, naming it, rather than
    /// when the next shard or `finish` comes.
    pub fn end_shard(&self, shard: usize) -> Result<(), WickError> {
        self.stream
            .unfinished_before(shard + 1)
            .map_err(|e| with_hf_names(e.into(), self.arch))
    }

    /// Builds the engine once every shard has arrived whole.
    pub fn finish(self) -> Result<Engine, WickError> {
        let arch = self.arch;
        self.stream
            .finish()
            .map_err(|e| with_hf_names(e.into(), arch))?;
        self.loader.finish().map_err(|e| with_hf_names(e, arch))
    }
}

impl Engine {
    /// Loads a Hugging Face checkpoint whose files are whole in memory (or
    /// mapped). Tensors are converted and uploaded one at a time.
    pub async fn load_hf(
        ctx: Arc<GpuContext>,
        files: &HfFiles<'_>,
        opts: &PipelineOptions,
        hf_opts: &HfOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Engine, WickError> {
        let mut headers = Vec::with_capacity(files.shards.len());
        for bytes in &files.shards {
            let header = SafetensorsHeader::parse(bytes).map_err(ModelError::from)?;
            header
                .check_file_len(bytes.len() as u64)
                .map_err(ModelError::from)?;
            headers.push(header);
        }
        let mut loader = HfLoader::new(ctx, opts.clone(), hf_opts, &files.meta, &headers)?;
        for (i, bytes) in files.shards.iter().enumerate() {
            loader.push(i, bytes, progress)?;
        }
        let mut engine = loader.finish()?;
        if opts.warm_up {
            engine.pipeline.warm_up().await?;
        }
        Ok(engine)
    }
}

/// `e` with GGUF tensor names replaced by the checkpoint's, and GGUF's dims
/// (contiguous first) by the checkpoint's shape order.
pub fn with_hf_names(e: WickError, arch: &str) -> WickError {
    let hf = |n: String| names::to_hf(arch, &n).unwrap_or(n);
    let rev = |mut d: Vec<u64>| {
        d.reverse();
        d
    };
    match e {
        WickError::Model(ModelError::MissingTensor(n)) => ModelError::MissingTensor(hf(n)).into(),
        WickError::Model(ModelError::TensorShape {
            name,
            expected,
            found,
        }) => ModelError::TensorShape {
            name: hf(name),
            expected: rev(expected),
            found: rev(found),
        }
        .into(),
        WickError::Model(ModelError::UnsupportedQuant { tensor, dtype }) => {
            ModelError::UnsupportedQuant {
                tensor: hf(tensor),
                dtype,
            }
            .into()
        }
        other => other,
    }
}
