//! How an embedding call's inputs are grouped into GPU steps: every row of
//! padding costs as much as a real one, so inputs of similar lengths run
//! together.

/// Most sequences in one step: bounds the step's buffers together with
/// the binding limit (see `batches`).
const MAX_BATCH: usize = 64;

/// Groups inputs of these token counts into steps, as indices into them:
/// shortest first, each step padded to its longest input. A step takes the
/// next input while its padded rows stay within 3/2 of its real ones (every
/// row of padding costs as much as a real one, and mixed lengths padded to
/// the longest can cost several times the work), at most `MAX_BATCH`
/// inputs, and the MLP's inner (or gate/up) rows, the largest buffer,
/// within `max_elems` (one storage binding).
pub(super) fn batches(lens: &[usize], widest: usize, max_elems: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    order.sort_by_key(|&i| lens[i]);
    let mut steps: Vec<Vec<usize>> = Vec::new();
    let mut step: Vec<usize> = Vec::new();
    let mut real = 0;
    for i in order {
        // Sorted: this input is the step's longest.
        let (n, longest) = (step.len() + 1, lens[i]);
        let fits = n <= MAX_BATCH
            && n * longest * widest <= max_elems
            && 2 * n * longest <= 3 * (real + longest);
        if !step.is_empty() && !fits {
            steps.push(std::mem::take(&mut step));
            real = 0;
        }
        step.push(i);
        real += lens[i];
    }
    steps.push(step);
    steps
}

#[cfg(test)]
mod tests {
    use super::{batches, MAX_BATCH};

    /// Every input lands in exactly one step.
    fn check_partition(steps: &[Vec<usize>], n: usize) {
        let mut seen: Vec<usize> = steps.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn mixed_lengths_are_grouped_so_padding_stays_small() {
        // EmbeddingGemma's reference inputs: one batch padded to 88 tokens
        // would run 1408 rows for 340 real ones.
        let lens = [16, 19, 3, 3, 18, 17, 17, 43, 15, 15, 9, 88, 26, 13, 12, 26];
        let steps = batches(&lens, 1, usize::MAX);
        check_partition(&steps, lens.len());
        let padded: usize = steps
            .iter()
            .map(|s| s.len() * s.iter().map(|&i| lens[i]).max().unwrap())
            .sum();
        let real: usize = lens.iter().sum();
        assert!(
            2 * padded <= 3 * real,
            "{padded} rows for {real}: {steps:?}"
        );
        for s in &steps {
            let longest = s.iter().map(|&i| lens[i]).max().unwrap();
            let sum: usize = s.iter().map(|&i| lens[i]).sum();
            assert!(s.len() == 1 || 2 * s.len() * longest <= 3 * sum, "{s:?}");
        }
    }

    #[test]
    fn steps_keep_to_the_batch_and_binding_limits() {
        let lens = vec![7; 150];
        let steps = batches(&lens, 1, usize::MAX);
        check_partition(&steps, lens.len());
        let sizes: Vec<usize> = steps.iter().map(Vec::len).collect();
        assert_eq!(sizes, [MAX_BATCH, MAX_BATCH, 150 - 2 * MAX_BATCH]);
        // 10 inputs of 7 tokens, 4 values a row: 3 inputs fit 90 values.
        let steps = batches(&lens[..10], 4, 90);
        check_partition(&steps, 10);
        assert!(steps.iter().all(|s| s.len() * 7 * 4 <= 90), "{steps:?}");
        assert_eq!(steps.len(), 4);
        // One input over the binding still runs, alone.
        let steps = batches(&[5, 500, 6], 1, 100);
        check_partition(&steps, 3);
        assert!(steps.contains(&vec![1]), "{steps:?}");
    }
}
