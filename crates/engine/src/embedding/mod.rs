//! Text embeddings from encoder models (BERT, as sentence-transformers
//! publishes them: all-MiniLM-L6-v2 and its kin). Beside the decoder
//! family, not inside it: an encoder reads its whole input at once with
//! bidirectional attention, keeps no KV cache and samples nothing, so it
//! shares the kernels and the recorder, not the pipeline.
//!
//! `Embedder::load_hf` takes a Hugging Face / sentence-transformers folder's
//! files as bytes (the engine has no filesystem): `config.json`,
//! `model.safetensors` (or the shards `model.safetensors.index.json`
//! lists), `tokenizer.json` (through the `tokenizers` crate), and optionally
//! `modules.json`, the Pooling module's `config.json`, the Dense modules'
//! files and `sentence_bert_config.json`. The folder is a BERT
//! (`model_type: "bert"`) or EmbeddingGemma (`"gemma3_text"` with
//! bidirectional attention, `gemma`). `Embedder::load_gguf`
//! takes a GGUF of the `nomic-bert` architecture (nomic-embed-text-v1.5):
//! rotary positions and SwiGLU in the same encoder, its WordPiece
//! vocabulary from the GGUF's metadata, the pooling its `pooling_type`
//! names, then L2 normalisation. `embed` tokenizes, pads a batch to its
//! longest input, runs one step, pools and normalises.

mod batching;
pub mod bert_config;
pub mod bert_weights;
pub mod error;
pub mod forward;
pub mod gemma;
pub mod gemma_config;
pub mod nomic;
pub mod sentence;
pub mod wordpiece;

use std::sync::Arc;

use crate::format::gguf::GgufFile;
use crate::format::quant::GgmlType;
use crate::format::safetensors::SafetensorsHeader;
use crate::format::safetensors_index::ShardIndex;
use crate::gpu::{BufferRef, GpuContext, Recorder};
use crate::kernels::matmul::linear::{linear, Epilogue, Linear, LinearScratch};
use crate::kernels::weights::QuantMatrix;
use crate::model::ModelError;

use bert_config::{BertConfig, Ffn};
use bert_weights::{BertWeights, Reader};
pub use error::EmbedError;
use forward::{record_forward, Batch};
use gemma::{record_gemma, GemmaBatch, GemmaWeights};
use gemma_config::GemmaConfig;
pub use sentence::{
    dense_paths, pooling_path, DenseFiles, DenseSpec, SentenceConfig, SentenceFiles,
};

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

/// The network that turns token ids into pooled rows.
enum Encoder {
    /// BERT and nomic-bert.
    Bert {
        cfg: BertConfig,
        weights: BertWeights,
    },
    /// EmbeddingGemma (Gemma 3, bidirectional).
    Gemma {
        cfg: GemmaConfig,
        weights: GemmaWeights,
    },
}

impl Encoder {
    fn dim(&self) -> usize {
        match self {
            Encoder::Bert { cfg, .. } => cfg.dim,
            Encoder::Gemma { cfg, .. } => cfg.dim,
        }
    }

    fn vocab(&self) -> usize {
        match self {
            Encoder::Bert { cfg, .. } => cfg.vocab,
            Encoder::Gemma { cfg, .. } => cfg.vocab,
        }
    }

    fn max_positions(&self) -> usize {
        match self {
            Encoder::Bert { cfg, .. } => cfg.max_positions,
            Encoder::Gemma { cfg, .. } => cfg.max_positions,
        }
    }

    /// f32 elements of a token's widest row in a step: the MLP's inner rows
    /// (SwiGLU's and Gemma's gate/up rows are twice the inner rows).
    fn widest_row(&self) -> usize {
        match self {
            Encoder::Bert { cfg, .. } => match cfg.ffn_kind {
                Ffn::Gelu => cfg.ffn,
                Ffn::SwiGlu => 2 * cfg.ffn,
            },
            Encoder::Gemma { cfg, .. } => {
                (2 * cfg.ffn).max((cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim)
            }
        }
    }
}

/// A Dense module's weights, uploaded.
struct DenseLayer {
    w: QuantMatrix,
    bias: Option<BufferRef>,
}

pub struct Embedder {
    ctx: Arc<GpuContext>,
    encoder: Encoder,
    dense: Vec<DenseLayer>,
    tokenizer: tokenizers::Tokenizer,
    sentence: SentenceConfig,
}

fn tok_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Tokenizer(e.to_string())
}

fn safetensors(bytes: &[u8]) -> Result<SafetensorsHeader, ModelError> {
    let header = SafetensorsHeader::parse(bytes)?;
    header.check_file_len(bytes.len() as u64)?;
    Ok(header)
}

/// Checks the Dense modules' shapes against the encoder and each other,
/// then uploads their weights.
fn upload_dense(
    ctx: &GpuContext,
    dim: usize,
    specs: &[DenseSpec],
    files: &[DenseFiles],
) -> Result<Vec<DenseLayer>, ModelError> {
    let mut width = dim;
    let mut layers = Vec::with_capacity(specs.len());
    for (i, (spec, f)) in specs.iter().zip(files).enumerate() {
        if spec.in_features != width {
            return Err(ModelError::Config(format!(
                "Dense module {i} takes {} features, the rows before it have {width}",
                spec.in_features
            )));
        }
        let shards = [(safetensors(f.safetensors)?, f.safetensors)];
        let r = Reader {
            shards: &shards,
            prefix: "",
        };
        let (rows, cols) = (spec.out_features, spec.in_features);
        let w = r.f32s("linear.weight", &[rows, cols])?;
        let label = format!("dense {i}");
        let bias = if spec.bias {
            Some(ctx.upload_f32(&label, &r.f32s("linear.bias", &[rows])?)?)
        } else {
            None
        };
        let expected = 1 + spec.bias as usize;
        let found = shards[0].0.tensors.len();
        if found != expected {
            return Err(ModelError::Config(format!(
                "Dense module {i}: {found} tensors where its config says {expected}"
            )));
        }
        layers.push(DenseLayer {
            w: QuantMatrix::upload(
                ctx,
                &label,
                GgmlType::F32,
                rows,
                cols,
                bytemuck::cast_slice(&w),
            )?,
            bias,
        });
        width = rows;
    }
    Ok(layers)
}

impl Embedder {
    /// Checks the config and every tensor, then uploads the weights.
    pub fn load_hf(ctx: Arc<GpuContext>, files: &EmbedFiles) -> Result<Embedder, EmbedError> {
        // The architecture first, so that a model wick does not run is
        // refused before the tokenizer and weights are read.
        enum Arch {
            Bert(BertConfig),
            Gemma(GemmaConfig),
        }
        let arch = if GemmaConfig::is_gemma(files.config) {
            Arch::Gemma(GemmaConfig::parse(files.config)?)
        } else {
            Arch::Bert(BertConfig::parse(files.config)?)
        };
        let sentence = SentenceConfig::parse(&files.sentence)?;
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(files.tokenizer).map_err(tok_err)?;
        // tokenizer.json may carry a truncation and a fixed padding
        // (all-MiniLM-L6-v2's: both at 128); lengths are this code's to decide.
        tokenizer.with_truncation(None).map_err(tok_err)?;
        tokenizer.with_padding(None);
        let shards = shard_headers(files)?;
        let encoder = match arch {
            Arch::Gemma(cfg) => {
                let weights = GemmaWeights::upload(&ctx, &cfg, &shards)?;
                Encoder::Gemma { cfg, weights }
            }
            Arch::Bert(cfg) => {
                let weights = BertWeights::upload(&ctx, &cfg, &shards)?;
                Encoder::Bert { cfg, weights }
            }
        };
        let dense = upload_dense(&ctx, encoder.dim(), &sentence.dense, files.sentence.dense)?;
        Ok(Embedder {
            ctx,
            encoder,
            dense,
            tokenizer,
            sentence,
        })
    }

    /// Loads a `nomic-bert` GGUF (the whole file's bytes): checks the
    /// metadata and every tensor, builds the WordPiece tokenizer from the
    /// vocabulary in it, then uploads the weights. Pooling as the file's
    /// `pooling_type` says, then L2 normalisation (as llama.cpp's embedding
    /// output and sentence-transformers' Normalize module).
    pub fn load_gguf(ctx: Arc<GpuContext>, gguf: &[u8]) -> Result<Embedder, EmbedError> {
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
            encoder: Encoder::Bert { cfg, weights },
            dense: Vec::new(),
            tokenizer,
            sentence: SentenceConfig {
                pooling,
                dense: Vec::new(),
                normalize: true,
                max_seq_length: None,
            },
        })
    }

    /// Length of the embeddings (after any Dense modules).
    pub fn dim(&self) -> usize {
        self.dense.last().map_or(self.encoder.dim(), |d| d.w.rows)
    }

    /// Tokens in the vocabulary.
    pub fn vocab(&self) -> usize {
        self.encoder.vocab()
    }

    /// The encoder's layers.
    pub fn layers(&self) -> usize {
        match &self.encoder {
            Encoder::Bert { cfg, .. } => cfg.layers,
            Encoder::Gemma { cfg, .. } => cfg.layers.len(),
        }
    }

    pub fn sentence_config(&self) -> &SentenceConfig {
        &self.sentence
    }

    /// The longest input in tokens, special tokens included: the model's
    /// positions, or less where sentence-transformers' config says so.
    pub fn max_tokens(&self) -> usize {
        let positions = self.encoder.max_positions();
        self.sentence
            .max_seq_length
            .map_or(positions, |n| n.min(positions))
    }

    /// Each text's token ids, with the tokenizer's special tokens (`[CLS]`
    /// ... `[SEP]`, `<bos>` ... `<eos>`); an input over `max_tokens` is
    /// refused naming it, or cut when `opts.truncate`.
    pub fn tokenize(
        &self,
        texts: &[&str],
        opts: EmbedOptions,
    ) -> Result<Vec<Vec<u32>>, EmbedError> {
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
                    });
                }
                // The last token is the closing special token ([SEP], <eos>): keep it.
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
    ) -> Result<Vec<Embedding>, EmbedError> {
        let ids = self.tokenize(texts, opts)?;
        self.embed_ids(&ids).await
    }

    /// Embeds inputs given as token ids (special tokens included), many in
    /// one step where they fit (`batching::batches`), the vectors in the inputs' order.
    pub async fn embed_ids(&self, inputs: &[Vec<u32>]) -> Result<Vec<Embedding>, EmbedError> {
        if inputs.is_empty() {
            return Err(EmbedError::NoInputs);
        }
        let max = self.max_tokens();
        for (index, ids) in inputs.iter().enumerate() {
            if ids.is_empty() || ids.len() > max {
                return Err(EmbedError::InputTooLong {
                    index,
                    tokens: ids.len(),
                    max,
                });
            }
            let vocab = self.encoder.vocab();
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
                return Err(EmbedError::TokenOutOfRange { index, id, vocab });
            }
        }
        let max_elems = (self.ctx.max_binding_bytes() / 4) as usize;
        let lens: Vec<usize> = inputs.iter().map(Vec::len).collect();
        let mut out: Vec<(usize, Embedding)> = Vec::with_capacity(inputs.len());
        for batch in batching::batches(&lens, self.encoder.widest_row(), max_elems) {
            let ids: Vec<Vec<u32>> = batch.iter().map(|&i| inputs[i].clone()).collect();
            out.extend(batch.into_iter().zip(self.run_batch(&ids).await?));
        }
        // Back in the inputs' order (the batches run shortest first).
        out.sort_unstable_by_key(|&(i, _)| i);
        Ok(out.into_iter().map(|(_, e)| e).collect())
    }

    async fn run_batch(&self, inputs: &[Vec<u32>]) -> Result<Vec<Embedding>, EmbedError> {
        let ctx = &*self.ctx;
        let seqs = inputs.len();
        let mut rec = Recorder::new(ctx);
        let pooling = self.sentence.pooling;
        let mut rows = match &self.encoder {
            Encoder::Bert { cfg, weights } => {
                let batch = Batch::new(ctx, cfg, inputs)?;
                record_forward(&mut rec, cfg, weights, &batch, pooling)?;
                batch.pooled
            }
            Encoder::Gemma { cfg, weights } => {
                let batch = GemmaBatch::new(ctx, cfg, inputs)?;
                record_gemma(&mut rec, cfg, weights, &batch, pooling)?;
                batch.pooled
            }
        };
        // sentence-transformers' Dense modules, on the pooled rows.
        for (i, layer) in self.dense.iter().enumerate() {
            let out =
                ctx.create_storage(&format!("dense {i} out"), (seqs * layer.w.rows * 4) as u64)?;
            linear(
                &mut rec,
                &Linear {
                    x: &rows,
                    x_q8: None,
                    x_offset: 0,
                    norm: None,
                    w: &layer.w,
                    bias: layer.bias.as_ref().map(|b| (&**b, 0)),
                    out: &out,
                    out_offset: 0,
                    out_stride: layer.w.rows,
                    epilogue: Epilogue::Store,
                    m: seqs,
                    as_decode: false,
                },
                // Read only by normalising projections.
                &LinearScratch {
                    normed: &rows,
                    ranges: None,
                },
            )?;
            rows = out;
        }
        rec.submit().await?;
        let dim = self.dim();
        let pooled = ctx.read_f32(&rows, 0, seqs * dim).await?;
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
