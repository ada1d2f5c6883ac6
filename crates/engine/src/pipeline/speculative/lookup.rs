//! Prompt lookup: where a reply copies (editing code, quoting a document,
//! filling a structure it was shown), the tokens that followed the last
//! earlier occurrence of the sequence's last few tokens are a cheap guess at
//! what comes next. The longest n-gram that matches wins (a longer match is
//! a surer guess); the latest occurrence of it wins among equals (the text
//! being copied is usually the nearest).

/// Longest suffix of the sequence looked up.
pub const MAX_NGRAM: usize = 3;
/// Shortest suffix looked up: a single token matches too easily to be a
/// good guess, and every wrong draft costs a row of the pass.
pub const MIN_NGRAM: usize = 2;

/// Up to `k` tokens that followed the last earlier occurrence of `seq`'s
/// last n tokens, for n from `MAX_NGRAM` down to `MIN_NGRAM`; empty when
/// none occurs.
pub fn draft(seq: &[u32], k: usize) -> &[u32] {
    if k == 0 {
        return &[];
    }
    for n in (MIN_NGRAM..=MAX_NGRAM).rev() {
        if seq.len() <= n {
            continue;
        }
        let suffix = &seq[seq.len() - n..];
        // Occurrences that end before the suffix itself, latest first: the
        // match must leave at least one token after it.
        let found = (0..seq.len() - n).rev().find(|&i| &seq[i..i + n] == suffix);
        if let Some(i) = found {
            let from = i + n;
            return &seq[from..(from + k).min(seq.len())];
        }
    }
    &[]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_what_followed_the_latest_longest_match() {
        // "1 2 3" occurs at 0 (then 4 5) and at 5 (then 9): the latest wins.
        let seq = [1, 2, 3, 4, 5, 1, 2, 3, 9, 7, 1, 2, 3];
        assert_eq!(draft(&seq, 4), &[9, 7, 1, 2]);
        assert_eq!(draft(&seq, 1), &[9]);
        // No earlier "8 2 3": the latest "2 3" then.
        let seq = [2, 3, 6, 6, 1, 2, 3, 5, 8, 2, 3];
        assert_eq!(draft(&seq, 3), &[5, 8, 2]);
        let seq = [1, 2, 3, 4, 0, 2, 3, 5, 1, 2, 3];
        assert_eq!(
            draft(&seq, 2),
            &[4, 0],
            "the 3-gram 1 2 3, not the later 2-gram"
        );
    }

    #[test]
    fn drafts_stop_at_the_sequence_end_and_may_overlap_the_suffix() {
        // A repeating run: the match's continuation runs into the suffix.
        let seq = [7, 7, 7, 7];
        assert_eq!(draft(&seq, 5), &[7]);
        let seq = [1, 2, 1, 2, 1, 2];
        assert_eq!(draft(&seq, 8), &[1, 2]);
    }

    #[test]
    fn no_draft_without_a_match_or_room() {
        assert!(draft(&[1, 2, 3, 4, 5], 4).is_empty());
        assert!(draft(&[1, 2], 4).is_empty());
        assert!(draft(&[], 4).is_empty());
        assert!(draft(&[1, 2, 1, 2], 0).is_empty());
        // A lone repeated token is below the shortest n-gram.
        assert!(draft(&[5, 1, 5], 4).is_empty());
    }
}
