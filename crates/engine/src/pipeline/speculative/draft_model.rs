//! A draft model: a second, smaller model with the same vocabulary on the
//! same GPU device drafts greedily. Its KV cache follows the sequence: each
//! pass it prefills what it has not seen (the tokens kept since its last
//! draft; the prompt at first), samples its first draft, and decodes the
//! others in one submit on its own token ring, so drafting K tokens costs
//! it one prefill step and one submit. Positions past the kept tokens are
//! rolled back the next time, as the prefix reuse of a new prompt does. Its
//! sampler is set to greedy once, when it is attached
//! (`Pipeline::set_draft_model`).

use crate::pipeline::{Pipeline, PipelineError};

impl Pipeline {
    /// Up to `k` greedy tokens after `seq` from this (draft) model, fewer
    /// where its context ends first (none when `seq` fills it).
    pub async fn draft_greedy(&mut self, seq: &[u32], k: usize) -> Result<Vec<u32>, PipelineError> {
        let room = self.ctx_len().saturating_sub(seq.len());
        let k = k.min(room).min(self.tokens.max_steps());
        if k == 0 || seq.is_empty() {
            return Ok(Vec::new());
        }
        // Keep what the cache holds of `seq`; at least its last token runs.
        let cached = self.held.reusable(seq).min(seq.len() - 1);
        self.pos = cached;
        self.held.forget_from(cached);
        let first = self.prefill_sampled(&seq[cached..], 0.0).await?;
        let mut drafts = vec![first];
        if k > 1 {
            let (rest, _) = self.decode_sampled(&vec![0.0; k - 1]).await?;
            // The steps embedded the first draft and all but the last after it.
            self.held.wrote(seq.len(), &[first]);
            self.held.wrote(seq.len() + 1, &rest[..k - 2]);
            drafts.extend(rest);
        }
        Ok(drafts)
    }
}
