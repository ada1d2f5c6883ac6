//! RoPE position scaling as a file's metadata asks for it: what wick
//! implements, and a refusal by name for everything else, before upload (a
//! scaling read and ignored would load and give subtly wrong logits).
//!
//! Implemented, as llama.cpp applies them (`ggml_rope_ext` without YaRN):
//! - linear: `{arch}.rope.scaling.type` "linear" (llama.cpp's default when
//!   the type is absent) with `{arch}.rope.scaling.factor` (or the older
//!   `{arch}.rope.scale_linear`) f: every angle times 1 / f, which is every
//!   position divided by f;
//! - Llama 3.1 / 3.2 ("llama3" in Hugging Face's config): llama.cpp's
//!   converter writes no scaling keys for it but a `rope_freqs.weight`
//!   tensor of `n_rot / 2` per-pair divisors of the frequency, which the
//!   kernels apply (`kernels::rope::Rotary::freq_factors`).

use super::config::Meta;
use super::ModelError;
use crate::format::gguf::MetaValue;

/// The tensor of per-pair frequency divisors.
pub const ROPE_FREQS: &str = "rope_freqs.weight";

/// Keys under `{arch}.rope.scaling.` that change nothing for linear
/// scaling: the context the model was first trained with (YaRN's input) and
/// whether it was fine-tuned at the new length.
const INERT: [&str; 2] = ["original_context_length", "finetuned"];

/// The linear factor's reciprocal (1.0 without scaling), or an error naming
/// the first scaling key wick does not implement.
pub fn freq_scale(meta: &Meta) -> Result<f32, ModelError> {
    let (file, arch) = (meta.file, meta.arch);
    let prefix = format!("{arch}.rope.scaling.");
    for (key, value) in &file.metadata {
        let Some(rest) = key.strip_prefix(&prefix) else {
            continue;
        };
        match rest {
            "type" | "factor" => {}
            r if INERT.contains(&r) => {}
            // llama.cpp multiplies cos and sin by it: 1 is no change.
            "attn_factor" if value.as_f32() == Some(1.0) => {}
            _ => return Err(refused(key, value)),
        }
    }
    let type_key = format!("{prefix}type");
    let kind = file.meta_str_opt(&type_key)?.unwrap_or("linear");
    let factor_key = format!("{prefix}factor");
    let legacy_key = format!("{arch}.rope.scale_linear");
    let (key, factor) = match file.meta_f32_opt(&factor_key)? {
        Some(f) => (factor_key, Some(f)),
        None => (legacy_key.clone(), file.meta_f32_opt(&legacy_key)?),
    };
    // llama.cpp reads a factor of 0 as "not set".
    let factor = factor.filter(|&f| f != 0.0);
    match (kind, factor) {
        (_, Some(f)) if !(f.is_finite() && f > 0.0) => Err(ModelError::Config(format!(
            "{key} is {f}: a rope scaling factor must be finite and > 0"
        ))),
        ("linear", f) => Ok(1.0 / f.unwrap_or(1.0)),
        ("none", None) | ("none", Some(1.0)) => Ok(1.0),
        ("none", Some(f)) => Err(ModelError::Config(format!(
            "{type_key} is \"none\" but {key} is {f}: which one holds is not clear"
        ))),
        (other, _) => Err(ModelError::Config(format!(
            "{type_key} \"{other}\" is not implemented: wick implements linear rope scaling and \
             Llama 3's frequency factors ({ROPE_FREQS}), not YaRN, LongRoPE or others"
        ))),
    }
}

fn refused(key: &str, value: &MetaValue) -> ModelError {
    let shown = match value {
        MetaValue::String(s) => format!("\"{s}\""),
        v => v
            .as_f32()
            .map_or_else(|| "a value".to_string(), |f| f.to_string()),
    };
    ModelError::Config(format!(
        "{key} = {shown} is not implemented: wick implements linear rope scaling and \
         Llama 3's frequency factors ({ROPE_FREQS}), not YaRN, LongRoPE or others"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::gguf::GgufFile;
    use crate::format::gguf_write::GgufWriter;

    fn scale(keys: &[(&str, MetaValue)]) -> Result<f32, ModelError> {
        let mut w = GgufWriter::new();
        for (k, v) in keys {
            w = w.meta(format!("llama.{k}"), v.clone());
        }
        let file = GgufFile::parse_header(&w.try_header().unwrap()).unwrap();
        freq_scale(&Meta {
            file: &file,
            arch: "llama",
        })
    }

    fn refusal(keys: &[(&str, MetaValue)]) -> String {
        match scale(keys) {
            Err(ModelError::Config(m)) => m,
            other => panic!("{keys:?}: {other:?}"),
        }
    }

    fn s(v: &str) -> MetaValue {
        MetaValue::String(v.into())
    }

    #[test]
    fn linear_scaling_divides_positions_by_its_factor() {
        let f = |v: f32| MetaValue::F32(v);
        assert_eq!(scale(&[]).unwrap(), 1.0);
        let linear = [
            ("rope.scaling.type", s("linear")),
            ("rope.scaling.factor", f(4.0)),
        ];
        assert_eq!(scale(&linear).unwrap(), 0.25);
        // llama.cpp's default type, and its older key.
        assert_eq!(scale(&[("rope.scaling.factor", f(8.0))]).unwrap(), 0.125);
        assert_eq!(scale(&[("rope.scale_linear", f(2.0))]).unwrap(), 0.5);
        assert_eq!(scale(&[("rope.scaling.factor", f(0.0))]).unwrap(), 1.0);
        let inert = [
            ("rope.scaling.type", s("linear")),
            ("rope.scaling.factor", f(2.0)),
            ("rope.scaling.original_context_length", MetaValue::U32(4096)),
            ("rope.scaling.finetuned", MetaValue::Bool(true)),
            ("rope.scaling.attn_factor", f(1.0)),
        ];
        assert_eq!(scale(&inert).unwrap(), 0.5);
        assert_eq!(scale(&[("rope.scaling.type", s("none"))]).unwrap(), 1.0);
    }

    #[test]
    fn other_scalings_are_refused_by_name() {
        let f = |v: f32| MetaValue::F32(v);
        for kind in ["yarn", "longrope", "llama3", "dynamic"] {
            let m = refusal(&[
                ("rope.scaling.type", s(kind)),
                ("rope.scaling.factor", f(4.0)),
            ]);
            assert!(
                m.contains("llama.rope.scaling.type") && m.contains(kind),
                "{m}"
            );
        }
        let m = refusal(&[("rope.scaling.yarn_log_multiplier", f(0.1))]);
        assert!(m.contains("llama.rope.scaling.yarn_log_multiplier"), "{m}");
        let m = refusal(&[("rope.scaling.attn_factor", f(1.2))]);
        assert!(m.contains("attn_factor = 1.2"), "{m}");
        let m = refusal(&[("rope.scaling.factor", f(-2.0))]);
        assert!(m.contains("llama.rope.scaling.factor is -2"), "{m}");
        let m = refusal(&[("rope.scaling.factor", f(f32::INFINITY))]);
        assert!(m.contains("inf"), "{m}");
        let m = refusal(&[
            ("rope.scaling.type", s("none")),
            ("rope.scaling.factor", f(4.0)),
        ]);
        assert!(m.contains("\"none\""), "{m}");
    }
}
