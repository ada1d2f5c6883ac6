//! Structure-aware GGUF mutations.
//!
//! Two kinds, each reaching what random bytes rarely do:
//! - a header field (count, length, type id, dimension, offset) overwritten
//!   with an interesting integer, in place;
//! - a parsed header changed as a model file could be (a metadata value
//!   replaced, a known key added or removed, a tensor's shape, type or name
//!   changed) and written again with `GgufWriter`, so the result is a
//!   well-formed file that reaches the config, bounds and tensor checks.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use wick::format::gguf::{GgufFile, MetaValue};
use wick::format::gguf_write::GgufWriter;
use wick::format::quant::GgmlType;

use crate::gguf_fields::fields;
use crate::mutate::{interesting, mutate_bytes};

/// Architecture-relative keys the config readers look up (`{arch}.key`).
const ARCH_KEYS: [&str; 22] = [
    "block_count",
    "embedding_length",
    "feed_forward_length",
    "context_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "attention.sliding_window",
    "rope.dimension_count",
    "rope.freq_base",
    "rope.scale_linear",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.attn_factor",
    "rope.scaling.original_context_length",
    "rope.scaling.finetuned",
    "rope.scaling.yarn_log_multiplier",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
];

const GLOBAL_KEYS: [&str; 12] = [
    "general.architecture",
    "general.alignment",
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_space_prefix",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.merges",
    "tokenizer.chat_template",
];

const WORDS: [&str; 22] = [
    "llama",
    "qwen2",
    "qwen2moe",
    "qwen3",
    "qwen3moe",
    "gemma3",
    "mamba",
    "",
    "yarn",
    "linear",
    "llama3",
    "longrope",
    "none",
    "gpt2",
    "bert",
    "t5",
    "smollm",
    "llama-bpe",
    "qwen2",
    "default",
    "\u{0}",
    "{{ raise_exception('x') }}",
];

/// Tensor names the loader asks for in layer `l`.
const BLOCK_TENSORS: [&str; 9] = [
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "attn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
    "ffn_norm.weight",
];

/// Applies one GGUF-aware mutation, or byte mutations where the input no
/// longer parses far enough for one.
pub fn mutate_gguf(rng: &mut ChaCha8Rng, data: &mut Vec<u8>, other: &[u8]) {
    match rng.gen_range(0..10) {
        0..=3 => {
            if !mutate_field(rng, data) {
                mutate_bytes(rng, data, other);
            }
        }
        4..=7 => {
            if !mutate_parsed(rng, data) {
                mutate_bytes(rng, data, other);
            }
        }
        _ => mutate_bytes(rng, data, other),
    }
}

fn mutate_field(rng: &mut ChaCha8Rng, data: &mut [u8]) -> bool {
    let found = fields(data);
    let Some(f) = found.choose(rng) else {
        return false;
    };
    let old = {
        let mut buf = [0u8; 8];
        buf[..f.width].copy_from_slice(&data[f.at..f.at + f.width]);
        u64::from_le_bytes(buf)
    };
    let new = match rng.gen_range(0..5) {
        0 => old.wrapping_add(rng.gen_range(1..=8)),
        1 => old.wrapping_sub(rng.gen_range(1..=8)),
        2 => old.wrapping_mul(2),
        _ => interesting(rng),
    };
    data[f.at..f.at + f.width].copy_from_slice(&new.to_le_bytes()[..f.width]);
    true
}

fn some_value(rng: &mut ChaCha8Rng) -> MetaValue {
    let n = interesting(rng);
    match rng.gen_range(0..8) {
        0 => MetaValue::U32(n as u32),
        1 => MetaValue::U64(n),
        2 => MetaValue::I32(n as i32),
        3 => MetaValue::F32(
            *[0.0, -1.0, 1e-30, 1e30, f32::NAN, f32::INFINITY, 0.5, 8.0]
                .choose(rng)
                .unwrap_or(&0.0),
        ),
        4 => MetaValue::Bool(rng.gen()),
        5 => MetaValue::Array(vec![MetaValue::U32(n as u32); rng.gen_range(0..4)]),
        _ => MetaValue::String(WORDS.choose(rng).unwrap_or(&"").to_string()),
    }
}

/// A value of the same kind as `old`, changed.
fn changed(rng: &mut ChaCha8Rng, old: &MetaValue) -> MetaValue {
    let n = interesting(rng);
    match old {
        MetaValue::U32(_) => MetaValue::U32(n as u32),
        MetaValue::U64(_) => MetaValue::U64(n),
        MetaValue::I32(_) => MetaValue::I32(n as i32),
        MetaValue::Array(items) if !items.is_empty() => {
            let mut items = items.clone();
            match rng.gen_range(0..4) {
                0 => items.truncate(rng.gen_range(0..items.len())),
                1 => items.clear(),
                2 => {
                    let i = rng.gen_range(0..items.len());
                    items[i] = changed(rng, &items[i].clone());
                }
                _ => {
                    let i = rng.gen_range(0..items.len());
                    let j = rng.gen_range(0..items.len());
                    items.swap(i, j);
                }
            }
            MetaValue::Array(items)
        }
        MetaValue::String(s) if rng.gen() && !s.is_empty() => {
            let mut s = s.clone();
            let cut = rng.gen_range(0..s.len());
            s.truncate(s.floor_char_boundary_compat(cut));
            MetaValue::String(s)
        }
        _ => some_value(rng),
    }
}

/// `str::floor_char_boundary` is unstable; this is it.
trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, at: usize) -> usize;
}

impl FloorCharBoundary for String {
    fn floor_char_boundary_compat(&self, mut at: usize) -> usize {
        while !self.is_char_boundary(at) {
            at -= 1;
        }
        at
    }
}

fn mutate_parsed(rng: &mut ChaCha8Rng, data: &mut Vec<u8>) -> bool {
    let Ok(file) = GgufFile::parse_header(data) else {
        return false;
    };
    let arch = file
        .architecture()
        .map(str::to_string)
        .unwrap_or_else(|_| "llama".into());
    let mut meta = file.metadata.clone();
    let mut tensors: Vec<(String, Vec<u64>, GgmlType)> = file
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.dims.clone(), t.dtype))
        .collect();
    match rng.gen_range(0..8) {
        0 | 1 if !meta.is_empty() => {
            let i = rng.gen_range(0..meta.len());
            meta[i].1 = changed(rng, &meta[i].1);
        }
        2 => {
            let key = if rng.gen_range(0..3) > 0 {
                format!("{arch}.{}", ARCH_KEYS.choose(rng).unwrap_or(&""))
            } else {
                GLOBAL_KEYS.choose(rng).unwrap_or(&"").to_string()
            };
            meta.retain(|(k, _)| *k != key);
            meta.push((key, some_value(rng)));
        }
        3 if !meta.is_empty() => {
            meta.remove(rng.gen_range(0..meta.len()));
        }
        4 if !tensors.is_empty() => {
            let i = rng.gen_range(0..tensors.len());
            let dims = &mut tensors[i].1;
            match rng.gen_range(0..4) {
                0 => dims.push(rng.gen_range(1..4)),
                1 => {
                    dims.pop();
                }
                _ if !dims.is_empty() => {
                    let d = rng.gen_range(0..dims.len());
                    dims[d] = match rng.gen_range(0..3) {
                        0 => dims[d] * 2,
                        1 => dims[d] / 2,
                        _ => interesting(rng),
                    };
                }
                _ => {}
            }
        }
        5 if !tensors.is_empty() => {
            let i = rng.gen_range(0..tensors.len());
            tensors[i].2 = *GgmlType::ALL.choose(rng).unwrap_or(&GgmlType::F32);
        }
        6 if !tensors.is_empty() => {
            let i = rng.gen_range(0..tensors.len());
            if rng.gen() {
                tensors.remove(i);
            } else {
                let l = interesting(rng) % 64;
                let name = BLOCK_TENSORS.choose(rng).unwrap_or(&"");
                tensors[i].0 = format!("blk.{l}.{name}");
            }
        }
        _ => {
            let arch = WORDS[..7].choose(rng).unwrap_or(&"llama").to_string();
            meta.retain(|(k, _)| k != "general.architecture");
            meta.insert(0, ("general.architecture".into(), MetaValue::String(arch)));
        }
    }
    // The writer pads the header to the alignment: a 2^31 one would make
    // the mutator, not the target, allocate gigabytes.
    let huge_alignment = meta
        .iter()
        .any(|(k, v)| k == "general.alignment" && v.as_u64().is_none_or(|a| a > 1 << 16));
    if huge_alignment {
        return false;
    }
    let mut w = GgufWriter::new().version(file.version);
    for (k, v) in meta {
        w = w.meta(k, v);
    }
    for (name, dims, dtype) in tensors {
        w = w.declare_tensor(name, &dims, dtype);
    }
    let Ok(mut out) = w.try_header() else {
        return false;
    };
    // Keep the tensor bytes the input had, so vectors can be dequantized.
    let data_start = usize::try_from(file.data_offset).unwrap_or(usize::MAX);
    out.extend_from_slice(data.get(data_start..).unwrap_or(&[]));
    *data = out;
    true
}
