//! Phi-3's LongRoPE as llama.cpp runs it, in f64: two sets of per-pair
//! factors, `rope_factors_long.weight` and `rope_factors_short.weight`
//! (n_rot / 2 values each). Pair i's frequency theta^(-2i / n_rot) is divided
//! by factor[i] of the long set when the context is over
//! `rope.scaling.original_context_length`, of the short set otherwise; cos
//! and sin are both multiplied by `rope.scaling.attn_factor` (1 when
//! absent), so q . k scales by its square.
//!
//! Anything else under `rope.scaling.` stops the test rather than give a
//! reference that ignores it.

use wick::format::gguf::GgufFile;

pub struct RefLongRope {
    /// Per pair: what its frequency is divided by.
    factors: Vec<f64>,
    attn_factor: f64,
}

impl RefLongRope {
    /// The file's LongRoPE at a context of `n_ctx` tokens, or `None` where
    /// it has none (not Phi-3, or no factors). `t` reads a tensor.
    pub fn read(
        file: &GgufFile,
        arch: &str,
        n_rot: usize,
        n_ctx: Option<usize>,
        t: &dyn Fn(&str) -> Vec<f32>,
    ) -> Option<RefLongRope> {
        let (long, short) = ("rope_factors_long.weight", "rope_factors_short.weight");
        if arch != "phi3" || (file.tensor(long).is_none() && file.tensor(short).is_none()) {
            return None;
        }
        let key = |k: &str| format!("{arch}.rope.scaling.{k}");
        let known = ["original_context_length", "attn_factor"].map(key);
        for (k, _) in &file.metadata {
            assert!(
                !k.contains(".rope.scal") || known.contains(k),
                "the CPU reference does not implement {k} with LongRoPE"
            );
        }
        assert!(file.tensor("rope_freqs.weight").is_none(), "nor rope_freqs");
        let n_ctx = n_ctx.expect("LongRoPE depends on the context size: use load_with_context");
        let orig = file.meta_u64(&key("original_context_length")).unwrap() as usize;
        let (long, short) = (t(long), t(short));
        for set in [&long, &short] {
            assert_eq!(set.len(), n_rot / 2, "one factor per rotated pair");
        }
        let factors = if n_ctx > orig { long } else { short };
        let attn_factor = file
            .meta_f32_opt(&key("attn_factor"))
            .unwrap()
            .unwrap_or(1.0);
        Some(RefLongRope {
            factors: factors.into_iter().map(f64::from).collect(),
            attn_factor: attn_factor as f64,
        })
    }

    /// (angle, magnitude) of pair `i` whose unscaled angle is `theta`.
    pub fn angle(&self, theta: f64, i: usize) -> (f64, f64) {
        (theta / self.factors[i], self.attn_factor)
    }
}
