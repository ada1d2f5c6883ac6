//! RoPE position scaling as a file's metadata asks for it: what wick
//! implements, and a refusal by name for everything else, before upload (a
//! scaling read and ignored would load and give subtly wrong logits).
//!
//! Implemented, as llama.cpp reads and applies them (`ggml_rope_ext`):
//! - linear: `{arch}.rope.scaling.type` "linear" (llama.cpp's default when
//!   the type is absent) with `{arch}.rope.scaling.factor` (or the older
//!   `{arch}.rope.scale_linear`) f: every angle times 1 / f, which is every
//!   position divided by f;
//! - YaRN: type "yarn", the same factor, `original_context_length` (else
//!   `{arch}.context_length`), and the optional `yarn_ext_factor`,
//!   `yarn_attn_factor`, `yarn_beta_fast` (32), `yarn_beta_slow` (1) and
//!   `yarn_log_multiplier`: see `yarn` for how they combine;
//! - `attn_factor`: multiplies cos and sin whatever the type;
//! - Llama 3.1 / 3.2 ("llama3" in Hugging Face's config): llama.cpp's
//!   converter writes no scaling keys for it but a `rope_freqs.weight`
//!   tensor of `n_rot / 2` per-pair divisors of the frequency, which the
//!   kernels apply (`kernels::rope::Rotary::freq_factors`).

use super::config::Meta;
use super::ModelError;
use crate::format::gguf::MetaValue;
use crate::kernels::rope::Yarn;

/// The tensor of per-pair frequency divisors.
pub const ROPE_FREQS: &str = "rope_freqs.weight";
/// LongRoPE's two sets of divisors (`config::FreqFactors::LongShort`).
pub const ROPE_FACTORS_LONG: &str = "rope_factors_long.weight";
pub const ROPE_FACTORS_SHORT: &str = "rope_factors_short.weight";

/// What wick implements, for refusals.
const IMPLEMENTED: &str = "wick implements linear and YaRN rope scaling, Llama 3's \
     frequency factors (rope_freqs.weight) and Phi-3's LongRoPE factors \
     (rope_factors_long / rope_factors_short.weight), not others";

/// Keys under `{arch}.rope.scaling.` that wick reads, or that change nothing
/// (`finetuned`: whether the model was fine-tuned at the new length).
const KNOWN: [&str; 10] = [
    "type",
    "factor",
    "attn_factor",
    "original_context_length",
    "finetuned",
    "yarn_ext_factor",
    "yarn_attn_factor",
    "yarn_beta_fast",
    "yarn_beta_slow",
    "yarn_log_multiplier",
];

/// A file's rope scaling: the linear factor's reciprocal (1.0 without
/// scaling) and YaRN's parameters (`Yarn::NONE` but for `attn_factor`
/// without YaRN).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scaling {
    pub freq_scale: f32,
    pub yarn: Yarn,
}

/// Reads the scaling of a file whose training context is `ctx_train`, or an
/// error naming the first key or value wick does not implement.
pub fn read(meta: &Meta, ctx_train: usize) -> Result<Scaling, ModelError> {
    let (file, arch) = (meta.file, meta.arch);
    let prefix = format!("{arch}.rope.scaling.");
    for (key, value) in &file.metadata {
        match key.strip_prefix(&prefix) {
            Some(rest) if !KNOWN.contains(&rest) => return Err(refused(key, value)),
            _ => {}
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
    if let Some(f) = factor.filter(|f| !(f.is_finite() && *f > 0.0)) {
        return Err(ModelError::Config(format!(
            "{key} is {f}: a rope scaling factor must be finite and > 0"
        )));
    }
    let freq_scale = match (kind, factor) {
        ("linear" | "yarn", f) => 1.0 / f.unwrap_or(1.0),
        ("none", None) | ("none", Some(1.0)) => 1.0,
        ("none", Some(f)) => {
            return Err(ModelError::Config(format!(
                "{type_key} is \"none\" but {key} is {f}: which one holds is not clear"
            )))
        }
        (other, _) => {
            return Err(ModelError::Config(format!(
                "{type_key} \"{other}\" is not implemented: {IMPLEMENTED}"
            )))
        }
    };
    let yarn = yarn(meta, kind == "yarn", freq_scale, ctx_train)?;
    Ok(Scaling { freq_scale, yarn })
}

/// YaRN's parameters as llama.cpp's context resolves them
/// (`llama_context::llama_context`):
/// - `ext_factor`: the file's `yarn_ext_factor` where it is >= 0, else 1
///   for type "yarn" and 0 for the others;
/// - with `ext_factor` on, `attn_factor` is YaRN's magnitude
///   `get_mscale(factor, 1)` (`1 + 0.1 ln factor` for factors above 1), or
///   with a log multiplier l `get_mscale(factor, 1) / get_mscale(factor,
///   l)`, times `1 / (1 + 0.1 ln factor)`, which cancels the magnitude the
///   kernel multiplies in again (`Yarn::mscale`); with it off, the file's
///   `yarn_attn_factor` (default 1);
/// - either way times the file's `attn_factor` (default 1).
///
/// All in f32, as llama.cpp computes them. The log multiplier is stored
/// times 0.1 by llama.cpp's converter, and llama.cpp's loader divides it
/// back (it reads it only for DeepSeek-family architectures, which never
/// carry it with another type; in a file wick loads it is applied the same
/// way rather than read and ignored).
fn yarn(meta: &Meta, is_yarn: bool, freq_scale: f32, ctx_train: usize) -> Result<Yarn, ModelError> {
    let key = |k: &str| format!("{}.rope.scaling.{k}", meta.arch);
    let num = |k: &str, default: f32| -> Result<f32, ModelError> {
        let v = meta.file.meta_f32_opt(&key(k))?.unwrap_or(default);
        match v.is_finite() {
            true => Ok(v),
            false => Err(ModelError::Config(format!(
                "{} is {v}: it must be finite",
                key(k)
            ))),
        }
    };
    let positive = |k: &str| -> Result<f32, ModelError> {
        match num(k, 1.0)? {
            v if v > 0.0 => Ok(v),
            v => Err(ModelError::Config(format!(
                "{} is {v}: it must be > 0",
                key(k)
            ))),
        }
    };
    let ext_factor = match num("yarn_ext_factor", -1.0)? {
        e if e >= 0.0 => e,
        _ => is_yarn as u8 as f32,
    };
    let rope_attn_factor = positive("attn_factor")?;
    let mut attn_factor = positive("yarn_attn_factor")?;
    if ext_factor != 0.0 {
        let get_mscale = |scale: f32, m: f32| match scale <= 1.0 {
            true => 1.0,
            false => 0.1 * m * scale.ln() + 1.0,
        };
        let factor = 1.0 / freq_scale;
        let log_mul = num("yarn_log_multiplier", 0.0)? / 0.1;
        attn_factor = match log_mul != 0.0 {
            true => get_mscale(factor, 1.0) / get_mscale(factor, log_mul),
            false => get_mscale(factor, 1.0),
        };
        attn_factor *= 1.0 / (1.0 + 0.1 * factor.ln());
        // A negative multiplier can make get_mscale 0 or negative.
        if !(attn_factor.is_finite() && attn_factor > 0.0) {
            return Err(ModelError::Config(format!(
                "{} gives a YaRN magnitude of {attn_factor}: it must be finite and > 0",
                key("yarn_log_multiplier")
            )));
        }
    }
    let orig_key = key("original_context_length");
    let n_ctx_orig = match meta.file.meta_u64_opt(&orig_key)? {
        None | Some(0) => ctx_train as u64,
        Some(n) => n,
    };
    let n_ctx_orig = u32::try_from(n_ctx_orig).map_err(|_| {
        ModelError::Config(format!(
            "{orig_key} is {n_ctx_orig}: more than 2^32 positions"
        ))
    })?;
    Ok(Yarn {
        ext_factor,
        attn_factor: attn_factor * rope_attn_factor,
        beta_fast: num("yarn_beta_fast", 32.0)?,
        beta_slow: num("yarn_beta_slow", 1.0)?,
        n_ctx_orig,
    })
}

fn refused(key: &str, value: &MetaValue) -> ModelError {
    let shown = match value {
        MetaValue::String(s) => format!("\"{s}\""),
        v => v
            .as_f32()
            .map_or_else(|| "a value".to_string(), |f| f.to_string()),
    };
    ModelError::Config(format!("{key} = {shown} is not implemented: {IMPLEMENTED}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::gguf::GgufFile;
    use crate::format::gguf_write::GgufWriter;

    /// The scaling of a llama file with `keys` (under `llama.`) and a
    /// training context of 2048.
    fn scaling(keys: &[(&str, MetaValue)]) -> Result<Scaling, ModelError> {
        let mut w = GgufWriter::new();
        for (k, v) in keys {
            w = w.meta(format!("llama.{k}"), v.clone());
        }
        let file = GgufFile::parse_header(&w.try_header().unwrap()).unwrap();
        let meta = Meta {
            file: &file,
            arch: "llama",
        };
        read(&meta, 2048)
    }

    fn scale(keys: &[(&str, MetaValue)]) -> Result<f32, ModelError> {
        scaling(keys).map(|s| s.freq_scale)
    }

    fn refusal(keys: &[(&str, MetaValue)]) -> String {
        match scaling(keys) {
            Err(ModelError::Config(m)) => m,
            other => panic!("{keys:?}: {other:?}"),
        }
    }

    fn s(v: &str) -> MetaValue {
        MetaValue::String(v.into())
    }

    fn f(v: f32) -> MetaValue {
        MetaValue::F32(v)
    }

    #[test]
    fn linear_scaling_divides_positions_by_its_factor() {
        assert_eq!(scale(&[]).unwrap(), 1.0);
        let linear = [
            ("rope.scaling.type", s("linear")),
            ("rope.scaling.factor", f(4.0)),
        ];
        assert_eq!(scale(&linear).unwrap(), 0.25);
        assert_eq!(scaling(&linear).unwrap().yarn.ext_factor, 0.0);
        // llama.cpp's default type, and its older key.
        assert_eq!(scale(&[("rope.scaling.factor", f(8.0))]).unwrap(), 0.125);
        assert_eq!(scale(&[("rope.scale_linear", f(2.0))]).unwrap(), 0.5);
        assert_eq!(scale(&[("rope.scaling.factor", f(0.0))]).unwrap(), 1.0);
        let inert = [
            ("rope.scaling.type", s("linear")),
            ("rope.scaling.factor", f(2.0)),
            ("rope.scaling.original_context_length", MetaValue::U32(4096)),
            ("rope.scaling.finetuned", MetaValue::Bool(true)),
        ];
        assert_eq!(
            scaling(&inert).unwrap().yarn,
            Yarn {
                n_ctx_orig: 4096,
                ..Yarn::NONE
            }
        );
        assert_eq!(scale(&[("rope.scaling.type", s("none"))]).unwrap(), 1.0);
        // attn_factor multiplies cos and sin with any type.
        let attn = scaling(&[("rope.scaling.attn_factor", f(0.8))]).unwrap();
        assert_eq!(attn.yarn.attn_factor, 0.8);
        assert_eq!(attn.yarn.ext_factor, 0.0);
    }

    /// Every YaRN key, and llama.cpp's defaults where a key is absent.
    #[test]
    fn yarn_reads_every_field_with_llama_cpp_defaults() {
        let yarn = [
            ("rope.scaling.type", s("yarn")),
            ("rope.scaling.factor", f(4.0)),
        ];
        let got = scaling(&yarn).unwrap();
        assert_eq!(got.freq_scale, 0.25);
        let cancel = 1.0 / (1.0 + 0.1 * 4f32.ln());
        let want = Yarn {
            ext_factor: 1.0,
            // get_mscale(4, 1) times its cancel: 1 but for f32 rounding.
            attn_factor: (1.0 + 0.1 * 4f32.ln()) * cancel,
            beta_fast: 32.0,
            beta_slow: 1.0,
            // No original_context_length: the training context.
            n_ctx_orig: 2048,
        };
        assert_eq!(got.yarn, want);
        assert!((got.yarn.mscale(0.25) - (1.0 + 0.1 * 4f32.ln())).abs() < 1e-6);

        let every = [
            ("rope.scaling.type", s("yarn")),
            ("rope.scaling.factor", f(8.0)),
            ("rope.scaling.original_context_length", MetaValue::U32(4096)),
            ("rope.scaling.attn_factor", f(0.5)),
            ("rope.scaling.yarn_ext_factor", f(0.75)),
            ("rope.scaling.yarn_attn_factor", f(3.0)),
            ("rope.scaling.yarn_beta_fast", f(16.0)),
            ("rope.scaling.yarn_beta_slow", f(2.0)),
            // Stored times 0.1: l = 0.707.
            ("rope.scaling.yarn_log_multiplier", f(0.0707)),
        ];
        let got = scaling(&every).unwrap();
        let (factor, l) = (8f32, 0.0707f32 / 0.1);
        let mscale = |m: f32| 0.1 * m * factor.ln() + 1.0;
        // With ext_factor on, yarn_attn_factor is replaced, not multiplied.
        let attn = mscale(1.0) / mscale(l) * (1.0 / (1.0 + 0.1 * factor.ln())) * 0.5;
        assert_eq!(
            got,
            Scaling {
                freq_scale: 0.125,
                yarn: Yarn {
                    ext_factor: 0.75,
                    attn_factor: attn,
                    beta_fast: 16.0,
                    beta_slow: 2.0,
                    n_ctx_orig: 4096,
                }
            }
        );
        // ext_factor 0 (from the file) turns YaRN off: yarn_attn_factor
        // then holds, times attn_factor.
        let off = [
            ("rope.scaling.type", s("yarn")),
            ("rope.scaling.factor", f(8.0)),
            ("rope.scaling.attn_factor", f(0.5)),
            ("rope.scaling.yarn_ext_factor", f(0.0)),
            ("rope.scaling.yarn_attn_factor", f(3.0)),
        ];
        let got = scaling(&off).unwrap().yarn;
        assert_eq!((got.ext_factor, got.attn_factor), (0.0, 1.5));
        // A negative ext_factor is llama.cpp's "not set".
        let unset = [
            ("rope.scaling.type", s("yarn")),
            ("rope.scaling.yarn_ext_factor", f(-1.0)),
        ];
        assert_eq!(scaling(&unset).unwrap().yarn.ext_factor, 1.0);
    }

    #[test]
    fn other_scalings_are_refused_by_name() {
        for kind in ["longrope", "llama3", "dynamic"] {
            let m = refusal(&[
                ("rope.scaling.type", s(kind)),
                ("rope.scaling.factor", f(4.0)),
            ]);
            assert!(
                m.contains("llama.rope.scaling.type") && m.contains(kind) && m.contains("LongRoPE"),
                "{m}"
            );
        }
        // Keys of scalings wick does not implement (LongRoPE's factors,
        // DeepSeek's mscale pair).
        for key in ["long_factor", "mscale_all_dim", "short_factor"] {
            let m = refusal(&[(&*format!("rope.scaling.{key}"), f(1.5))]);
            assert!(
                m.contains(&format!(
                    "llama.rope.scaling.{key} = 1.5 is not implemented"
                )),
                "{m}"
            );
        }
        let m = refusal(&[("rope.scaling.factor", f(-2.0))]);
        assert!(m.contains("llama.rope.scaling.factor is -2"), "{m}");
        let m = refusal(&[("rope.scaling.factor", f(f32::INFINITY))]);
        assert!(m.contains("inf"), "{m}");
        let m = refusal(&[
            ("rope.scaling.type", s("none")),
            ("rope.scaling.factor", f(4.0)),
        ]);
        assert!(m.contains("\"none\""), "{m}");
        let m = refusal(&[("rope.scaling.attn_factor", f(-1.0))]);
        assert!(m.contains("llama.rope.scaling.attn_factor is -1"), "{m}");
        let m = refusal(&[("rope.scaling.yarn_beta_fast", f(f32::NAN))]);
        assert!(
            m.contains("llama.rope.scaling.yarn_beta_fast is NaN"),
            "{m}"
        );
        let m = refusal(&[
            ("rope.scaling.type", s("yarn")),
            ("rope.scaling.factor", f(4.0)),
            ("rope.scaling.yarn_log_multiplier", f(-1.0)),
        ]);
        assert!(
            m.contains("yarn_log_multiplier gives a YaRN magnitude of"),
            "{m}"
        );
        let m = refusal(&[(
            "rope.scaling.original_context_length",
            MetaValue::U64(1 << 40),
        )]);
        assert!(
            m.contains("original_context_length is 1099511627776"),
            "{m}"
        );
    }
}
