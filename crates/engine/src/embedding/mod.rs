//! Text embeddings from encoder models (BERT, as sentence-transformers
//! publishes them: all-MiniLM-L6-v2 and its kin). Beside the decoder
//! family, not inside it: an encoder reads its whole input at once with
//! bidirectional attention, keeps no KV cache and samples nothing, so it
//! shares the kernels and the recorder, not the pipeline.
//!
//! `Embedder::load_hf` takes a Hugging Face / sentence-transformers folder's
//! files as bytes (the engine has no filesystem): `config.json`,
//! `model.safetensors` (or the shards `model.safetensors.index.json`
//! lists), `tokenizer.json` (WordPiece, through the
//! `tokenizers` crate), and optionally `modules.json`, the Pooling module's
//! `config.json` and `sentence_bert_config.json`. `Embedder::load_gguf`
//! takes a GGUF of the `nomic-bert` architecture (nomic-embed-text-v1.5):
//! rotary positions and SwiGLU in the same encoder, its WordPiece
//! vocabulary from the GGUF's metadata, the pooling its `pooling_type`
//! names, then L2 normalisation. `embed` tokenizes, pads a batch to its
//! longest input, runs one step, pools and normalises.

pub mod bert_config;
pub mod bert_weights;
pub mod error;
pub mod forward;
pub mod nomic;
pub mod sentence;
pub mod wordpiece;

use std::sync::Arc;

use crate::error::WickError;
use crate::format::gguf::GgufFile;
use crate::format::safetensors::SafetensorsHeader;
use crate::format::safetensors_index::ShardIndex;
use crate::gpu::{GpuContext, Recorder};
use crate::model::ModelError;

use bert_config::{BertConfig, Ffn};
use bert_weights::BertWeights;
pub use error::EmbedError;
use forward::{record_forward, Batch};
pub use sentence::{pooling_path, SentenceConfig, SentenceFiles};

/// A checkpoint's files, whole in memory (or mapped).
#[derive(Clone, Copy)]
pub struct EmbedFiles<'a> {
    pub config: &'a [u8],
    pub tokenizer: &'a [u8],
    /// The safetensors files: `model.safetensors` alone, or a sharded
    /// checkpoint's shards in its index's order (`ShardIndex::shards`).
    pub shards: &'a [&'a [u8]],
    /// `model.safetensors.index.json` of a sharded checkpoint: checked
    /// against the shards' headers.
    pub index: Option<&'a [u8]>,
    pub sentence: SentenceFiles<'a>,
}

/// One input's embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    pub vector: Vec<f32>,
    /// Tokens the model read, special tokens included (OpenAI's usage counts).
    pub tokens: usize,
}

/// How `embed` treats inputs longer than the model reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmbedOptions {
    /// Cut them to the limit (keeping the special tokens, as
    /// sentence-transformers does) instead of refusing them.
    pub truncate: bool,
}

/// Each safetensors file's header, checked against its length and, for a
/// sharded checkpoint, against the index.
fn shard_headers<'a>(
    files: &EmbedFiles<'a>,
) -> Result<Vec<(SafetensorsHeader, &'a [u8])>, ModelError> {
    let mut shards = Vec::with_capacity(files.shards.len());
    for &bytes in files.shards {
        let header = SafetensorsHeader::parse(bytes)?;
        header.check_file_len(bytes.len() as u64)?;
        shards.push((header, bytes));
    }
    match files.index {
        Some(index) => {
            let headers: Vec<SafetensorsHeader> = shards.iter().map(|(h, _)| h.clone()).collect();
            ShardIndex::parse(index)?.check(&headers)?;
        }
        None if shards.len() != 1 => {
            return Err(ModelError::Config(format!(
                "{} safetensors files without an index (model.safetensors.index.json)",
                shards.len()
            )))
        }
        None => {}
    }
    Ok(shards)
}

/// Most sequences in one step: bounds the step's buffers together with
/// the binding limit (see `batches`).
const MAX_BATCH: usize = 64;

pub struct Embedder {
    ctx: Arc<GpuContext>,
    cfg: BertConfig,
    weights: BertWeights,
    tokenizer: tokenizers::Tokenizer,
    sentence: SentenceConfig,
}

fn tok_err(e: impl std::fmt::Display) -> WickError {
    EmbedError::Tokenizer(e.to_string()).into()
}

impl Embedder {
    /// Checks the config and every tensor, then uploads the weights.
    pub fn load_hf(ctx: Arc<GpuContext>, files: &EmbedFiles) -> Result<Embedder, WickError> {
        let cfg = BertConfig::parse(files.config)?;
        let sentence = SentenceConfig::parse(&files.sentence)?;
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(files.tokenizer).map_err(tok_err)?;
        // tokenizer.json may carry a truncation and a fixed padding
        // (all-MiniLM-L6-v2's: both at 128); lengths are this code's to decide.
        tokenizer.with_truncation(None).map_err(tok_err)?;
        tokenizer.with_padding(None);
        let shards = shard_headers(files)?;
        let weights = BertWeights::upload(&ctx, &cfg, &shards)?;
        Ok(Embedder {
            ctx,
            cfg,
            weights,
            tokenizer,
            sentence,
        })
    }

    /// Loads a `nomic-bert` GGUF (the whole file's bytes): checks the
    /// metadata and every tensor, builds the WordPiece tokenizer from the
    /// vocabulary in it, then uploads the weights. Pooling as the file's
    /// `pooling_type` says, then L2 normalisation (as llama.cpp's embedding
    /// output and sentence-transformers' Normalize module).
    pub fn load_gguf(ctx: Arc<GpuContext>, gguf: &[u8]) -> Result<Embedder, WickError> {
        let file = GgufFile::parse(gguf).map_err(ModelError::from)?;
        file.check_file_len(gguf.len() as u64)
            .map_err(ModelError::from)?;
        let (cfg, pooling) = nomic::config(&file)?;
        let (tokenizer, vocab) = wordpiece::from_gguf(&file)?;
        if vocab != cfg.vocab {
            return Err(ModelError::Config(format!(
                "the vocabulary has {vocab} tokens, token_embd.weight {} rows",
                cfg.vocab
            ))
            .into());
        }
        let weights = nomic::upload(&ctx, &cfg, &file, gguf)?;
        Ok(Embedder {
            ctx,
            cfg,
            weights,
            tokenizer,
            sentence: SentenceConfig {
                pooling,
                normalize: true,
                max_seq_length: None,
            },
        })
    }

    /// Length of the embeddings.
    pub fn dim(&self) -> usize {
        self.cfg.dim
    }

    pub fn config(&self) -> &BertConfig {
        &self.cfg
    }

    pub fn sentence_config(&self) -> &SentenceConfig {
        &self.sentence
    }

    /// The longest input in tokens, special tokens included: the model's
    /// positions, or less where sentence-transformers' config says so.
    pub fn max_tokens(&self) -> usize {
        let positions = self.cfg.max_positions;
        self.sentence
            .max_seq_length
            .map_or(positions, |n| n.min(positions))
    }

    /// Each text's token ids, with the tokenizer's special tokens (`[CLS]`
    /// ... `[SEP]`); an input over `max_tokens` is refused naming it, or
    /// cut when `opts.truncate`.
    pub fn tokenize(&self, texts: &[&str], opts: EmbedOptions) -> Result<Vec<Vec<u32>>, WickError> {
        let max = self.max_tokens();
        let mut out = Vec::with_capacity(texts.len());
        for (index, text) in texts.iter().enumerate() {
            let enc = self.tokenizer.encode(*text, true).map_err(tok_err)?;
            let mut ids = enc.get_ids().to_vec();
            if ids.len() > max {
                if !opts.truncate {
                    return Err(EmbedError::InputTooLong {
                        index,
                        tokens: ids.len(),
                        max,
                    }
                    .into());
                }
                // The last token is the closing special token ([SEP]): keep it.
                let last = ids[ids.len() - 1];
                ids.truncate(max);
                ids[max - 1] = last;
            }
            out.push(ids);
        }
        Ok(out)
    }

    /// Embeds `texts`: one vector each, in order.
    pub async fn embed(
        &self,
        texts: &[&str],
        opts: EmbedOptions,
    ) -> Result<Vec<Embedding>, WickError> {
        let ids = self.tokenize(texts, opts)?;
        self.embed_ids(&ids).await
    }

    /// Embeds inputs given as token ids (special tokens included), many in
    /// one step where they fit.
    pub async fn embed_ids(&self, inputs: &[Vec<u32>]) -> Result<Vec<Embedding>, WickError> {
        if inputs.is_empty() {
            return Err(EmbedError::NoInputs.into());
        }
        let max = self.max_tokens();
        for (index, ids) in inputs.iter().enumerate() {
            if ids.is_empty() || ids.len() > max {
                return Err(EmbedError::InputTooLong {
                    index,
                    tokens: ids.len(),
                    max,
                }
                .into());
            }
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.cfg.vocab) {
                return Err(EmbedError::TokenOutOfRange {
                    index,
                    id,
                    vocab: self.cfg.vocab,
                }
                .into());
            }
        }
        let mut out = Vec::with_capacity(inputs.len());
        for range in self.batches(inputs) {
            out.extend(self.run_batch(&inputs[range]).await?);
        }
        Ok(out)
    }

    /// Consecutive runs of inputs that fit one step: at most `MAX_BATCH`,
    /// and padded to the run's longest, the MLP's inner (or gate/up) rows
    /// (the largest buffer) within one storage binding.
    fn batches(&self, inputs: &[Vec<u32>]) -> Vec<std::ops::Range<usize>> {
        let max_elems = (self.ctx.max_binding_bytes() / 4) as usize;
        // SwiGLU's gate/up rows are twice the inner rows.
        let widest = match self.cfg.ffn_kind {
            Ffn::Gelu => self.cfg.ffn,
            Ffn::SwiGlu => 2 * self.cfg.ffn,
        };
        let mut runs = Vec::new();
        let (mut start, mut longest) = (0, 0);
        for (i, ids) in inputs.iter().enumerate() {
            let l = longest.max(ids.len());
            let fits = i - start < MAX_BATCH && (i - start + 1) * l * widest <= max_elems;
            if i > start && !fits {
                runs.push(start..i);
                start = i;
                longest = ids.len();
            } else {
                longest = l;
            }
        }
        runs.push(start..inputs.len());
        runs
    }

    async fn run_batch(&self, inputs: &[Vec<u32>]) -> Result<Vec<Embedding>, WickError> {
        let ctx = &*self.ctx;
        let batch = Batch::new(ctx, &self.cfg, inputs)?;
        let mut rec = Recorder::new(ctx);
        record_forward(
            &mut rec,
            &self.cfg,
            &self.weights,
            &batch,
            self.sentence.pooling,
        )?;
        rec.submit().await?;
        let dim = self.cfg.dim;
        let pooled = ctx.read_f32(&batch.pooled, 0, batch.seqs * dim).await?;
        Ok(pooled
            .chunks_exact(dim)
            .zip(inputs)
            .map(|(row, ids)| {
                let mut vector = row.to_vec();
                if self.sentence.normalize {
                    sentence::l2_normalize(&mut vector);
                }
                Embedding {
                    vector,
                    tokens: ids.len(),
                }
            })
            .collect())
    }
}
