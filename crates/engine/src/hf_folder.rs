//! An `Engine` from a Hugging Face checkpoint's files, given as bytes (no
//! filesystem here: the CLI maps a folder's files, the browser fetches them).
//! The checkpoint streams into the GGUF `ModelLoader` through
//! `model::hf::HfStream`; errors about its tensors name them as the
//! checkpoint does.

use std::sync::Arc;

use crate::engine::{Engine, ModelLoader};
use crate::error::WickError;
use crate::format::safetensors::SafetensorsHeader;
use crate::format::safetensors_index::ShardIndex;
use crate::gpu::GpuContext;
use crate::model::hf::{names, HfCheckpoint, HfOptions};
use crate::model::{LoadProgress, ModelError};
use crate::pipeline::PipelineOptions;
use crate::tokenizer::hf_config::HfTokenizerConfig;
use crate::tokenizer::Tokenizer;

/// The files of a checkpoint.
pub struct HfFiles<'a> {
    pub config: &'a [u8],
    pub tokenizer: &'a [u8],
    pub tokenizer_config: Option<&'a [u8]>,
    /// `model.safetensors.index.json` of a sharded checkpoint: checked
    /// against the shards' headers.
    pub index: Option<&'a [u8]>,
    /// The safetensors files, in the index's order (`ShardIndex::shards`).
    pub shards: Vec<&'a [u8]>,
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
        if let Some(index) = files.index {
            let index = ShardIndex::parse(index).map_err(ModelError::from)?;
            index.check(&headers).map_err(ModelError::from)?;
        }
        let (tokenizer, template) = hf_tokenizer(files.tokenizer, files.tokenizer_config)?;
        let ckpt = HfCheckpoint::new(files.config, &headers, template.as_deref(), hf_opts)?;
        let arch = ckpt.config.architecture;
        let mut loader = ModelLoader::with_tokenizer(ctx, opts.clone(), tokenizer);
        let mut stream = ckpt.into_stream();
        let mut run = || {
            for (i, bytes) in files.shards.iter().enumerate() {
                stream.push(i, bytes, &mut |gguf: &[u8]| {
                    loader.push_with_progress(gguf, progress).map(|_| ())
                })?;
            }
            stream.finish()?;
            Ok::<_, WickError>(())
        };
        run().map_err(|e| with_hf_names(e, arch))?;
        let mut engine = loader.finish().map_err(|e| with_hf_names(e, arch))?;
        engine.pipeline.warm_up().await?;
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
