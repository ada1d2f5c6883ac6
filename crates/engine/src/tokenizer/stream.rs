//! Incremental decoding for streamed generation.

use super::{Tokenizer, TokenizerError};

/// Turns token ids into text as they arrive. A UTF-8 character split across
/// tokens (byte-level BPE pieces, SentencePiece `<0xNN>` byte tokens) is held
/// back until it is complete, so every returned string is whole characters.
/// The outputs of all `push` calls plus `finish` equal
/// [`Tokenizer::decode`] of all the ids: bytes that can never become a valid
/// character are replaced by U+FFFD exactly where `decode` replaces them.
#[derive(Debug)]
pub struct StreamDecoder<'t> {
    tok: &'t Tokenizer,
    state: StreamState,
}

impl<'t> StreamDecoder<'t> {
    pub fn new(tok: &'t Tokenizer, skip_special: bool) -> Self {
        StreamDecoder {
            tok,
            state: StreamState::new(tok, skip_special),
        }
    }

    /// Adds one token; returns the text that is now complete (maybe empty).
    pub fn push(&mut self, id: u32) -> Result<String, TokenizerError> {
        self.state.push(self.tok, id)
    }

    /// Ends the stream: returns whatever is held back (an unfinished character
    /// becomes U+FFFD) and starts over.
    pub fn finish(&mut self) -> Result<String, TokenizerError> {
        self.state.finish(self.tok)
    }

    /// Bytes held back waiting for the rest of a character.
    pub fn pending_len(&self) -> usize {
        self.state.pending.len()
    }
}

/// `StreamDecoder`'s state without the borrow of its tokenizer, which each
/// call takes instead: for a decoder that lives inside an object owned
/// elsewhere (a generation held by JavaScript). The same decoding: O(1) work
/// per token, never re-decoding what came before.
#[derive(Debug, Clone)]
pub struct StreamState {
    skip_special: bool,
    /// Bytes not yet returned: the start of an unfinished character.
    pending: Vec<u8>,
    /// The SentencePiece leading space is still to be dropped.
    strip: bool,
}

impl StreamState {
    pub fn new(tok: &Tokenizer, skip_special: bool) -> Self {
        StreamState {
            skip_special,
            pending: Vec::new(),
            strip: tok.vocab.strip_leading_space,
        }
    }

    /// As `StreamDecoder::push`, with `tok` the tokenizer `new` was given.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String, TokenizerError> {
        tok.append_piece(id, self.skip_special, &mut self.strip, &mut self.pending)?;
        Ok(take_complete(&mut self.pending))
    }

    /// As `StreamDecoder::finish`.
    pub fn finish(&mut self, tok: &Tokenizer) -> Result<String, TokenizerError> {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        self.strip = tok.vocab.strip_leading_space;
        Ok(rest)
    }
}

/// Removes and returns the longest prefix of `buf` that is settled: valid
/// UTF-8, with each invalid sequence replaced by U+FFFD the way
/// `String::from_utf8_lossy` replaces it. A truncated character at the end stays.
fn take_complete(buf: &mut Vec<u8>) -> String {
    let mut out = String::new();
    let mut done = 0;
    loop {
        match std::str::from_utf8(&buf[done..]) {
            Ok(s) => {
                out.push_str(s);
                done = buf.len();
                break;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                // Checked valid just above.
                out.push_str(std::str::from_utf8(&buf[done..done + valid]).unwrap_or_default());
                done += valid;
                match e.error_len() {
                    Some(bad) => {
                        out.push('\u{FFFD}');
                        done += bad;
                    }
                    None => break, // an unfinished character: wait for more
                }
            }
        }
    }
    buf.drain(..done);
    out
}

#[cfg(test)]
mod tests {
    use super::take_complete;

    #[test]
    fn holds_back_an_unfinished_character() {
        let euro = "€".as_bytes(); // e2 82 ac
        let mut buf = b"a".to_vec();
        buf.extend_from_slice(&euro[..2]);
        assert_eq!(take_complete(&mut buf), "a");
        assert_eq!(buf, &euro[..2]);
        buf.push(euro[2]);
        assert_eq!(take_complete(&mut buf), "€");
        assert!(buf.is_empty());
    }

    #[test]
    fn replaces_invalid_bytes_like_lossy_decoding() {
        let bytes: &[u8] = b"x\xff\xe2\x82y\xf0\x9f";
        let mut buf = bytes.to_vec();
        let mut got = take_complete(&mut buf);
        got.push_str(&String::from_utf8_lossy(&buf));
        assert_eq!(got, String::from_utf8_lossy(bytes));
    }
}
