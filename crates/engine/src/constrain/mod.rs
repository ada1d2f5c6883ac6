//! Constrained decoding's glue to llguidance: a grammar (JSON schema, regular
//! expression or Lark) compiled against the model's own vocabulary, giving
//! per step the bitmask of tokens that keep the output inside the grammar,
//! the tokens it forces, and when it is done.
//!
//! `GrammarCompiler` is built once per model (its token trie covers the whole
//! vocabulary); each generation gets a fresh `Constraint` from it. The
//! sampling itself stays on the GPU: `pipeline::constrained` uploads the mask
//! each step (`kernels::sample`).

mod constraint;
mod tok_env;

pub use constraint::Constraint;
pub use tok_env::grammar_token_bytes;

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::ParserFactory;

use crate::tokenizer::Tokenizer;
use tok_env::WickTokEnv;

/// What output must match.
#[derive(Clone, Debug, PartialEq)]
pub enum Grammar {
    /// A JSON schema (OpenAI's `response_format: json_schema`).
    JsonSchema(serde_json::Value),
    /// Any JSON object (`response_format: json_object`).
    JsonObject,
    /// A regular expression the whole output must match (Rust `regex` syntax).
    Regex(String),
    /// A grammar in llguidance's Lark syntax (with `%json`, `{m,n}` repeats).
    Lark(String),
}

impl Grammar {
    /// The grammar's kind, as errors name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Grammar::JsonSchema(_) => "JSON schema",
            Grammar::JsonObject => "JSON object",
            Grammar::Regex(_) => "regular expression",
            Grammar::Lark(_) => "Lark grammar",
        }
    }

    fn to_llguidance(&self) -> TopLevelGrammar {
        match self {
            Grammar::JsonSchema(schema) => TopLevelGrammar::from_json_schema(compact(schema)),
            Grammar::JsonObject => {
                TopLevelGrammar::from_json_schema(compact(&serde_json::json!({"type": "object"})))
            }
            Grammar::Regex(rx) => TopLevelGrammar::from_regex(rx),
            Grammar::Lark(lark) => TopLevelGrammar::from_lark(lark.clone()),
        }
    }
}

/// The schema with llguidance's layout options set to one fixed layout
/// (`{"a": 1, "b": [2, 3]}`: no free whitespace) unless its `x-guidance` key
/// chooses one. Free whitespace lets a small model emit spaces and newlines
/// until `max_tokens` cuts the JSON short; a fixed layout also lets the
/// separators be forced rather than sampled.
pub(crate) fn compact(schema: &serde_json::Value) -> serde_json::Value {
    let mut schema = schema.clone();
    if let Some(obj) = schema.as_object_mut() {
        obj.entry("x-guidance").or_insert_with(|| {
            serde_json::json!({
                "whitespace_flexible": false,
                "item_separator": ", ",
                "key_separator": ": ",
            })
        });
    }
    schema
}

#[derive(Debug, thiserror::Error)]
pub enum ConstrainError {
    #[error("the tokenizer has no end-of-generation token; a constrained generation needs one to end on")]
    NoEndToken,
    #[error("building the grammar's token trie: {0}")]
    Vocabulary(String),
    #[error("the {kind} does not compile: {message}")]
    Compile { kind: &'static str, message: String },
    #[error("the grammar matcher failed after {tokens} generated tokens: {message}")]
    Matcher { tokens: usize, message: String },
}

/// Compiles grammars against one model's vocabulary.
pub struct GrammarCompiler {
    factory: ParserFactory,
    /// Entries in the model's logits row: the mask's length in bits.
    logits_vocab: usize,
}

impl GrammarCompiler {
    /// Builds the token trie from `tokenizer`'s vocabulary (control tokens
    /// marked special, so grammar text never matches them; the end-of-
    /// generation tokens as the grammar's EOS). `logits_vocab`: entries in the
    /// model's logits row, which may exceed the tokenizer's vocabulary (ids
    /// without a token are never allowed).
    pub fn new(
        tokenizer: &Tokenizer,
        logits_vocab: usize,
    ) -> Result<GrammarCompiler, ConstrainError> {
        let env = WickTokEnv::new(tokenizer, logits_vocab)?;
        let env: toktrie::TokEnv = Arc::new(env);
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| ConstrainError::Vocabulary(e.to_string()))?;
        // Warnings go into errors and results, not to a process's stderr.
        factory.quiet();
        Ok(GrammarCompiler {
            factory,
            logits_vocab,
        })
    }

    /// A fresh constraint for one generation. A grammar llguidance cannot
    /// compile (an unsupported schema keyword, a bad regex, a Lark syntax
    /// error) is `ConstrainError::Compile` with its message.
    pub fn compile(&self, grammar: &Grammar) -> Result<Constraint, ConstrainError> {
        let parser = self
            .factory
            .create_parser(grammar.to_llguidance())
            .map_err(|e| ConstrainError::Compile {
                kind: grammar.kind(),
                message: e.to_string(),
            })?;
        Ok(Constraint::new(parser, self.logits_vocab))
    }
}
