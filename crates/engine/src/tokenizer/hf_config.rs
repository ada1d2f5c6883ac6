//! A Hugging Face `tokenizer_config.json`: the chat template and what the
//! tokenizer adds around a text (BOS/EOS), which `tokenizer.json` alone may
//! not say. Where a key is absent, what `tokenizer.json` says stands.

use serde_json::Value;

use super::{Tokenizer, TokenizerError};

fn json_err(msg: String) -> TokenizerError {
    TokenizerError::Json(format!("tokenizer_config.json: {msg}"))
}

/// What `tokenizer_config.json` adds to a tokenizer.
#[derive(Debug, Default)]
pub struct HfTokenizerConfig {
    pub bos: Option<String>,
    pub eos: Option<String>,
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    /// The Jinja source of the default chat template.
    pub chat_template: Option<String>,
}

/// A special token's text: a string or an `AddedToken` object's `content`.
fn token_text(v: &Value, key: &str) -> Result<Option<String>, TokenizerError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Object(o) => match o.get("content") {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            _ => Err(json_err(format!("`{key}` has no string \"content\""))),
        },
        other => Err(json_err(format!("`{key}` is {other}, not a token"))),
    }
}

impl HfTokenizerConfig {
    pub fn parse(json: &[u8]) -> Result<HfTokenizerConfig, TokenizerError> {
        let doc: Value =
            serde_json::from_slice(json).map_err(|e| json_err(format!("not JSON: {e}")))?;
        let obj = doc
            .as_object()
            .ok_or_else(|| json_err("not a JSON object".into()))?;
        let null = Value::Null;
        let field = |k: &str| obj.get(k).unwrap_or(&null);
        let flag = |k: &str| match field(k) {
            Value::Null => Ok(None),
            Value::Bool(b) => Ok(Some(*b)),
            other => Err(json_err(format!("`{k}` is {other}, not true or false"))),
        };
        Ok(HfTokenizerConfig {
            bos: token_text(field("bos_token"), "bos_token")?,
            eos: token_text(field("eos_token"), "eos_token")?,
            add_bos: flag("add_bos_token")?,
            add_eos: flag("add_eos_token")?,
            chat_template: chat_template(field("chat_template"))?,
        })
    }

    /// `tokenizer` with this config's special tokens and flags.
    pub fn apply(&self, tokenizer: Tokenizer) -> Result<Tokenizer, TokenizerError> {
        let id = |text: &Option<String>, key: &str, current: Option<u32>| match text {
            None => Ok(current),
            Some(t) => tokenizer.token_id(t).map(Some).ok_or_else(|| {
                json_err(format!(
                    "`{key}` {t:?} is not in the tokenizer's vocabulary"
                ))
            }),
        };
        let bos = id(&self.bos, "bos_token", tokenizer.bos_id())?;
        let eos = id(&self.eos, "eos_token", tokenizer.eos_id())?;
        let add_bos = self.add_bos.unwrap_or(tokenizer.add_bos());
        let add_eos = self.add_eos.unwrap_or(tokenizer.add_eos());
        tokenizer.with_special_ids(bos, eos, add_bos, add_eos)
    }
}

/// A template string, or the one named "default" of a list of named templates.
fn chat_template(v: &Value) -> Result<Option<String>, TokenizerError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Array(items) => Ok(items.iter().find_map(|item| {
            (item.get("name")?.as_str()? == "default")
                .then(|| item.get("template")?.as_str().map(str::to_owned))
                .flatten()
        })),
        other => Err(json_err(format!("`chat_template` is {other}"))),
    }
}
