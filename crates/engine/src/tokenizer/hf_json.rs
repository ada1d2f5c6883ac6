//! A tokenizer from a Hugging Face `tokenizer.json`. Its normalizer,
//! pre-tokenizer and model run as written; its added tokens are taken out of
//! the HF pipeline and matched by this crate's special-token splitter, so that
//! both sources split special tokens the same (llama.cpp's) way. Special added
//! tokens become control tokens, the others user-defined tokens.

use serde_json::Value;

use super::vocab::{attr, byte_token_value, PieceStyle, Vocab};
use super::TokenizerError;

fn json_err(msg: impl Into<String>) -> TokenizerError {
    TokenizerError::Json(msg.into())
}

/// Whether any object in `v` has `"type": name`.
fn has_type(v: &Value, name: &str) -> bool {
    match v {
        Value::Object(m) => {
            m.get("type").and_then(Value::as_str) == Some(name)
                || m.values().any(|x| has_type(x, name))
        }
        Value::Array(a) => a.iter().any(|x| has_type(x, name)),
        _ => false,
    }
}

/// Ids of the special tokens a `TemplateProcessing` post-processor puts
/// before and after a single sequence.
fn template_ends(post: &Value) -> (Option<String>, Option<String>) {
    let Some(single) = post.get("single").and_then(Value::as_array) else {
        // A Sequence of processors: look inside each.
        if let Some(ps) = post.get("processors").and_then(Value::as_array) {
            for p in ps {
                let ends = template_ends(p);
                if ends.0.is_some() || ends.1.is_some() {
                    return ends;
                }
            }
        }
        return (None, None);
    };
    let special = |item: &Value| {
        item.get("SpecialToken")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    (
        single.first().and_then(special),
        single.last().and_then(special),
    )
}

pub(crate) fn load(json: &[u8]) -> Result<(Vocab, tokenizers::Tokenizer), TokenizerError> {
    let mut doc: Value = serde_json::from_slice(json).map_err(|e| json_err(e.to_string()))?;
    if !doc.is_object() {
        return Err(json_err("not a JSON object"));
    }
    let model_type = doc
        .pointer("/model/type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if model_type != "BPE" && model_type != "Unigram" {
        return Err(TokenizerError::UnsupportedModel(format!(
            "tokenizer.json model {model_type:?}"
        )));
    }
    let added = doc
        .get_mut("added_tokens")
        .map(Value::take)
        .unwrap_or(Value::Null);
    let post = doc
        .get_mut("post_processor")
        .map(Value::take)
        .unwrap_or(Value::Null);
    doc["added_tokens"] = Value::Array(Vec::new());
    let byte_level =
        has_type(&doc["decoder"], "ByteLevel") || has_type(&doc["pre_tokenizer"], "ByteLevel");
    let prepends = has_type(&doc["normalizer"], "Prepend")
        || doc["pre_tokenizer"]
            .to_string()
            .contains("\"prepend_scheme\":\"always\"")
        || doc["pre_tokenizer"]
            .to_string()
            .contains("\"prepend_scheme\":\"first\"");
    let byte_fallback = doc.pointer("/model/byte_fallback").and_then(Value::as_bool) == Some(true);

    check_bpe_merges(&doc)?;
    let bytes = serde_json::to_vec(&doc).map_err(|e| json_err(e.to_string()))?;
    let hf = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| json_err(e.to_string()))?;

    // Token table: the model's vocab, then the added tokens over it.
    let mut entries: Vec<(u32, String, u16)> = hf
        .get_vocab(false)
        .into_iter()
        .map(|(t, i)| {
            let a = if byte_fallback && byte_token_value(&t).is_some() {
                attr::BYTE
            } else {
                attr::NORMAL
            };
            (i, t, a)
        })
        .collect();
    for t in added.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let id = t
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| json_err("added token without id"))?;
        let content = t
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| json_err("added token without content"))?;
        let special = t.get("special").and_then(Value::as_bool).unwrap_or(false);
        let id = u32::try_from(id).map_err(|_| json_err("added token id too large"))?;
        entries.push((
            id,
            content.to_string(),
            if special {
                attr::CONTROL
            } else {
                attr::USER_DEFINED
            },
        ));
    }
    // Added tokens extend the table by one entry each at most: an id past
    // that would size the table from untrusted input (2^32 entries).
    let limit = hf.get_vocab_size(false) + added.as_array().map_or(0, Vec::len);
    if let Some(&(id, ref text, _)) = entries.iter().find(|e| e.0 as usize >= limit) {
        return Err(json_err(format!(
            "token {text:?} has id {id}, past the {limit} entries of the vocabulary and added tokens"
        )));
    }
    let n = entries.iter().map(|e| e.0 as usize + 1).max().unwrap_or(0);
    if n == 0 {
        return Err(json_err("empty vocabulary"));
    }
    let mut tokens: Vec<Option<(String, u16)>> = vec![None; n];
    for (i, t, a) in entries {
        tokens[i as usize] = Some((t, a)); // an added token replaces the model's entry
    }
    let (texts, attrs): (Vec<String>, Vec<u16>) = tokens
        .into_iter()
        .enumerate()
        .map(|(i, e)| e.unwrap_or_else(|| (format!("[EMPTY_{i}]"), attr::UNDEFINED)))
        .unzip();

    let style = if byte_level {
        PieceStyle::ByteLevel
    } else {
        PieceStyle::SentencePiece
    };
    let mut v = Vocab::new(texts, style);
    v.attrs = attrs;
    v.strip_leading_space = prepends;
    let (first, last) = template_ends(&post);
    // A guess by name only counts a control (special added) token.
    let first_of = |v: &Vocab, names: &[&str]| {
        names
            .iter()
            .filter_map(|n| v.id(n))
            .find(|&i| v.attrs[i as usize] & attr::CONTROL != 0)
    };
    match first.and_then(|t| v.id(&t)) {
        Some(id) => (v.bos, v.add_bos) = (Some(id), true),
        None => {
            v.bos = first_of(
                &v,
                &[
                    "<bos>",
                    "<s>",
                    "<|begin_of_text|>",
                    "<｜begin▁of▁sentence｜>",
                ],
            )
        }
    }
    match last.and_then(|t| v.id(&t)) {
        Some(id) if single_has_sequence_before_last(&post) => (v.eos, v.add_eos) = (Some(id), true),
        _ => {
            v.eos = first_of(
                &v,
                &[
                    "<eos>",
                    "</s>",
                    "<|endoftext|>",
                    "<|end_of_text|>",
                    "<|im_end|>",
                ],
            )
        }
    }
    v.unk = doc
        .pointer("/model/unk_token")
        .and_then(Value::as_str)
        .and_then(|t| v.id(t));
    v.finish(&[])?;
    Ok((v, hf))
}

/// A template whose last item is a special token only counts as "adds EOS"
/// when the sequence comes before it (not a template of one special token).
fn single_has_sequence_before_last(post: &Value) -> bool {
    let find = |p: &Value| -> Option<bool> {
        let single = p.get("single")?.as_array()?;
        let n = single.len();
        Some(n >= 2 && single[..n - 1].iter().any(|i| i.get("Sequence").is_some()))
    };
    find(post).unwrap_or_else(|| {
        post.get("processors")
            .and_then(Value::as_array)
            .is_some_and(|ps| ps.iter().any(|p| find(p) == Some(true)))
    })
}

/// Refuses a BPE merge whose join is not a token, or whose second part does
/// not start with the `continuing_subword_prefix`. The tokenizers crate
/// panics on both while building the model (it copies the join into a
/// buffer sized by the longest token, and strips the prefix by subtraction)
/// before it would report the join missing; found by fuzzing.
fn check_bpe_merges(doc: &Value) -> Result<(), TokenizerError> {
    let model = &doc["model"];
    let (Some("BPE"), Some(vocab), Some(merges)) = (
        model["type"].as_str(),
        model["vocab"].as_object(),
        model["merges"].as_array(),
    ) else {
        // Anything else malformed is the tokenizers crate's to report.
        return Ok(());
    };
    let prefix = model["continuing_subword_prefix"].as_str().unwrap_or("");
    for merge in merges {
        let (a, b) = match merge {
            Value::String(line) if line.starts_with("#version") => continue,
            Value::String(line) => match line.split_once(' ') {
                Some(parts) => parts,
                None => continue,
            },
            Value::Array(pair) => match (pair.first().and_then(Value::as_str), pair.get(1)) {
                (Some(a), Some(Value::String(b))) => (a, b.as_str()),
                _ => continue,
            },
            _ => continue,
        };
        let Some(rest) = b.strip_prefix(prefix) else {
            return Err(json_err(format!(
                "merge {a:?} {b:?}: the second part lacks the continuing_subword_prefix {prefix:?}"
            )));
        };
        let join = format!("{a}{rest}");
        if !vocab.contains_key(&join) {
            return Err(json_err(format!(
                "merge {a:?} {b:?} makes {join:?}, which is not in the vocabulary"
            )));
        }
    }
    Ok(())
}
