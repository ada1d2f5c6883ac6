//! Prefill and decode are one state machine: a step is a run of `rows` tokens
//! starting at an absolute position. Prefill splits a prompt into chunks that
//! fit the scratch buffers; decode is a step of one token. The layer code sees
//! only (rows, pos0): there is no `len() == 1` special case anywhere.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InferenceStep {
    /// `rows` prompt tokens at positions `pos0..pos0 + rows`.
    Prefill { pos0: usize, rows: usize },
    /// One generated token at position `pos`.
    Decode { pos: usize },
    /// A verifying pass: a token and the drafts after it at positions
    /// `pos0..pos0 + rows`, each row computed exactly as a decode step at
    /// its position would compute it (the same kernels and sums, bit for
    /// bit), so keeping them gives what decoding them one by one gives.
    Verify { pos0: usize, rows: usize },
}

impl InferenceStep {
    pub fn pos0(self) -> usize {
        match self {
            InferenceStep::Prefill { pos0, .. } | InferenceStep::Verify { pos0, .. } => pos0,
            InferenceStep::Decode { pos } => pos,
        }
    }
    pub fn rows(self) -> usize {
        match self {
            InferenceStep::Prefill { rows, .. } | InferenceStep::Verify { rows, .. } => rows,
            InferenceStep::Decode { .. } => 1,
        }
    }
    /// Whether each row runs as a decode step runs it (the matrix-vector
    /// projections and the split attention): decode, and a verifying pass.
    pub fn as_decode(self) -> bool {
        !matches!(self, InferenceStep::Prefill { .. })
    }
}

/// Splits `n` prompt tokens starting at `pos0` into prefill chunks of at most
/// `chunk` rows.
pub fn plan_prefill(pos0: usize, n: usize, chunk: usize) -> Vec<InferenceStep> {
    (0..n)
        .step_by(chunk.max(1))
        .map(|start| InferenceStep::Prefill {
            pos0: pos0 + start,
            rows: chunk.min(n - start),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefill_plan_covers_prompt_in_order() {
        let plan = plan_prefill(5, 70, 32);
        let rows: Vec<_> = plan.iter().map(|s| (s.pos0(), s.rows())).collect();
        assert_eq!(rows, vec![(5, 32), (37, 32), (69, 6)]);
        assert!(plan_prefill(0, 0, 32).is_empty());
    }
}
