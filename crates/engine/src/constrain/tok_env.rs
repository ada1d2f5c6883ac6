//! llguidance's view of the vocabulary: a trie of every token's exact bytes,
//! and a tokenizer for the bytes a grammar forces.

use toktrie::{TokRxInfo, TokTrie, TokenId, TokenizerEnv};

use super::ConstrainError;
use crate::tokenizer::Tokenizer;

/// The bytes llguidance matches token `id` against: what decoding writes for
/// it (byte-level `Ġ` as a space, SentencePiece `▁` as a space, `<0x0A>` as
/// byte 10), except that control tokens (`<|im_end|>`, BOS, EOS) are
/// llguidance's special form, `0xFF` then their text, which no grammar text
/// matches (0xFF never occurs in UTF-8). Ids outside the vocabulary and
/// unused tokens have no bytes: the trie never allows them.
pub fn grammar_token_bytes(tokenizer: &Tokenizer, id: u32) -> Vec<u8> {
    let special = tokenizer.is_control(id) || tokenizer.is_stop(id);
    match tokenizer.token_bytes(id, false) {
        Ok(bytes) if special && !bytes.is_empty() => {
            let mut marked = Vec::with_capacity(bytes.len() + 1);
            marked.push(TokTrie::SPECIAL_TOKEN_MARKER);
            marked.extend_from_slice(&bytes);
            marked
        }
        Ok(bytes) => bytes,
        Err(_) => Vec::new(),
    }
}

pub(super) struct WickTokEnv {
    trie: TokTrie,
    tokenizer: Tokenizer,
}

impl WickTokEnv {
    pub fn new(tokenizer: &Tokenizer, logits_vocab: usize) -> Result<WickTokEnv, ConstrainError> {
        let n = logits_vocab.max(tokenizer.vocab_size());
        let n32 =
            u32::try_from(n).map_err(|_| ConstrainError::Vocabulary(format!("{n} tokens")))?;
        let stops = tokenizer.stop_ids();
        let &first_stop = stops.first().ok_or(ConstrainError::NoEndToken)?;
        let words: Vec<Vec<u8>> = (0..n32)
            .map(|id| grammar_token_bytes(tokenizer, id))
            .collect();
        let info = TokRxInfo {
            tok_bos: tokenizer.bos_id(),
            tok_pad: tokenizer.pad_id(),
            ..TokRxInfo::new(n32, tokenizer.eos_id().unwrap_or(first_stop))
        };
        // Any end-of-generation token ends a constrained output (a chat
        // model's <|im_end|> as well as the file's EOS); the EOS comes first.
        let mut eos = vec![info.tok_eos];
        eos.extend(stops.iter().filter(|&&s| s != info.tok_eos));
        // The trie's own checks panic on a malformed vocabulary (e.g. a token
        // too long for it): contain that as a typed error.
        let trie = std::panic::catch_unwind(|| TokTrie::from(&info, &words).with_eos_tokens(&eos))
            .map_err(|_| {
                ConstrainError::Vocabulary("the vocabulary is not a valid token trie".into())
            })?;
        Ok(WickTokEnv {
            trie,
            tokenizer: tokenizer.clone(),
        })
    }
}

impl TokenizerEnv for WickTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    /// The model's own tokenization of forced bytes, so forced tokens are
    /// the ones the model would have seen for that text. Where that is not
    /// possible (bytes that are not UTF-8, an encoder that adds a leading
    /// space), the trie's greedy longest-match tokenization, which is still
    /// exactly those bytes.
    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        let valid = match std::str::from_utf8(s) {
            Ok(text) => text.len(),
            Err(e) => e.valid_up_to(),
        };
        let text = std::str::from_utf8(&s[..valid]).unwrap_or_default();
        let mut ids = match self.tokenizer.encode(text, false, false) {
            Ok(ids) if self.trie.decode_raw(&ids) == text.as_bytes() => ids,
            _ => self.trie.greedy_tokenize(text.as_bytes()),
        };
        ids.extend(self.trie.greedy_tokenize(&s[valid..]));
        ids
    }
}
