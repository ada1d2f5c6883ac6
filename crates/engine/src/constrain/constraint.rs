//! One generation's grammar state: the allowed-token mask for the next step,
//! the tokens the grammar forces, and whether it is finished.

use llguidance::{Matcher, TokenParser};

use super::ConstrainError;
use crate::kernels::sample::mask_words;

pub struct Constraint {
    matcher: Matcher,
    /// Bits the GPU sampler's mask has (the logits row's length).
    logits_vocab: usize,
    /// Tokens consumed so far (sampled and forced), for error messages.
    consumed: usize,
}

impl Constraint {
    pub(super) fn new(parser: TokenParser, logits_vocab: usize) -> Constraint {
        Constraint {
            matcher: Matcher::new(Ok(parser)),
            logits_vocab,
            consumed: 0,
        }
    }

    fn error(&self, message: impl ToString) -> ConstrainError {
        ConstrainError::Matcher {
            tokens: self.consumed,
            message: message.to_string(),
        }
    }

    /// Writes the allowed-token bitmask of the next step into `words`
    /// (`ceil(logits_vocab / 32)` words, bit `i % 32` of word `i / 32` for
    /// token `i`, bits past the logits row clear). Allows at least one token:
    /// a grammar with no way on is an error, never an empty mask.
    pub fn next_mask(&mut self, words: &mut Vec<u32>) -> Result<(), ConstrainError> {
        let allowed = self.matcher.compute_mask().map_err(|e| self.error(e))?;
        let n = mask_words(self.logits_vocab);
        words.clear();
        words.extend(allowed.as_slice().iter().take(n));
        words.resize(n, 0);
        let tail = self.logits_vocab % 32;
        if tail != 0 {
            words[n - 1] &= (1u32 << tail) - 1;
        }
        if words.iter().all(|&w| w == 0) {
            return Err(self.error("no token of the logits row is allowed"));
        }
        Ok(())
    }

    /// For a pass over drafted tokens: how many of `drafts` the pass may
    /// verify, and the mask of each of its rows, one after another in
    /// `words` (as `next_mask` writes one): row j samples after the first j
    /// drafts. Drafts stop before the first one the grammar forbids, and
    /// before one after which the grammar is finished or forces tokens (those
    /// are not sampled: plain decoding runs them as the next step's chunk).
    /// The grammar is left where it was.
    pub fn draft_masks(
        &mut self,
        drafts: &[u32],
        words: &mut Vec<u32>,
    ) -> Result<usize, ConstrainError> {
        words.clear();
        let mut row = Vec::new();
        let mut kept = 0;
        loop {
            self.next_mask(&mut row)?;
            words.extend(&row);
            let Some(&d) = drafts.get(kept) else { break };
            let allowed = row
                .get(d as usize / 32)
                .is_some_and(|w| (w >> (d % 32)) & 1 == 1);
            if !allowed {
                break;
            }
            self.matcher.consume_token(d).map_err(|e| self.error(e))?;
            let ends = self.matcher.is_stopped() || !self.matcher.compute_ff_tokens().is_empty();
            if ends {
                self.matcher.rollback(1).map_err(|e| self.error(e))?;
                break;
            }
            kept += 1;
        }
        self.matcher.rollback(kept).map_err(|e| self.error(e))?;
        Ok(kept)
    }

    /// Advances past a token the model produced.
    pub fn consume(&mut self, id: u32) -> Result<(), ConstrainError> {
        self.matcher.consume_token(id).map_err(|e| self.error(e))?;
        self.consumed += 1;
        Ok(())
    }

    /// The tokens the grammar allows no alternative to from here (a JSON
    /// object's `{"name": "` after its key is fixed), already consumed: the
    /// caller runs them through the model without sampling.
    pub fn take_forced(&mut self) -> Result<Vec<u32>, ConstrainError> {
        let forced = self.matcher.consume_ff_tokens();
        if let Some(e) = self.matcher.get_error() {
            return Err(self.error(e));
        }
        self.consumed += forced.len();
        Ok(forced)
    }

    /// The grammar is complete and nothing more may follow (an end token
    /// was consumed, or the grammar cannot be extended).
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }

    /// The output so far is a complete match (an end token is allowed next).
    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }
}
