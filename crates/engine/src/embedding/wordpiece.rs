//! A BERT WordPiece tokenizer from GGUF metadata (`tokenizer.ggml.model =
//! "bert"`), built as the Hugging Face `tokenizers` crate runs BERT uncased:
//! clean text, split CJK characters, lowercase and strip accents, split on
//! whitespace and punctuation, longest-match WordPiece with `##`
//! continuations, then `[CLS] ... [SEP]`.
//!
//! llama.cpp's converter rewrites the vocabulary: a piece that starts a word
//! gets a "\u{2581}" in front and a continuation loses its `##`; bracketed
//! special tokens stay. That is undone here, which gives back the original
//! vocabulary id for id (checked on nomic-embed-text-v1.5 against
//! bert-base-uncased's). The tokenizer is described as tokenizer.json and
//! loaded through `Tokenizer::from_bytes`, the same path `load_hf` takes.

use serde_json::{json, Map, Value};

use super::error::EmbedError;
use crate::format::gguf::GgufFile;
use crate::model::ModelError;

const MARK: char = '\u{2581}';

fn meta_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Tokenizer(e.to_string())
}

/// The GGUF's piece as the original WordPiece vocabulary spells it.
fn original_piece(piece: &str) -> String {
    if let Some(word_start) = piece.strip_prefix(MARK) {
        word_start.to_string()
    } else if piece.starts_with('[') && piece.ends_with(']') {
        piece.to_string()
    } else {
        format!("##{piece}")
    }
}

/// The tokenizer, and its vocabulary size.
pub fn from_gguf(file: &GgufFile) -> Result<(tokenizers::Tokenizer, usize), EmbedError> {
    let model = file
        .meta_str_opt("tokenizer.ggml.model")
        .map_err(ModelError::from)?
        .unwrap_or("(none)");
    if model != "bert" {
        return Err(meta_err(format!(
            "tokenizer.ggml.model '{model}' (an embedding GGUF needs 'bert', WordPiece)"
        )));
    }
    let tokens = file
        .meta_str_array("tokenizer.ggml.tokens")
        .map_err(ModelError::from)?;
    let n = tokens.len();
    let id = |what: &str| -> Result<u32, EmbedError> {
        let key = format!("tokenizer.ggml.{what}_token_id");
        let v = file
            .meta_u64_opt(&key)
            .map_err(meta_err)?
            .ok_or_else(|| meta_err(format!("GGUF metadata has no {key}")))?;
        if v as usize >= n {
            return Err(meta_err(format!("{key} {v} is outside the {n} tokens")));
        }
        Ok(v as u32)
    };
    // [CLS] is the GGUF's BOS, [SEP] its EOS (llama.cpp's converter).
    let (cls, sep, unk) = (id("bos")?, id("eos")?, id("unknown")?);
    let mut vocab = Map::with_capacity(n);
    let mut pieces = Vec::with_capacity(n);
    for (i, piece) in tokens.iter().enumerate() {
        let p = original_piece(piece);
        if vocab.insert(p.clone(), json!(i)).is_some() {
            return Err(meta_err(format!(
                "token {i} '{piece}' repeats an earlier piece"
            )));
        }
        pieces.push(p);
    }
    // Control tokens (type 3) are specials: kept whole when they occur in
    // text, as tokenizer.json's added tokens are.
    let types = file
        .meta_i64_array_opt("tokenizer.ggml.token_type")
        .map_err(ModelError::from)?;
    let added: Vec<Value> = pieces
        .iter()
        .enumerate()
        .filter(|&(i, _)| {
            types
                .as_ref()
                .map_or([cls, sep, unk].contains(&(i as u32)), |t| {
                    t.get(i) == Some(&3)
                })
        })
        .map(|(i, p)| {
            json!({"id": i, "content": p, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let (cls_s, sep_s) = (&pieces[cls as usize], &pieces[sep as usize]);
    let desc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true,
                       "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": [sep_s, sep], "cls": [cls_s, cls]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": pieces[unk as usize],
                  "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                  "vocab": vocab},
    });
    let bytes = serde_json::to_vec(&desc).map_err(meta_err)?;
    let tok = tokenizers::Tokenizer::from_bytes(bytes).map_err(meta_err)?;
    Ok((tok, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_come_back_as_wordpiece_spells_them() {
        assert_eq!(original_piece("\u{2581}the"), "the");
        assert_eq!(original_piece("ing"), "##ing");
        assert_eq!(original_piece("[CLS]"), "[CLS]");
        assert_eq!(original_piece("\u{2581}["), "[");
        assert_eq!(original_piece("]"), "##]");
    }
}
