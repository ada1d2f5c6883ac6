//! YaRN for the reference forward pass, from the paper's and llama.cpp's
//! formulas in f64, read straight from the metadata: pair i's angle blends
//! the scaled angle (theta / factor) with theta by a ramp that is 1 for pairs
//! turning more than beta_fast (32) times over the original context and 0
//! for those turning fewer than beta_slow (1) times; cos and sin carry
//! `attn_factor * (1 + 0.1 ln factor)`.
//!
//! Only what a plain YaRN file holds: type, factor, original context,
//! attn_factor. Anything else under `rope.scaling.` stops the test rather
//! than give a reference that ignores it.

use wick::format::gguf::GgufFile;

pub struct RefYarn {
    factor: f64,
    /// Ramp ends, in pairs.
    low: f64,
    high: f64,
    mscale: f64,
}

impl RefYarn {
    /// The file's YaRN, or `None` for plain RoPE.
    pub fn read(file: &GgufFile, arch: &str, n_rot: usize, theta: f64) -> Option<RefYarn> {
        let key = |k: &str| format!("{arch}.rope.scaling.{k}");
        let known = ["type", "factor", "original_context_length", "attn_factor"].map(key);
        for (k, _) in &file.metadata {
            assert!(
                !k.contains(".rope.scal") || known.contains(k),
                "the CPU reference does not implement {k}"
            );
        }
        assert!(file.tensor("rope_freqs.weight").is_none(), "nor rope_freqs");
        match file.meta_str_opt(&key("type")).unwrap() {
            // A factor without a type is linear scaling in llama.cpp.
            None => {
                let scaled = file.metadata.iter().any(|(k, _)| k.contains(".rope.scal"));
                assert!(
                    !scaled,
                    "the CPU reference does not implement linear scaling"
                );
                return None;
            }
            Some("yarn") => {}
            Some(other) => panic!("the CPU reference does not implement {other} scaling"),
        }
        let factor = file.meta_f32(&key("factor")).unwrap() as f64;
        let orig = file.meta_u64(&key("original_context_length")).unwrap() as f64;
        let attn = file
            .meta_f32_opt(&key("attn_factor"))
            .unwrap()
            .unwrap_or(1.0) as f64;
        // The pair that turns `beta` times over the original context.
        let dim = |beta: f64| {
            n_rot as f64 * (orig / (2.0 * std::f64::consts::PI * beta)).ln() / (2.0 * theta.ln())
        };
        Some(RefYarn {
            factor,
            low: dim(32.0).floor().max(0.0),
            high: dim(1.0).ceil().min(n_rot as f64 - 1.0),
            mscale: attn * (1.0 + 0.1 * factor.ln()),
        })
    }

    /// (angle, magnitude) of pair `i` whose unscaled angle is `theta`.
    pub fn angle(&self, theta: f64, i: usize) -> (f64, f64) {
        let y = (i as f64 - self.low) / (self.high - self.low).max(0.001);
        let extrapolated = 1.0 - y.clamp(0.0, 1.0);
        let interpolated = theta / self.factor;
        (
            interpolated * (1.0 - extrapolated) + theta * extrapolated,
            self.mscale,
        )
    }
}
