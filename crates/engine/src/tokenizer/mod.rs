//! Tokenizers built from GGUF metadata (or a Hugging Face `tokenizer.json`)
//! that give llama.cpp's token ids.
//!
//! Encoding goes as in llama.cpp's `llama_vocab::tokenize`: the text is first
//! split at special tokens (longest token text first; control tokens only when
//! `parse_special`, user-defined tokens always), then each remaining piece of
//! text goes through the HF `tokenizers` BPE model: byte-level with the
//! pre-tokenizer regexes of `tokenizer.ggml.pre` for `gpt2` vocabs, or
//! SentencePiece-style (spaces → `▁`, score-ranked merges, `<0xNN>` byte
//! fallback) for `llama` vocabs.
//!
//! Decoding concatenates each token's bytes (llama.cpp's `token_to_piece`) and
//! reads them as UTF-8, invalid sequences becoming U+FFFD. Unlike llama.cpp it
//! does not "clean up" spaces before punctuation for the vocabs where llama.cpp
//! does (`gpt-2`, `llama3`, `default` ...), so `decode(encode(s)) == s`.

pub mod chat_template;
mod gguf_vocab;
pub mod hf_config;
mod hf_json;
mod jinja_python;
mod pretok;
mod stream;
#[cfg(test)]
mod tests;
mod vocab;

pub use stream::{StreamDecoder, StreamState};

use crate::format::gguf::GgufFile;
use vocab::{attr, Vocab};

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("GGUF metadata has no {0}")]
    MissingMetadata(String),
    #[error("GGUF metadata {key}: {msg}")]
    BadMetadata { key: String, msg: String },
    #[error("unsupported tokenizer model {0:?} (tokenizer.ggml.model)")]
    UnsupportedModel(String),
    #[error("unsupported pre-tokenizer {0:?} (tokenizer.ggml.pre)")]
    UnsupportedPreTokenizer(String),
    #[error("token id {id} is out of range (vocab size {vocab})")]
    TokenOutOfRange { id: u32, vocab: usize },
    #[error("building the tokenizer: {0}")]
    Build(String),
    #[error("tokenizer.json: {0}")]
    Json(String),
    #[error("encoding: {0}")]
    Encode(String),
}

/// A model's tokenizer: text to token ids and back, as llama.cpp does it.
/// Built once per model; `encode`/`decode` take `&self` and it is `Send + Sync`.
#[derive(Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    /// Encodes plain text (no special tokens in it) to ids.
    hf: tokenizers::Tokenizer,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab.len())
            .field("style", &self.vocab.style)
            .field("bos", &self.vocab.bos)
            .field("eos", &self.vocab.eos)
            .field("add_bos", &self.vocab.add_bos)
            .field("add_eos", &self.vocab.add_eos)
            .finish_non_exhaustive()
    }
}

// Models and pipelines share one tokenizer across threads (natively) and tasks.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Tokenizer>();
};

/// A piece of the input after special-token splitting.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

impl Tokenizer {
    /// From GGUF `tokenizer.ggml.*` metadata: `model` "gpt2" (byte-level BPE)
    /// or "llama" (SentencePiece-style), with tokens, token types, scores or
    /// merges, special ids and add-BOS/EOS flags.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        let (vocab, hf) = gguf_vocab::load(file)?;
        Ok(Tokenizer { vocab, hf })
    }

    /// From a Hugging Face `tokenizer.json` (BPE or Unigram model). BOS/EOS
    /// are taken from its post-processor template where it has one, else
    /// guessed from common token texts; see [`with_special_ids`](Self::with_special_ids).
    pub fn from_tokenizer_json(json: &[u8]) -> Result<Tokenizer, TokenizerError> {
        let (vocab, hf) = hf_json::load(json)?;
        Ok(Tokenizer { vocab, hf })
    }

    /// Overrides BOS/EOS and whether `encode` adds them (what a
    /// `tokenizer_config.json` says, for a tokenizer from `tokenizer.json`).
    pub fn with_special_ids(
        mut self,
        bos: Option<u32>,
        eos: Option<u32>,
        add_bos: bool,
        add_eos: bool,
    ) -> Result<Tokenizer, TokenizerError> {
        for id in bos.iter().chain(&eos) {
            self.vocab.check_id(*id)?;
        }
        let v = &mut self.vocab;
        (v.bos, v.eos, v.add_bos, v.add_eos) = (bos, eos, add_bos, add_eos);
        v.finish(&[])?;
        Ok(self)
    }

    /// Token ids for `text`. `add_special`: add BOS/EOS as the vocab says.
    /// `parse_special`: control-token text such as `<|im_start|>` becomes that
    /// token (for rendered chat templates); otherwise it is tokenized as text.
    /// User-defined tokens are matched either way, as in llama.cpp.
    pub fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let v = &self.vocab;
        let mut out = Vec::new();
        if add_special && v.add_bos {
            out.extend(v.bos);
        }
        let mut after_special = true;
        for fragment in self.split_special(text, parse_special) {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Fragment::Text(t) => {
                    let prefix = if v.add_space_prefix && after_special {
                        " "
                    } else {
                        ""
                    };
                    let mut t = format!("{prefix}{t}");
                    if v.escape_whitespace {
                        t = t.replace(' ', "\u{2581}");
                    }
                    let enc = self
                        .hf
                        .encode_fast(t.as_str(), false)
                        .map_err(|e| TokenizerError::Encode(e.to_string()))?;
                    let ids = enc.get_ids().iter().copied();
                    out.extend(ids.filter(|&id| Some(id) != v.barrier));
                    after_special = false;
                }
            }
        }
        if add_special && v.add_eos {
            out.extend(v.eos);
        }
        Ok(out)
    }

    /// Splits `text` at special tokens as llama.cpp's `tokenizer_st_partition`:
    /// for each special token, longest text first, every occurrence in every
    /// remaining text fragment, left to right.
    fn split_special<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let v = &self.vocab;
        let mut fragments = if text.is_empty() {
            vec![]
        } else {
            vec![Fragment::Text(text)]
        };
        let present = BytePairs::of(text);
        for &id in &v.special_cache {
            let a = v.attrs[id as usize];
            if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let needle = v.tokens[id as usize].as_str();
            if !present.may_contain(needle.as_bytes()) || !text.contains(needle) {
                continue;
            }
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for f in fragments {
                let Fragment::Text(mut rest) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(at) = rest.find(needle) {
                    let mut left = &rest[..at];
                    if a & attr::LSTRIP != 0 {
                        left = left.trim_end_matches(is_c_space);
                    }
                    if !left.is_empty() {
                        next.push(Fragment::Text(left));
                    }
                    next.push(Fragment::Token(id));
                    rest = &rest[at + needle.len()..];
                    if a & attr::RSTRIP != 0 {
                        rest = rest.trim_start_matches(is_c_space);
                    }
                }
                if !rest.is_empty() {
                    next.push(Fragment::Text(rest));
                }
            }
            fragments = next;
        }
        fragments
    }

    /// The text of `ids`. `skip_special`: control tokens (BOS, EOS,
    /// `<|im_end|>` ...) produce nothing; otherwise their text.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TokenizerError> {
        let mut bytes = Vec::new();
        let mut strip = self.vocab.strip_leading_space;
        for &id in ids {
            self.append_piece(id, skip_special, &mut strip, &mut bytes)?;
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Appends one token's bytes; `strip` drops a leading space from the first
    /// piece that has any bytes (SentencePiece's added space), then clears itself.
    fn append_piece(
        &self,
        id: u32,
        skip_special: bool,
        strip: &mut bool,
        out: &mut Vec<u8>,
    ) -> Result<(), TokenizerError> {
        let start = out.len();
        self.vocab.append_piece(id, skip_special, out)?;
        if *strip && out.len() > start {
            if out[start] == b' ' {
                out.remove(start);
            }
            *strip = false;
        }
        Ok(())
    }

    /// One token's bytes, as decoding writes them (no leading-space rule).
    /// A token may hold part of a UTF-8 character.
    pub fn token_bytes(&self, id: u32, skip_special: bool) -> Result<Vec<u8>, TokenizerError> {
        let mut out = Vec::new();
        self.vocab.append_piece(id, skip_special, &mut out)?;
        Ok(out)
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.vocab.bos
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.vocab.eos
    }

    pub fn pad_id(&self) -> Option<u32> {
        self.vocab.pad
    }

    /// Whether `encode(.., add_special = true, ..)` puts BOS first.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos
    }

    pub fn add_eos(&self) -> bool {
        self.vocab.add_eos
    }

    /// End-of-generation ids, sorted: EOS, `eot`/`eom` ids from metadata, and
    /// the tokens llama.cpp stops on by their text (`<|im_end|>`,
    /// `<end_of_turn>`, `<|endoftext|>`, `<|eot_id|>`, FIM pad/repo/file-sep ...).
    pub fn stop_ids(&self) -> Vec<u32> {
        self.vocab.eog.clone()
    }

    pub fn is_stop(&self, id: u32) -> bool {
        self.vocab.eog.binary_search(&id).is_ok()
    }

    /// Whether `id` is a control token (hidden by `skip_special`).
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab
            .attrs
            .get(id as usize)
            .is_some_and(|a| a & (attr::CONTROL | attr::UNKNOWN) != 0)
    }

    /// The vocabulary entry's text as stored (byte-level `Ġthe`, SentencePiece `▁the`,
    /// `<|im_start|>`); [`decode`](Self::decode) gives the text a token stands for.
    pub fn token_text(&self, id: u32) -> Option<String> {
        self.vocab.tokens.get(id as usize).cloned()
    }

    /// The id whose vocabulary entry is exactly `text` (e.g. `"<|im_end|>"`).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }
}

/// Which bytes and adjacent byte pairs occur in a text: a quick "cannot
/// contain" test before searching it for each of thousands of special tokens.
struct BytePairs {
    pairs: Vec<u64>,
    bytes: [bool; 256],
}

impl BytePairs {
    fn of(text: &str) -> BytePairs {
        let mut p = BytePairs {
            pairs: vec![0; 1 << 10],
            bytes: [false; 256],
        };
        let b = text.as_bytes();
        for &x in b {
            p.bytes[x as usize] = true;
        }
        for w in b.windows(2) {
            let k = (w[0] as usize) << 8 | w[1] as usize;
            p.pairs[k >> 6] |= 1 << (k & 63);
        }
        p
    }

    fn may_contain(&self, needle: &[u8]) -> bool {
        match needle {
            [] => false,
            [x] => self.bytes[*x as usize],
            [x, y, ..] => {
                let k = (*x as usize) << 8 | *y as usize;
                self.pairs[k >> 6] & (1 << (k & 63)) != 0
            }
        }
    }
}

/// C's `isspace` in the "C" locale, which llama.cpp's strip attributes use.
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r')
}
