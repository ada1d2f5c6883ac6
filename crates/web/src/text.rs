//! Streamed text of a generation, owned (no borrow of the tokenizer kept
//! between calls, so it can live inside a JS-owned object).
//!
//! The text so far is `decode(ids)`; what was not yet returned is returned,
//! except trailing U+FFFD characters, which may be the start of a character
//! whose remaining bytes come with the next token. Lossy UTF-8 decoding is
//! stable on the prefix before an unfinished sequence, so the pieces joined
//! always equal `decode(all ids)`.

use wick::tokenizer::{Tokenizer, TokenizerError};

#[derive(Default)]
pub struct TextStream {
    ids: Vec<u32>,
    /// Bytes of the decoded text already returned.
    emitted: usize,
}

impl TextStream {
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String, TokenizerError> {
        self.ids.push(id);
        let text = tok.decode(&self.ids, true)?;
        let settled = text.trim_end_matches('\u{FFFD}').len();
        Ok(self.take(&text, settled))
    }

    /// Everything not yet returned.
    pub fn finish(&mut self, tok: &Tokenizer) -> Result<String, TokenizerError> {
        let text = tok.decode(&self.ids, true)?;
        Ok(self.take(&text, text.len()))
    }

    fn take(&mut self, text: &str, upto: usize) -> String {
        if upto <= self.emitted {
            return String::new();
        }
        let piece = text[self.emitted..upto].to_string();
        self.emitted = upto;
        piece
    }
}
