//! Prefix reuse across requests: the pipeline remembers which token sits at
//! each position of the KV cache, so a new prompt that starts like the last
//! sequence (a chat's history plus one more turn) prefills only what differs.
//!
//! Every write to the cache goes through [`HeldIds`]: positions are forgotten
//! before a step records over them (so a failed submit leaves nothing
//! trusted), and remembered once its ids are known. Decode steps that embed a
//! token sampled on the GPU are remembered when that token is read back.
//!
//! Sliding-window layers need nothing extra: the cache keeps every position of
//! the context in every layer (`kernels::attention::kv`; windows are applied by masking
//! in attention), so a position's K/V stays valid until that position is
//! written again. Were a local layer ever to keep only its last `window`
//! positions in a ring, rolling back past the ring's oldest entry would leave
//! the re-prefilled queries without their keys, and `reusable` would have to
//! fall to 0 once the sequence had outgrown the ring.

/// The ids whose K/V the cache holds at positions `0..len()`, in order.
#[derive(Debug, Default)]
pub struct HeldIds {
    ids: Vec<u32>,
}

impl HeldIds {
    pub fn as_slice(&self) -> &[u32] {
        &self.ids
    }

    pub fn clear(&mut self) {
        self.ids.clear();
    }

    /// Positions from `pos` on may be (or are about to be) overwritten.
    pub fn forget_from(&mut self, pos: usize) {
        self.ids.truncate(pos);
    }

    /// `ids` now sit at positions `pos0..pos0 + ids.len()`. Positions past
    /// them are forgotten; if `pos0` is past the known run, nothing is added
    /// (a gap of unknown ids cannot be reused).
    pub fn wrote(&mut self, pos0: usize, ids: &[u32]) {
        self.ids.truncate(pos0);
        if self.ids.len() == pos0 {
            self.ids.extend_from_slice(ids);
        }
    }

    /// `id` sits at position `pos`, learned after the fact (a token sampled on
    /// the GPU that a later decode step embedded). Added only where it
    /// extends the known run; a stale report changes nothing.
    pub fn learned(&mut self, pos: usize, id: u32) {
        if self.ids.len() == pos {
            self.ids.push(id);
        }
    }

    /// Leading positions of `prompt` whose K/V can be kept: the longest common
    /// prefix with the held ids, less one where it covers the whole prompt, as
    /// the last prompt token must run again to give the next token's logits.
    pub fn reusable(&self, prompt: &[u32]) -> usize {
        let common = self
            .ids
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        common.min(prompt.len().saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::HeldIds;

    fn held(ids: &[u32]) -> HeldIds {
        let mut h = HeldIds::default();
        h.wrote(0, ids);
        h
    }

    #[test]
    fn reuses_the_longest_common_prefix() {
        let h = held(&[1, 2, 3, 4, 5]);
        assert_eq!(h.reusable(&[1, 2, 3, 4, 5, 6, 7]), 5);
        assert_eq!(h.reusable(&[1, 2, 9, 4, 5, 6]), 2);
        assert_eq!(h.reusable(&[7, 2, 3]), 0);
        assert_eq!(h.reusable(&[]), 0);
    }

    #[test]
    fn always_leaves_the_last_prompt_token_to_run() {
        let h = held(&[1, 2, 3, 4, 5]);
        assert_eq!(h.reusable(&[1, 2, 3, 4, 5]), 4);
        assert_eq!(h.reusable(&[1, 2, 3]), 2);
        assert_eq!(h.reusable(&[1]), 0);
    }

    #[test]
    fn writes_replace_what_follows_them() {
        let mut h = held(&[1, 2, 3, 4, 5]);
        h.wrote(2, &[8, 9]);
        assert_eq!(h.as_slice(), &[1, 2, 8, 9]);
        // Past the known run: the gap's ids are unknown, so nothing is kept
        // from the write on.
        h.wrote(6, &[7]);
        assert_eq!(h.as_slice(), &[1, 2, 8, 9]);
        h.forget_from(1);
        assert_eq!(h.as_slice(), &[1]);
    }

    #[test]
    fn learned_ids_only_extend_the_run() {
        let mut h = held(&[1, 2]);
        h.learned(2, 3);
        h.learned(2, 4); // stale: position 2 is already known
        h.learned(5, 6); // a gap
        assert_eq!(h.as_slice(), &[1, 2, 3]);
    }
}
