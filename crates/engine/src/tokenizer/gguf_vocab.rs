//! A tokenizer from GGUF `tokenizer.ggml.*` metadata, read as llama.cpp reads
//! it (`llama_vocab::impl::load`): defaults per tokenizer model, then keys.
//!
//! - `gpt2`: byte-level BPE. Merges and ranks come from the file; the
//!   pre-tokenizer regexes from `tokenizer.ggml.pre` (see `pretok`).
//! - `llama`: SentencePiece-style. llama.cpp merges adjacent pieces, highest
//!   token score first, and falls back to `<0xNN>` byte tokens. That is BPE
//!   with merges ranked by the merged token's score, which is how the HF
//!   `tokenizers` BPE model is fed here (as HF's own SentencePiece converter does).

use tokenizers::models::bpe::{Vocab as BpeVocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{PreTokenizerWrapper, SplitDelimiterBehavior};

use super::pretok;
use super::vocab::{attr, PieceStyle, Vocab};
use super::TokenizerError;
use crate::format::gguf::{GgufFile, MetaValue};

const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";

fn bad(key: &str, msg: impl Into<String>) -> TokenizerError {
    TokenizerError::BadMetadata {
        key: key.to_string(),
        msg: msg.into(),
    }
}

fn array<'f>(file: &'f GgufFile, key: &str) -> Result<Option<&'f [MetaValue]>, TokenizerError> {
    match file.meta(key) {
        None => Ok(None),
        Some(v) => v
            .as_array()
            .map(Some)
            .ok_or_else(|| bad(key, format!("expected an array, found {}", v.type_name()))),
    }
}

fn strings(file: &GgufFile, key: &str) -> Result<Option<Vec<String>>, TokenizerError> {
    let Some(a) = array(file, key)? else {
        return Ok(None);
    };
    a.iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .map(Some)
        .ok_or_else(|| bad(key, "expected an array of strings"))
}

/// An array with at least `n` elements, each converted by `f`.
fn per_token<T>(
    file: &GgufFile,
    key: &str,
    n: usize,
    f: impl Fn(&MetaValue) -> Option<T>,
) -> Result<Option<Vec<T>>, TokenizerError> {
    let Some(a) = array(file, key)? else {
        return Ok(None);
    };
    if a.len() < n {
        return Err(bad(key, format!("{} entries for {n} tokens", a.len())));
    }
    a[..n]
        .iter()
        .map(f)
        .collect::<Option<Vec<T>>>()
        .map(Some)
        .ok_or_else(|| bad(key, "wrong element type"))
}

fn flag(file: &GgufFile, key: &str) -> Result<Option<bool>, TokenizerError> {
    match file.meta(key) {
        None => Ok(None),
        Some(v) => v
            .as_bool()
            .map(Some)
            .ok_or_else(|| bad(key, format!("expected a bool, found {}", v.type_name()))),
    }
}

/// `tokenizer.ggml.<name>_token_id`; an id outside the vocab is ignored (llama.cpp
/// warns and keeps its default).
fn token_id(file: &GgufFile, name: &str, n: usize) -> Result<Option<u32>, TokenizerError> {
    let key = format!("tokenizer.ggml.{name}_token_id");
    match file.meta(&key) {
        None => Ok(None),
        Some(v) => {
            let id = v.as_u64().ok_or_else(|| bad(&key, "expected a token id"))?;
            Ok((id < n as u64).then_some(id as u32))
        }
    }
}

pub(crate) fn load(file: &GgufFile) -> Result<(Vocab, tokenizers::Tokenizer), TokenizerError> {
    let model = file
        .meta(KEY_MODEL)
        .ok_or_else(|| TokenizerError::MissingMetadata(KEY_MODEL.into()))?
        .as_str()
        .ok_or_else(|| bad(KEY_MODEL, "expected a string"))?;
    let style = match model {
        "gpt2" => PieceStyle::ByteLevel,
        "llama" => PieceStyle::SentencePiece,
        other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
    };
    let pre_name = match file.meta(KEY_PRE) {
        None => "",
        Some(v) => v
            .as_str()
            .ok_or_else(|| bad(KEY_PRE, "expected a string"))?,
    };
    let pre = match style {
        PieceStyle::ByteLevel => Some(
            pretok::lookup(pre_name)
                .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer(pre_name.to_string()))?,
        ),
        PieceStyle::SentencePiece => None,
    };

    let mut tokens = strings(file, KEY_TOKENS)?
        .ok_or_else(|| TokenizerError::MissingMetadata(KEY_TOKENS.into()))?;
    if tokens.is_empty() {
        return Err(bad(KEY_TOKENS, "no tokens"));
    }
    for (i, t) in tokens.iter_mut().enumerate() {
        if t.is_empty() {
            *t = format!("[EMPTY_{i}]"); // as llama.cpp names them
        }
    }
    let n = tokens.len();
    let types = per_token(file, "tokenizer.ggml.token_type", n, MetaValue::as_i64)?;
    let scores = per_token(file, "tokenizer.ggml.scores", n, MetaValue::as_f32)?;

    let mut v = Vocab::new(tokens, style);
    if let Some(types) = types {
        v.attrs = types.into_iter().map(attr::from_gguf_type).collect();
    }
    let in_range = |id: u32| ((id as usize) < n).then_some(id);
    match style {
        PieceStyle::SentencePiece => {
            (v.bos, v.eos, v.unk) = (in_range(1), in_range(2), in_range(0));
            v.add_bos = true;
            v.add_space_prefix = true;
            v.escape_whitespace = true;
        }
        PieceStyle::ByteLevel => v.add_bos = pre.is_some_and(|p| p.add_bos),
    }
    let keep = |read: Option<u32>, default: Option<u32>| read.or(default);
    v.bos = keep(token_id(file, "bos", n)?, v.bos);
    v.eos = keep(token_id(file, "eos", n)?, v.eos);
    v.unk = keep(token_id(file, "unknown", n)?, v.unk);
    v.pad = token_id(file, "padding", n)?;
    v.eot = token_id(file, "eot", n)?;
    v.eom = token_id(file, "eom", n)?;
    let fim = [
        token_id(file, "fim_pad", n)?,
        token_id(file, "fim_rep", n)?,
        token_id(file, "fim_sep", n)?,
    ];
    if let Some(b) = flag(file, "tokenizer.ggml.add_bos_token")? {
        v.add_bos = b;
    }
    if let Some(b) = flag(file, "tokenizer.ggml.add_eos_token")? {
        v.add_eos = b;
    }
    if let Some(b) = flag(file, "tokenizer.ggml.add_space_prefix")? {
        v.add_space_prefix = b && style == PieceStyle::SentencePiece;
    }
    v.strip_leading_space = v.add_space_prefix;
    set_strip_attrs(file, &mut v);
    v.finish(&fim)?;

    let hf = match pre {
        Some(pre) => {
            let merges = strings(file, "tokenizer.ggml.merges")?
                .ok_or_else(|| TokenizerError::MissingMetadata("tokenizer.ggml.merges".into()))?;
            v.barrier = Some(v.len() as u32);
            byte_level_tokenizer(&v, &merges, pre)?
        }
        None => sentencepiece_tokenizer(&v, scores.as_deref())?,
    };
    Ok((v, hf))
}

/// llama.cpp's per-model whitespace stripping around special tokens.
fn set_strip_attrs(file: &GgufFile, v: &mut Vocab) {
    let get = |k: &str| {
        file.meta(k)
            .and_then(MetaValue::as_str)
            .unwrap_or("")
            .to_lowercase()
    };
    let (name, pre, arch) = (
        get("general.name"),
        get(KEY_PRE),
        get("general.architecture"),
    );
    fn set(v: &mut Vocab, text: &str, bit: u16, on: bool) {
        if let Some(id) = v.id(text) {
            let a = &mut v.attrs[id as usize];
            *a = if on { *a | bit } else { *a & !bit };
        }
    }
    if ["jina-v2-de", "jina-v2-es", "jina-v2-code"]
        .iter()
        .any(|s| pre.contains(s))
        || ["nomic-bert-moe", "jina-bert-v3"]
            .iter()
            .any(|s| arch.contains(s))
    {
        set(v, "<mask>", attr::LSTRIP, true);
    } else if name.contains("phi-3") || name.contains("phi3") {
        let special = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
        for a in v.attrs.iter_mut().filter(|a| **a & special != 0) {
            *a |= attr::RSTRIP;
        }
        set(v, "</s>", attr::RSTRIP, true);
        for t in ["<unk>", "<s>", "<|endoftext|>"] {
            set(v, t, attr::RSTRIP, false);
        }
    } else if name.contains("modern-bert") {
        set(v, "[MASK]", attr::LSTRIP, true);
    }
}

fn bpe_vocab(v: &Vocab) -> BpeVocab {
    v.ids.iter().map(|(t, &i)| (t.clone(), i)).collect()
}

fn build_err(e: impl std::fmt::Display) -> TokenizerError {
    TokenizerError::Build(e.to_string())
}

/// The regex splits of `pre`, then GPT-2's byte-to-char mapping.
pub(crate) fn byte_level_pre_tokenizer(
    pre: pretok::PreTokenizer,
) -> Result<PreTokenizerWrapper, TokenizerError> {
    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for re in pre.regexes {
        let split = Split::new(
            SplitPattern::Regex(re.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| TokenizerError::Build(format!("pre-tokenizer regex {re:?}: {e}")))?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, false, false).into());
    Ok(Sequence::new(steps).into())
}

/// The unknown-symbol text; no byte-level character or merge can produce it.
const BARRIER_TEXT: &str = "\u{0}unknown\u{0}";

fn byte_level_tokenizer(
    v: &Vocab,
    merges: &[String],
    pre: pretok::PreTokenizer,
) -> Result<tokenizers::Tokenizer, TokenizerError> {
    // "a b" → (a, b), split at the first space after the first character.
    // Merges naming texts outside the vocab could never apply; they are dropped.
    let mut joined = String::new();
    let pairs: Vec<(String, String)> = merges
        .iter()
        .filter_map(|m| {
            let (at, _) = m.char_indices().skip(1).find(|&(_, c)| c == ' ')?;
            let (a, b) = (&m[..at], &m[at + 1..]);
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let ids = &v.ids;
            let known = ids.contains_key(a) && ids.contains_key(b) && ids.contains_key(&joined);
            known.then(|| (a.to_string(), b.to_string()))
        })
        .collect();
    // A character with no token stays in the word as an unknown symbol, so
    // its neighbours do not merge across it, and is then dropped: what
    // llama.cpp does with bytes a vocab lacks (SmolLM2 has no token for 0xF1,
    // for instance). The symbol is an id past the vocab that encode removes.
    let mut vocab = bpe_vocab(v);
    vocab.insert(BARRIER_TEXT.to_string(), v.len() as u32);
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, pairs)
        .unk_token(BARRIER_TEXT.to_string())
        .fuse_unk(false)
        .ignore_merges(pre.ignore_merges)
        .build()
        .map_err(build_err)?;
    let mut hf = tokenizers::Tokenizer::new(bpe);
    hf.with_pre_tokenizer(Some(byte_level_pre_tokenizer(pre)?));
    Ok(hf)
}

/// Merges for every way a token splits into two tokens, ranked by the merged
/// token's score (highest first); ties by merged id, then left, then right id.
fn sentencepiece_tokenizer(
    v: &Vocab,
    scores: Option<&[f32]>,
) -> Result<tokenizers::Tokenizer, TokenizerError> {
    let score = |i: usize| scores.map_or(0.0, |s| s[i]);
    let mut ranked: Vec<(f32, u32, u32, u32)> = Vec::new();
    for (i, text) in v.tokens.iter().enumerate() {
        if v.id(text) != Some(i as u32) {
            continue; // a repeated text: the first id is the token
        }
        for (at, _) in text.char_indices().skip(1) {
            if let (Some(l), Some(r)) = (v.id(&text[..at]), v.id(&text[at..])) {
                ranked.push((score(i), i as u32, l, r));
            }
        }
    }
    ranked.sort_unstable_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3)))
    });
    let text = |i: u32| v.tokens[i as usize].clone();
    let merges: Vec<(String, String)> = ranked
        .iter()
        .map(|&(_, _, l, r)| (text(l), text(r)))
        .collect();
    let mut builder = BPE::builder()
        .vocab_and_merges(bpe_vocab(v), merges)
        .byte_fallback(true);
    if let Some(unk) = v.unk {
        builder = builder.unk_token(text(unk));
    }
    Ok(tokenizers::Tokenizer::new(
        builder.build().map_err(build_err)?,
    ))
}
