//! Tiny models written both ways: a GGUF file, and the Hugging Face
//! checkpoint (`config.json`, safetensors, `tokenizer.json`,
//! `tokenizer_config.json`) its tensors make when written out the way
//! transformers stores them. The HF names, config fields and layouts are
//! written here from Hugging Face's conventions, not taken from the engine's
//! mapping, so a test comparing the two loads checks that mapping.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use wick::format::gguf_write::GgufWriter;
use wick::format::quant::{dequantize, quantize, GgmlType};
use wick::format::{GgufFile, MetaValue, TensorInfo};

use crate::tiny_tokenizer::tokenizer_metadata;
pub use crate::tiny_tokenizer::{
    tokenizer_config_json, tokenizer_json, CHAT_TEMPLATE, EOS_ID, VOCAB,
};

/// How the checkpoint stores its tensors; the GGUF file holds the same values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    F32,
    /// GGUF: F16 matrices, F32 vectors of F16 values.
    F16,
    /// GGUF: F32 of BF16 values (GGUF files rarely hold BF16).
    Bf16,
}

impl Storage {
    fn checkpoint_type(self) -> GgmlType {
        match self {
            Storage::F32 => GgmlType::F32,
            Storage::F16 => GgmlType::F16,
            Storage::Bf16 => GgmlType::BF16,
        }
    }
    fn gguf_matrix_type(self) -> GgmlType {
        match self {
            Storage::F16 => GgmlType::F16,
            _ => GgmlType::F32,
        }
    }
    /// `v` rounded to what the checkpoint's type holds exactly.
    fn representable(self, v: Vec<f32>) -> Vec<f32> {
        let t = self.checkpoint_type();
        dequantize(t, &quantize(t, &v).unwrap(), v.len()).unwrap()
    }
}

const D: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const FFN: usize = 96;
const LAYERS: usize = 2;
const CTX: usize = 128;

/// `arch`: "llama" (untied head), "qwen2" (q/k/v biases) or "gemma3"; a
/// real file's architecture ("gemma2", "phi3", "smollm3" too) from
/// `checkpoint_of_gguf`, which writes only its tensors.
pub struct TinyModel {
    pub arch: &'static str,
    pub head_dim: usize,
    pub tied: bool,
}

impl TinyModel {
    pub fn new(arch: &'static str) -> TinyModel {
        TinyModel {
            arch,
            // Gemma's heads are wider than d_model / heads.
            head_dim: if arch == "gemma3" { 32 } else { D / HEADS },
            tied: arch != "llama",
        }
    }

    /// Every tensor: GGUF name, ggml dims, whether it is a norm weight.
    fn tensors(&self) -> Vec<(String, Vec<u64>, bool)> {
        let (q, kv, hd) = (
            HEADS * self.head_dim,
            KV_HEADS * self.head_dim,
            self.head_dim,
        );
        let m = |n: String, rows: usize, cols: usize| (n, vec![cols as u64, rows as u64], false);
        let v = |n: String, len: usize, norm: bool| (n, vec![len as u64], norm);
        let mut out = vec![m("token_embd.weight".into(), VOCAB, D)];
        if !self.tied {
            out.push(m("output.weight".into(), VOCAB, D));
        }
        out.push(v("output_norm.weight".into(), D, true));
        for l in 0..LAYERS {
            let n = |s: &str| format!("blk.{l}.{s}");
            out.extend([
                v(n("attn_norm.weight"), D, true),
                m(n("attn_q.weight"), q, D),
                m(n("attn_k.weight"), kv, D),
                m(n("attn_v.weight"), kv, D),
                m(n("attn_output.weight"), D, q),
                v(n("ffn_norm.weight"), D, true),
                m(n("ffn_gate.weight"), FFN, D),
                m(n("ffn_up.weight"), FFN, D),
                m(n("ffn_down.weight"), D, FFN),
            ]);
            if self.arch == "qwen2" {
                out.extend([
                    v(n("attn_q.bias"), q, false),
                    v(n("attn_k.bias"), kv, false),
                    v(n("attn_v.bias"), kv, false),
                ]);
            }
            if self.arch == "gemma3" {
                out.extend([
                    v(n("attn_q_norm.weight"), hd, true),
                    v(n("attn_k_norm.weight"), hd, true),
                    v(n("post_attention_norm.weight"), D, true),
                    v(n("post_ffw_norm.weight"), D, true),
                ]);
            }
        }
        out
    }

    /// The GGUF file, seeded random weights: matrices of std 1/sqrt(cols),
    /// norms in [0.6, 1.6] (so Gemma's stored w = norm - 1 is exact),
    /// biases within +-0.1; every value exact in the checkpoint's type.
    pub fn gguf(&self, storage: Storage) -> Vec<u8> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut w = GgufWriter::new();
        for (k, v) in self.metadata() {
            w = w.meta(k, v);
        }
        for (k, v) in tokenizer_metadata() {
            w = w.meta(k, v);
        }
        for (name, dims, norm) in self.tensors() {
            let n: u64 = dims.iter().product();
            let (lo, hi) = match (dims.len(), norm) {
                (2, _) => {
                    let a = (3.0 / dims[0] as f32).sqrt();
                    (-a, a)
                }
                (_, true) => (0.6, 1.6),
                _ => (-0.1, 0.1),
            };
            let values: Vec<f32> = (0..n).map(|_| rng.gen_range(lo..hi)).collect();
            let values = storage.representable(values);
            let dtype = if dims.len() == 2 {
                storage.gguf_matrix_type()
            } else {
                GgmlType::F32
            };
            w = w.tensor(name, &dims, dtype, quantize(dtype, &values).unwrap());
        }
        w.to_bytes()
    }

    fn metadata(&self) -> Vec<(String, MetaValue)> {
        let a = self.arch;
        let u = |v: usize| MetaValue::U32(v as u32);
        let mut keys = vec![
            ("block_count", u(LAYERS)),
            ("context_length", u(CTX)),
            ("embedding_length", u(D)),
            ("feed_forward_length", u(FFN)),
            ("attention.head_count", u(HEADS)),
            ("attention.head_count_kv", u(KV_HEADS)),
            ("attention.key_length", u(self.head_dim)),
            ("attention.value_length", u(self.head_dim)),
            ("rope.dimension_count", u(self.head_dim)),
            ("rope.freq_base", MetaValue::F32(self.rope_theta())),
            ("attention.layer_norm_rms_epsilon", MetaValue::F32(1e-5)),
        ];
        if a == "gemma3" {
            // Shorter than the test's prompts: the local layers slide.
            keys.push(("attention.sliding_window", u(4)));
        }
        let mut out = vec![(
            "general.architecture".to_string(),
            MetaValue::String(a.into()),
        )];
        out.extend(keys.into_iter().map(|(k, v)| (format!("{a}.{k}"), v)));
        out
    }

    fn rope_theta(&self) -> f32 {
        if self.arch == "qwen2" {
            1e6
        } else {
            1e4
        }
    }

    /// `config.json` as transformers writes it for this model.
    pub fn config_json(&self) -> Vec<u8> {
        let mut c = json!({
            "model_type": if self.arch == "gemma3" { "gemma3_text" } else { self.arch },
            "hidden_size": D,
            "intermediate_size": FFN,
            "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS,
            "head_dim": self.head_dim,
            "max_position_embeddings": CTX,
            "rms_norm_eps": 1e-5f32 as f64,
            "rope_theta": self.rope_theta() as f64,
            "tie_word_embeddings": self.tied,
            "vocab_size": VOCAB,
            "rope_scaling": null,
            "torch_dtype": "float32",
        });
        if self.arch == "gemma3" {
            c["hidden_activation"] = json!("gelu_pytorch_tanh");
            c["sliding_window"] = json!(4);
            c["query_pre_attn_scalar"] = json!(self.head_dim);
            c["rope_local_base_freq"] = json!(10000.0);
            let types: Vec<_> = (0..LAYERS)
                .map(|l| {
                    if (l + 1) % 6 == 0 {
                        "full_attention"
                    } else {
                        "sliding_attention"
                    }
                })
                .collect();
            c["layer_types"] = json!(types);
        } else {
            c["hidden_act"] = json!("silu");
        }
        serde_json::to_vec_pretty(&c).unwrap()
    }

    /// The checkpoint's safetensors files from the GGUF file's tensors,
    /// `shards` files of about equal tensor counts, plus the index when sharded.
    /// Each file is written tensor by tensor, as safetensors lays it out
    /// (tensors by name): one tensor's values in memory beside the files.
    pub fn safetensors(
        &self,
        gguf: &[u8],
        storage: Storage,
        shards: usize,
    ) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
        let file = GgufFile::parse(gguf).unwrap();
        let dtype = storage.checkpoint_type();
        // Phi-3's LongRoPE factors are config.json's lists, not tensors.
        let mut tensors: Vec<(String, &TensorInfo)> = file
            .tensors
            .iter()
            .filter(|t| !t.name.starts_with("rope_factors_"))
            .map(|t| (hf_name(self.arch, &t.name), t))
            .collect();
        let per_shard = tensors.len().div_ceil(shards);
        let names: Vec<String> = (1..=shards).map(|i| shard_name(i - 1, shards)).collect();
        let mut weight_map = serde_json::Map::new();
        let mut files = Vec::new();
        for (i, chunk) in tensors.chunks_mut(per_shard).enumerate() {
            chunk.sort_by(|a, b| a.0.cmp(&b.0));
            let mut header = serde_json::Map::new();
            let mut at = 0;
            for (name, info) in chunk.iter() {
                let len = info.n_elements as usize * dtype.block_bytes();
                let shape: Vec<u64> = info.dims.iter().rev().copied().collect();
                header.insert(
                    name.clone(),
                    json!({"dtype": safetensors_dtype(dtype), "shape": shape,
                           "data_offsets": [at, at + len]}),
                );
                weight_map.insert(name.clone(), json!(names[i]));
                at += len;
            }
            let mut header = serde_json::to_vec(&header).unwrap();
            header.resize(header.len().next_multiple_of(8), b' ');
            let mut out = Vec::with_capacity(8 + header.len() + at);
            out.extend_from_slice(&(header.len() as u64).to_le_bytes());
            out.extend_from_slice(&header);
            for (_, info) in chunk.iter() {
                let values = self.hf_values(&file, gguf, info);
                match dtype {
                    GgmlType::F32 => out.extend(values.iter().flat_map(|v| v.to_le_bytes())),
                    _ => out.extend_from_slice(&quantize(dtype, &values).unwrap()),
                }
            }
            files.push(out);
        }
        let index = (shards > 1).then(|| {
            serde_json::to_vec(&json!({"metadata": {"total_size": 0}, "weight_map": weight_map}))
                .unwrap()
        });
        (files, index)
    }

    /// A GGUF tensor's values as the checkpoint stores them: Llama's and
    /// SmolLM3's q/k rows in HF's rotary order, Gemma's norms as w for 1 + w.
    fn hf_values(&self, file: &GgufFile, gguf: &[u8], info: &TensorInfo) -> Vec<f32> {
        let bytes = file.tensor_bytes(gguf, info).unwrap();
        let mut values = dequantize(info.dtype, bytes, info.n_elements as usize).unwrap();
        if matches!(self.arch, "llama" | "smollm3") && is_rotary(&info.name) {
            values = to_hf_rotary(&values, info.row_elements() as usize, self.head_dim);
        }
        if matches!(self.arch, "gemma3" | "gemma2") && info.name.ends_with("norm.weight") {
            values.iter_mut().for_each(|v| *v -= 1.0);
        }
        values
    }
}

/// The file name of shard `i` (from 0) of `shards`, as transformers names them.
pub fn shard_name(i: usize, shards: usize) -> String {
    format!("model-{:05}-of-{shards:05}.safetensors", i + 1)
}

/// The safetensors name of a checkpoint type.
fn safetensors_dtype(t: GgmlType) -> &'static str {
    match t {
        GgmlType::F32 => "F32",
        GgmlType::F16 => "F16",
        _ => "BF16",
    }
}

fn is_rotary(gguf: &str) -> bool {
    gguf.ends_with("attn_q.weight") || gguf.ends_with("attn_k.weight")
}

/// GGUF's adjacent-pair rows back to HF's half-split order, per head:
/// HF row j * hd/2 + i is GGUF row 2i + j.
fn to_hf_rotary(values: &[f32], cols: usize, head_dim: usize) -> Vec<f32> {
    let rows = values.len() / cols;
    let half = head_dim / 2;
    let mut out = vec![0.0; values.len()];
    for head in 0..rows / head_dim {
        for j in 0..2 {
            for i in 0..half {
                let hf = head * head_dim + j * half + i;
                let gguf = head * head_dim + 2 * i + j;
                out[hf * cols..(hf + 1) * cols]
                    .copy_from_slice(&values[gguf * cols..(gguf + 1) * cols]);
            }
        }
    }
    out
}

/// The transformers name of a GGUF tensor (llama.cpp's tensor map, read backwards).
fn hf_name(arch: &str, gguf: &str) -> String {
    let global = [
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("output_norm.weight", "model.norm.weight"),
        ("output.weight", "lm_head.weight"),
    ];
    if let Some((_, hf)) = global.iter().find(|(g, _)| *g == gguf) {
        return hf.to_string();
    }
    let rest = gguf.strip_prefix("blk.").unwrap();
    let (layer, rest) = rest.split_once('.').unwrap();
    let hf = match (rest, arch) {
        ("attn_norm.weight", _) => "input_layernorm.weight",
        ("ffn_norm.weight", "gemma3" | "gemma2") => "pre_feedforward_layernorm.weight",
        ("ffn_norm.weight", _) => "post_attention_layernorm.weight",
        ("post_attention_norm.weight", _) => "post_attention_layernorm.weight",
        ("post_ffw_norm.weight", _) => "post_feedforward_layernorm.weight",
        ("attn_q_norm.weight", _) => "self_attn.q_norm.weight",
        ("attn_k_norm.weight", _) => "self_attn.k_norm.weight",
        ("attn_output.weight", _) => "self_attn.o_proj.weight",
        // Phi-3's fused tensors: q, k, v rows; gate rows, then up rows.
        ("attn_qkv.weight", "phi3") => "self_attn.qkv_proj.weight",
        ("ffn_up.weight", "phi3") => "mlp.gate_up_proj.weight",
        ("ffn_gate.weight", _) => "mlp.gate_proj.weight",
        ("ffn_up.weight", _) => "mlp.up_proj.weight",
        ("ffn_down.weight", _) => "mlp.down_proj.weight",
        (other, _) => {
            // attn_q.weight -> self_attn.q_proj.weight, and biases alike.
            let (proj, kind) = other.split_once('.').unwrap();
            let letter = proj.strip_prefix("attn_").unwrap();
            return format!("model.layers.{layer}.self_attn.{letter}_proj.{kind}");
        }
    };
    format!("model.layers.{layer}.{hf}")
}

/// `config.json` for a real GGUF file's model (its shapes from the metadata;
/// `gguf`: the file's bytes),
/// and the `TinyModel` that writes its tensors out as a checkpoint. Written
/// from transformers' config classes: Gemma 2's soft-caps, window and
/// alternating `layer_types`; Phi-3's LongRoPE factor tensors as
/// `rope_scaling` lists; SmolLM3's NoPE layers as `no_rope_layers`.
pub fn checkpoint_of_gguf(gguf: &[u8]) -> (Vec<u8>, TinyModel) {
    let file = &GgufFile::parse(gguf).unwrap();
    let arch: &'static str = match file.architecture().unwrap() {
        "llama" => "llama",
        "qwen2" => "qwen2",
        "gemma3" => "gemma3",
        "gemma2" => "gemma2",
        "phi3" => "phi3",
        "smollm3" => "smollm3",
        other => panic!("no checkpoint layout for {other}"),
    };
    let key = |k: &str| format!("{arch}.{k}");
    let u = |k: &str| file.meta_u64(&key(k)).unwrap();
    let f = |k: &str| file.meta_f32(&key(k)).unwrap() as f64;
    let heads = u("attention.head_count");
    let d_model = u("embedding_length");
    let head_dim = file
        .meta_u64_opt(&key("attention.key_length"))
        .unwrap()
        .unwrap_or(d_model / heads);
    let layers = u("block_count");
    let tied = file.tensor("output.weight").is_none();
    let model_type = match arch {
        "gemma3" => "gemma3_text",
        a => a,
    };
    let mut c = json!({
        "model_type": model_type,
        "hidden_size": d_model,
        "intermediate_size": u("feed_forward_length"),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": u("attention.head_count_kv"),
        "max_position_embeddings": u("context_length"),
        "rms_norm_eps": f("attention.layer_norm_rms_epsilon"),
        "rope_theta": f("rope.freq_base"),
        "tie_word_embeddings": tied,
    });
    // Phi-3's config has no head_dim: its heads are d_model / heads wide.
    if arch != "phi3" {
        c["head_dim"] = json!(head_dim);
    }
    match arch {
        "gemma3" => {
            c["sliding_window"] = json!(u("attention.sliding_window"));
            c["query_pre_attn_scalar"] = json!(head_dim);
        }
        "gemma2" => {
            c["hidden_activation"] = json!("gelu_pytorch_tanh");
            c["sliding_window"] = json!(u("attention.sliding_window"));
            // 27B (46 layers) scales by d_model / heads; the rest by head_dim.
            let scalar = if layers == 46 {
                d_model / heads
            } else {
                head_dim
            };
            c["query_pre_attn_scalar"] = json!(scalar);
            for cap in ["attn_logit_softcapping", "final_logit_softcapping"] {
                let v = file.meta_f32_opt(&key(cap)).unwrap();
                c[cap] = v.map_or(Value::Null, |v| json!(v as f64));
            }
            // transformers: sliding where (layer + 1) % 2 != 0.
            let types: Vec<_> = (0..layers)
                .map(|l| match (l + 1) % 2 {
                    0 => "full_attention",
                    _ => "sliding_attention",
                })
                .collect();
            c["layer_types"] = json!(types);
        }
        "phi3" => {
            c["hidden_act"] = json!("silu");
            c["sliding_window"] = file
                .meta_u64_opt(&key("attention.sliding_window"))
                .unwrap()
                .map_or(Value::Null, |w| json!(w));
            let n_rot = file
                .meta_u64_opt(&key("rope.dimension_count"))
                .unwrap()
                .unwrap_or(head_dim);
            c["partial_rotary_factor"] = json!((n_rot * heads) as f64 / d_model as f64);
            if let Some(original) = file
                .meta_u64_opt(&key("rope.scaling.original_context_length"))
                .unwrap()
            {
                c["original_max_position_embeddings"] = json!(original);
            }
            c["rope_scaling"] = phi3_rope_scaling(file, gguf, arch);
        }
        "smollm3" => {
            c["hidden_act"] = json!("silu");
            // 1: the layer rotates; llama.cpp's smollm3 skips every 4th.
            let pattern: Vec<u64> = (0..layers).map(|l| ((l + 1) % 4 != 0) as u64).collect();
            c["no_rope_layers"] = json!(pattern);
            c["no_rope_layer_interval"] = json!(4);
            c["use_sliding_window"] = json!(false);
        }
        _ => {}
    }
    let model = TinyModel {
        arch,
        head_dim: head_dim as usize,
        tied,
    };
    (serde_json::to_vec_pretty(&c).unwrap(), model)
}

/// Phi-3's `rope_scaling`: `null`, or LongRoPE's two factor lists (the
/// file's `rope_factors_*` tensors). Transformers scales cos and sin by
/// `attention_factor`, else by sqrt(1 + ln s / ln original) with s = context
/// / original (1 where s <= 1); the file's own `attn_factor` is written as
/// `attention_factor` where it is not that value.
fn phi3_rope_scaling(file: &GgufFile, gguf: &[u8], arch: &str) -> Value {
    let key = |k: &str| format!("{arch}.{k}");
    let (Some(long), Some(short)) = (
        file.tensor("rope_factors_long.weight"),
        file.tensor("rope_factors_short.weight"),
    ) else {
        return Value::Null;
    };
    let values = |t: &TensorInfo| -> Vec<f64> {
        let bytes = file.tensor_bytes(gguf, t).unwrap();
        dequantize(t.dtype, bytes, t.n_elements as usize)
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect()
    };
    let mut scaling = json!({
        "type": "longrope",
        "long_factor": values(long),
        "short_factor": values(short),
    });
    let context = file.meta_u64(&key("context_length")).unwrap() as f64;
    let original = file
        .meta_u64(&key("rope.scaling.original_context_length"))
        .unwrap() as f64;
    let scale = context / original;
    let derived = match scale > 1.0 {
        true => (1.0 + scale.ln() / original.ln()).sqrt(),
        false => 1.0,
    };
    if let Some(a) = file.meta_f32_opt(&key("rope.scaling.attn_factor")).unwrap() {
        if a != derived as f32 {
            scaling["attention_factor"] = json!(a as f64);
        }
    }
    scaling
}
