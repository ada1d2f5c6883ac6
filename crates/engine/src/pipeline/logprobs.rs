//! Log-probabilities of generated tokens (OpenAI's `logprobs` /
//! `top_logprobs`), from the logits of the positions that sampled them.
//!
//! Sampling runs on the GPU and reads back only ids, so the logits are not
//! kept while generating. Once a generation is over, the cache still holds
//! the K/V of the prompt and of every token but the last, so those positions'
//! logits are computed again in one prefill of just those rows (attention
//! reads the cached keys): the same computation as the decode steps that
//! sampled, up to the summation order of the batched kernels (~1e-5).

use super::Pipeline;
use crate::pipeline::error::PipelineError;

/// One generated token's log-probability and the most likely alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    pub id: u32,
    pub logprob: f32,
    /// The `k` highest log-probabilities at its position as (id, logprob),
    /// highest first, the lower id first on ties.
    pub top: Vec<(u32, f32)>,
}

/// `log(softmax(row))`, summed in f64.
pub fn log_softmax(row: &[f32]) -> Vec<f32> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&x| (x as f64 - max).exp()).sum();
    let log_sum = max + sum.ln();
    row.iter().map(|&x| (x as f64 - log_sum) as f32).collect()
}

/// The `k` highest values of `row` as (index, value), highest first, the
/// lower index first on ties.
pub fn top_k(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    if k == 0 {
        return Vec::new();
    }
    let mut idx: Vec<u32> = (0..row.len() as u32).collect();
    let order = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
    if k < idx.len() {
        idx.select_nth_unstable_by(k - 1, order);
        idx.truncate(k);
    }
    idx.sort_unstable_by(order);
    idx.into_iter().map(|i| (i, row[i as usize])).collect()
}

impl Pipeline {
    /// Logits of the last `last` positions of `seq`, prefilling only the
    /// positions the cache does not already hold for it (and those `last`).
    pub async fn logits_of(
        &mut self,
        seq: &[u32],
        last: usize,
    ) -> Result<Vec<Vec<f32>>, PipelineError> {
        if last == 0 || last > seq.len() {
            return Err(PipelineError::InvalidOption(format!(
                "asked for logits of the last {last} positions of a {}-token input",
                seq.len()
            )));
        }
        let start = self.held.reusable(seq).min(seq.len() - last);
        self.pos = start;
        self.prefill(&seq[start..], last).await
    }

    /// The log-probability of each of `generated` (sampled after `prompt`)
    /// and the `k` most likely tokens at its position. Run it right after
    /// the generation, while the cache holds its K/V (or it prefills again).
    pub async fn logprobs_of(
        &mut self,
        prompt: &[u32],
        generated: &[u32],
        k: usize,
    ) -> Result<Vec<TokenLogprob>, PipelineError> {
        if prompt.is_empty() || generated.is_empty() {
            return Ok(Vec::new());
        }
        // Each position's logits predict the next token: the last n positions
        // of the prompt and all generated tokens but the last sampled them.
        let mut seq = prompt.to_vec();
        seq.extend_from_slice(&generated[..generated.len() - 1]);
        let rows = self.logits_of(&seq, generated.len()).await?;
        Ok(rows
            .iter()
            .zip(generated)
            .map(|(row, &id)| {
                let lp = log_softmax(row);
                TokenLogprob {
                    id,
                    logprob: lp[id as usize],
                    top: top_k(&lp, k),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_sums_to_one_and_keeps_order() {
        let row = [1.0f32, 3.0, -2.0, 3.0, 1000.0, 999.0];
        let lp = log_softmax(&row);
        let total: f64 = lp.iter().map(|&x| (x as f64).exp()).sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
        // Large logits do not overflow: 1000 and 999 hold nearly all the mass.
        assert!((lp[4] - (-(1.0f64 + (-1.0f64).exp()).ln()) as f32).abs() < 1e-6);
        assert_eq!(
            top_k(&lp, 3).iter().map(|t| t.0).collect::<Vec<_>>(),
            [4, 5, 1]
        );
    }

    #[test]
    fn top_k_breaks_ties_by_lower_id() {
        let row = [0.5f32, 2.0, 2.0, -1.0];
        assert_eq!(top_k(&row, 2), [(1, 2.0), (2, 2.0)]);
        assert_eq!(top_k(&row, 9).len(), 4);
        assert!(top_k(&row, 0).is_empty());
    }
}
