//! `wick embed`: text embeddings from a sentence-transformers folder (BERT,
//! EmbeddingGemma) or a `nomic-bert` GGUF file, printed one vector a line,
//! or with `--json` as OpenAI's embeddings response.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use wick::embedding::{
    dense_paths, pooling_path, DenseFiles, EmbedFiles, EmbedOptions, Embedder, Embedding,
    SentenceFiles,
};
use wick::gpu::GpuContext;

use crate::CliResult;

#[derive(clap::Args)]
pub struct EmbedArgs {
    /// A Hugging Face / sentence-transformers folder (config.json,
    /// model.safetensors or its shards, tokenizer.json, and optionally
    /// modules.json, the Pooling module's config.json, the Dense modules'
    /// config.json and model.safetensors, and sentence_bert_config.json) of
    /// a BERT or EmbeddingGemma, or a GGUF file of the nomic-bert
    /// architecture (nomic-embed-text-v1.5).
    #[arg(long)]
    pub model: PathBuf,
    /// An input (repeatable); all inputs run as one batch.
    #[arg(long)]
    pub text: Vec<String>,
    /// A file of inputs, one a line (after any --text).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Cut inputs longer than the model reads instead of refusing them.
    #[arg(long)]
    pub truncate: bool,
    /// Print OpenAI's embeddings response (`object: "list"`, `data`, `model`, `usage`).
    #[arg(long)]
    pub json: bool,
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read '{}': {e}", path.display()))
}

fn optional(path: &Path) -> Result<Option<Vec<u8>>, String> {
    if path.is_file() {
        read(path).map(Some)
    } else {
        Ok(None)
    }
}

/// The folder's files, read (the weights mapped), or the GGUF file mapped.
fn load(dir: &Path) -> Result<Embedder, Box<dyn std::error::Error>> {
    if dir.is_file() {
        let gguf = crate::map_file::map_file(dir)?;
        let ctx = Arc::new(pollster::block_on(GpuContext::new())?);
        return Ok(Embedder::load_gguf(ctx, &gguf)?);
    }
    if !dir.is_dir() {
        return Err(format!("--model '{}' is neither a GGUF file nor a folder (wick embed reads a sentence-transformers / Hugging Face folder or a nomic-bert GGUF)", dir.display()).into());
    }
    let config = read(&dir.join("config.json"))?;
    let tokenizer = read(&dir.join("tokenizer.json"))?;
    let weights = crate::hf::Weights::open(dir)?;
    let shards = weights.slices();
    let modules = optional(&dir.join("modules.json"))?;
    let pooling = match &modules {
        Some(json) => match pooling_path(json)? {
            Some(sub) => optional(&dir.join(sub).join("config.json"))?,
            None => None,
        },
        None => None,
    };
    // Each Dense module's config.json and weights (mapped).
    let mut dense_files = Vec::new();
    if let Some(json) = &modules {
        for sub in dense_paths(json)? {
            let sub = dir.join(sub);
            dense_files.push((
                read(&sub.join("config.json"))?,
                crate::map_file::map_file(&sub.join("model.safetensors"))?,
            ));
        }
    }
    let dense: Vec<DenseFiles> = dense_files
        .iter()
        .map(|(config, tensors)| DenseFiles {
            config,
            safetensors: tensors,
        })
        .collect();
    let sentence_bert = optional(&dir.join("sentence_bert_config.json"))?;
    let ctx = Arc::new(pollster::block_on(GpuContext::new())?);
    let files = EmbedFiles {
        config: &config,
        tokenizer: &tokenizer,
        shards: &shards,
        index: weights.index.as_deref(),
        sentence: SentenceFiles {
            modules: modules.as_deref(),
            pooling: pooling.as_deref(),
            dense: &dense,
            sentence_bert: sentence_bert.as_deref(),
        },
    };
    Ok(Embedder::load_hf(ctx, &files)?)
}

pub fn run(args: EmbedArgs) -> CliResult {
    let mut inputs = args.text.clone();
    if let Some(path) = &args.file {
        let text = String::from_utf8(read(path)?)
            .map_err(|_| format!("'{}' is not UTF-8", path.display()))?;
        inputs.extend(text.lines().map(str::to_string));
    }
    if inputs.is_empty() {
        return Err("nothing to embed: give --text T (repeatable) or --file F".into());
    }
    let embedder = load(&args.model)?;
    let texts: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let opts = EmbedOptions {
        truncate: args.truncate,
    };
    let embeddings = pollster::block_on(embedder.embed(&texts, opts))?;
    if args.json {
        println!("{}", response(&embeddings, &model_name(&args.model)));
    } else {
        for e in &embeddings {
            let values: Vec<String> = e.vector.iter().map(|v| v.to_string()).collect();
            println!("{}", values.join(" "));
        }
    }
    Ok(())
}

fn model_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// OpenAI's `CreateEmbeddingResponse`.
fn response(embeddings: &[Embedding], model: &str) -> serde_json::Value {
    let tokens: usize = embeddings.iter().map(|e| e.tokens).sum();
    let data: Vec<_> = embeddings
        .iter()
        .enumerate()
        .map(|(index, e)| json!({ "object": "embedding", "index": index, "embedding": e.vector }))
        .collect();
    json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
    })
}
