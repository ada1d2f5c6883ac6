//! The vocabulary both sources (GGUF metadata, tokenizer.json) reduce to:
//! token texts, llama.cpp-style token attributes, special ids, and how a
//! token turns back into bytes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::TokenizerError;

/// Token attributes, as llama.cpp keeps them (`llama_token_attr`): a bit set.
pub(crate) mod attr {
    pub const UNDEFINED: u16 = 0;
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    /// Special-token matching eats ASCII whitespace left / right of the token.
    pub const LSTRIP: u16 = 1 << 7;
    pub const RSTRIP: u16 = 1 << 8;

    /// GGUF `tokenizer.ggml.token_type` value → attribute.
    pub fn from_gguf_type(t: i64) -> u16 {
        match t {
            1 => NORMAL,
            2 => UNKNOWN,
            3 => CONTROL,
            4 => USER_DEFINED,
            5 => UNUSED,
            6 => BYTE,
            _ => UNDEFINED,
        }
    }
}

/// How a normal token's text maps back to bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PieceStyle {
    /// GPT-2 byte-level BPE: each char of the token stands for one byte.
    ByteLevel,
    /// SentencePiece: `▁` stands for a space; `<0xNN>` tokens are raw bytes.
    SentencePiece,
}

/// Texts llama.cpp treats as end-of-generation wherever they are in a vocab
/// (its `special_eog_ids` detection; `tokenizer.ggml.*_token_id` keys add more).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<|plamo:eos|>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Fill-in-the-middle pad / repo / file-separator tokens: llama.cpp also stops on these.
const FIM_EOG_TEXTS: &[&str] = &[
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "[PAD]",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
];

/// Other texts llama.cpp forces to control type (FIM prefix / suffix / middle).
const FIM_CONTROL_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];

#[derive(Clone, Debug)]
pub(crate) struct Vocab {
    pub tokens: Vec<String>,
    pub attrs: Vec<u16>,
    /// Text → id; the first id wins where a text repeats.
    pub ids: HashMap<String, u32, BuildHasherDefault<FxHasher>>,
    pub style: PieceStyle,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    /// SentencePiece: a space goes before text at the start and after each special token.
    pub add_space_prefix: bool,
    /// SentencePiece from GGUF: spaces become `▁` before the model sees the text.
    pub escape_whitespace: bool,
    /// Decoding drops one leading space from the first piece that has text.
    pub strip_leading_space: bool,
    /// An id past the vocab that the text model emits for a character it has
    /// no token for; encoding drops it.
    pub barrier: Option<u32>,
    /// End-of-generation ids, sorted.
    pub eog: Vec<u32>,
    /// Control, user-defined and unknown tokens, longest text first: the order
    /// in which special-token matching splits the input.
    pub special_cache: Vec<u32>,
}

impl Vocab {
    /// A vocab of `tokens` with every attribute NORMAL and nothing else set.
    pub fn new(tokens: Vec<String>, style: PieceStyle) -> Vocab {
        let mut ids = HashMap::with_capacity_and_hasher(tokens.len(), Default::default());
        for (i, t) in tokens.iter().enumerate() {
            ids.entry(t.clone()).or_insert(i as u32);
        }
        Vocab {
            attrs: vec![attr::NORMAL; tokens.len()],
            tokens,
            ids,
            style,
            bos: None,
            eos: None,
            eot: None,
            eom: None,
            unk: None,
            pad: None,
            add_bos: false,
            add_eos: false,
            add_space_prefix: false,
            escape_whitespace: false,
            strip_leading_space: false,
            barrier: None,
            eog: Vec::new(),
            special_cache: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    pub fn check_id(&self, id: u32) -> Result<usize, TokenizerError> {
        let i = id as usize;
        if i < self.tokens.len() {
            Ok(i)
        } else {
            Err(TokenizerError::TokenOutOfRange {
                id,
                vocab: self.tokens.len(),
            })
        }
    }

    /// What llama.cpp derives after loading: end-of-generation ids (forcing
    /// those tokens to control type), the special-token match order, and a
    /// check that tokens the model says to add exist.
    pub fn finish(&mut self, fim_ids: &[Option<u32>]) -> Result<(), TokenizerError> {
        let mut eog: Vec<u32> = Vec::new();
        for (i, text) in self.tokens.iter().enumerate() {
            let t = text.as_str();
            let is_eog = EOG_TEXTS.contains(&t) || FIM_EOG_TEXTS.contains(&t);
            if is_eog || FIM_CONTROL_TEXTS.contains(&t) {
                self.attrs[i] |= attr::CONTROL;
            }
            if is_eog {
                eog.push(i as u32);
            }
            // gpt-oss renders these even when special tokens are hidden.
            if matches!(
                t,
                "<|channel|>" | "<|message|>" | "<|start|>" | "<|constrain|>"
            ) {
                self.attrs[i] = attr::USER_DEFINED;
            }
        }
        eog.extend(self.eos.iter().chain(&self.eot).chain(&self.eom));
        eog.extend(fim_ids.iter().flatten());
        eog.sort_unstable();
        eog.dedup();
        // Harmony-style vocabs (<|return|> and <|call|>): <|end|> ends a message, not generation.
        let has = |s: &str| eog.iter().any(|&i| self.tokens[i as usize] == s);
        let harmony =
            (has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"));
        let normal_s = has("<|tool_response>") || has("<|plamo:eos|>");
        if harmony {
            if let Some(end) = self.id("<|end|>") {
                eog.retain(|&i| i != end);
                self.attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        if normal_s {
            if let Some(s) = self.id("</s>") {
                eog.retain(|&i| i != s);
                self.attrs[s as usize] = attr::NORMAL;
            }
        }
        self.eog = eog;

        let special = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
        let mut cache: Vec<u32> = (0..self.tokens.len() as u32)
            .filter(|&i| {
                self.attrs[i as usize] & special != 0 && !self.tokens[i as usize].is_empty()
            })
            .collect();
        cache.sort_by_key(|&i| std::cmp::Reverse(self.tokens[i as usize].len()));
        self.special_cache = cache;

        if self.add_bos && self.bos.is_none() {
            return Err(TokenizerError::MissingMetadata(
                "tokenizer.ggml.bos_token_id (the vocab asks for a BOS token)".into(),
            ));
        }
        if self.add_eos && self.eos.is_none() {
            return Err(TokenizerError::MissingMetadata(
                "tokenizer.ggml.eos_token_id (the vocab asks for an EOS token)".into(),
            ));
        }
        Ok(())
    }

    /// Appends token `id`'s bytes, as llama.cpp's `token_to_piece`: control and
    /// unknown tokens only when `skip_special` is false, user-defined tokens as
    /// their text, unused tokens as nothing.
    pub fn append_piece(
        &self,
        id: u32,
        skip_special: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), TokenizerError> {
        let i = self.check_id(id)?;
        let a = self.attrs[i];
        let text = &self.tokens[i];
        if a & (attr::CONTROL | attr::UNKNOWN) != 0 {
            if !skip_special {
                out.extend_from_slice(text.as_bytes());
            }
        } else if a & attr::USER_DEFINED != 0 {
            out.extend_from_slice(text.as_bytes());
        } else if a & attr::NORMAL != 0 {
            match self.style {
                PieceStyle::ByteLevel => {
                    for c in text.chars() {
                        match byte_level_byte(c) {
                            Some(b) => out.push(b),
                            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                        }
                    }
                }
                PieceStyle::SentencePiece => {
                    for c in text.chars() {
                        let c = if c == '\u{2581}' { ' ' } else { c };
                        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    }
                }
            }
        } else if a & attr::BYTE != 0 {
            if let Some(b) = byte_token_value(text) {
                out.push(b);
            }
        }
        Ok(())
    }
}

/// The Fx hash (rustc's): much faster than SipHash for the millions of
/// substring lookups building a vocab takes. The keys are the model's own
/// tokens, so there is nothing for an adversary to collide with.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes([
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
            ]));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ ((rest.len() as u64) << 56));
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The byte a GPT-2 byte-level character stands for. Printable bytes
/// (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for themselves; the other 68 bytes, in
/// order, were moved to U+0100..U+0143.
pub(crate) fn byte_level_byte(c: char) -> Option<u8> {
    let c = c as u32;
    match c {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(c as u8),
        0x100..=0x120 => Some((c - 0x100) as u8),
        0x121..=0x142 => Some((c - 0x121 + 0x7F) as u8),
        0x143 => Some(0xAD),
        _ => None,
    }
}

/// `<0xNN>` → NN.
pub(crate) fn byte_token_value(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_table_is_a_bijection() {
        let mut seen = [false; 256];
        for c in (0u32..0x200).filter_map(char::from_u32) {
            if let Some(b) = byte_level_byte(c) {
                assert!(!seen[b as usize], "byte {b} twice");
                seen[b as usize] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(byte_level_byte('Ġ'), Some(b' '));
        assert_eq!(byte_level_byte('Ċ'), Some(b'\n'));
    }

    #[test]
    fn byte_tokens() {
        assert_eq!(byte_token_value("<0x0A>"), Some(10));
        assert_eq!(byte_token_value("<0xFF>"), Some(255));
        assert_eq!(byte_token_value("<0x0A"), None);
        assert_eq!(byte_token_value("<0xZZ>"), None);
    }
}
