//! `Engine`: a loaded model ready to generate — the GGUF header, the
//! tokenizer built from it, and a pipeline over the uploaded weights. This is
//! what the CLI and the browser bindings hold.

use std::sync::Arc;

use crate::error::WickError;
use crate::format::gguf::GgufFile;
use crate::gpu::GpuContext;
use crate::model::{self, LoadProgress};
use crate::pipeline::{Pipeline, PipelineOptions};
use crate::tokenizer::Tokenizer;

pub struct Engine {
    pub gguf: GgufFile,
    pub tokenizer: Tokenizer,
    pub pipeline: Pipeline,
}

impl Engine {
    /// Loads a model from the bytes of a whole GGUF file: header, tokenizer,
    /// then the weights (reporting upload progress), then the pipeline state.
    pub async fn load(
        ctx: Arc<GpuContext>,
        bytes: &[u8],
        opts: &PipelineOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Engine, WickError> {
        let gguf = GgufFile::parse(bytes)?;
        let tokenizer = Tokenizer::from_gguf(&gguf)?;
        let model = model::load(&ctx, &gguf, bytes, progress)?;
        let pipeline = Pipeline::new(ctx, model, opts)?;
        Ok(Engine {
            gguf,
            tokenizer,
            pipeline,
        })
    }

    /// Prompt text to ids the way llama.cpp does for a raw prompt: BOS where
    /// the model asks for it, special-token text not parsed.
    pub fn tokenize_prompt(&self, text: &str) -> Result<Vec<u32>, WickError> {
        Ok(self.tokenizer.encode(text, true, false)?)
    }
}
