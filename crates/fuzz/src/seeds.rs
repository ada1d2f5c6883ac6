//! The starting corpus, made at run time from the model files present (so no
//! large blobs are committed) plus the small hand-written seeds in `seeds/`.
//!
//! From each GGUF: its header, cut where the tensor data starts (plus the
//! first bytes of the data, so norm vectors can be dequantized), run once;
//! a reduced
//! copy with the vocabulary cut to its first entries (an execution then
//! builds a tokenizer in microseconds, not a 150k-entry one); its chat
//! template; and, for BPE vocabularies, the same reduced vocabulary written
//! as a Hugging Face `tokenizer.json`.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{json, Map, Value};
use wick::format::gguf::{GgufFile, MetaValue};
use wick::format::gguf_write::GgufWriter;
use wick::format::SafetensorsHeader;

/// Starting inputs of each target, by target name.
#[derive(Default)]
pub struct Seeds {
    /// Vocabulary cut to [`REDUCED_VOCAB`] entries, for the tokenizer.
    pub gguf: Vec<Vec<u8>>,
    /// Vocabulary cut to [`LOAD_VOCAB`] entries, for the load path, which
    /// reads none of it: an execution then parses a few KB, not 30.
    pub gguf_small: Vec<Vec<u8>>,
    /// Whole real headers: run once each as they are, not mutated (a
    /// 150k-token vocabulary makes every execution slow without reaching
    /// code the reduced copies do not).
    pub gguf_once: Vec<Vec<u8>>,
    pub tokenizer_json: Vec<Vec<u8>>,
    pub chat_template: Vec<Vec<u8>>,
    /// `config.json`, NUL, a safetensors file or its prefix (`hf_folder`).
    pub hf_folder: Vec<Vec<u8>>,
}

impl Seeds {
    pub fn for_target(&self, name: &str) -> &[Vec<u8>] {
        match name {
            "gguf_load" => &self.gguf_small,
            "tokenizer_gguf" => &self.gguf,
            "tokenizer_json" => &self.tokenizer_json,
            "hf_folder" => &self.hf_folder,
            _ => &self.chat_template,
        }
    }

    /// Not for `tokenizer_gguf`: building a real 262k-entry vocabulary takes
    /// seconds, and the engine's tests build each real one already.
    pub fn once_for_target(&self, name: &str) -> &[Vec<u8>] {
        match name {
            "gguf_load" => &self.gguf_once,
            _ => &[],
        }
    }
}

/// Vocabulary entries kept in a reduced seed.
const REDUCED_VOCAB: usize = 512;
const LOAD_VOCAB: usize = 8;
/// Tensor bytes kept after a header: enough for the first small tensors;
/// more only makes every execution copy more.
const DATA_PREFIX: u64 = 4 << 10;
/// Headers larger than this are only used reduced.
const MAX_RAW_HEADER: u64 = 32 << 20;

/// Seeds from every `.gguf` in `dirs` and the committed ones in `committed`.
pub fn collect(dirs: &[&Path], committed: &Path) -> Seeds {
    let mut seeds = Seeds::default();
    // So the GGUF targets start from a loadable header with no model present.
    let tiny = tiny_llama();
    seeds.gguf.push(tiny.clone());
    seeds.gguf_small.push(tiny);
    seeds.hf_folder = tiny_checkpoints();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        seeds
            .hf_folder
            .extend(paths.iter().filter_map(|p| folder_seed(p)));
        for path in paths
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        {
            if let Err(e) = from_model(path, &mut seeds) {
                eprintln!("seed {}: {e}", path.display());
            }
        }
    }
    for (sub, into) in [
        ("gguf", &mut seeds.gguf),
        ("gguf", &mut seeds.gguf_small),
        ("tokenizer_json", &mut seeds.tokenizer_json),
        ("chat_template", &mut seeds.chat_template),
    ] {
        if let Ok(entries) = std::fs::read_dir(committed.join(sub)) {
            let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            into.extend(paths.iter().filter_map(|p| std::fs::read(p).ok()));
        }
    }
    seeds
}

fn from_model(path: &Path, seeds: &mut Seeds) -> Result<(), Box<dyn std::error::Error>> {
    let mut f = std::fs::File::open(path)?;
    let file = GgufFile::read_header(std::io::BufReader::new(&mut f))?;
    f.seek(SeekFrom::Start(0))?;
    if file.data_offset <= MAX_RAW_HEADER {
        let mut raw = Vec::new();
        f.by_ref()
            .take(file.data_offset + DATA_PREFIX)
            .read_to_end(&mut raw)?;
        seeds.gguf_once.push(raw);
    }
    let mut data = Vec::new();
    f.seek(SeekFrom::Start(file.data_offset))?;
    f.take(DATA_PREFIX).read_to_end(&mut data)?;
    let reduced = reduce(&file, REDUCED_VOCAB);
    let mut bytes = header_of(&reduced, &file)?;
    bytes.extend_from_slice(&data);
    seeds.gguf.push(bytes);
    let mut bytes = header_of(&reduce(&file, LOAD_VOCAB), &file)?;
    bytes.extend_from_slice(&data);
    seeds.gguf_small.push(bytes);
    if let Some(t) = reduced.iter().find(|(k, _)| k == "tokenizer.chat_template") {
        if let Some(s) = t.1.as_str() {
            seeds.chat_template.push(s.as_bytes().to_vec());
            let mut with_messages = s.as_bytes().to_vec();
            with_messages.push(0);
            with_messages.extend_from_slice(
                br#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}]"#,
            );
            seeds.chat_template.push(with_messages);
        }
    }
    if let Some(json) = bpe_tokenizer_json(&reduced) {
        seeds.tokenizer_json.push(json);
    }
    Ok(())
}

/// The header again with the same tensors (so the same offsets).
fn header_of(
    meta: &[(String, MetaValue)],
    file: &GgufFile,
) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let mut w = GgufWriter::new().version(file.version);
    for (k, v) in meta {
        w = w.meta(k.clone(), v.clone());
    }
    for t in &file.tensors {
        w = w.declare_tensor(t.name.clone(), &t.dims, t.dtype);
    }
    Ok(w.try_header()?)
}

/// Metadata with the vocabulary cut to `keep` entries: merges
/// kept only where both parts and their join are still tokens (a BPE model
/// refuses a merge of unknown tokens), special ids past the end moved in.
fn reduce(file: &GgufFile, keep: usize) -> Vec<(String, MetaValue)> {
    let tokens: Vec<String> = file
        .meta_str_array_opt("tokenizer.ggml.tokens")
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .take(keep)
        .map(str::to_string)
        .collect();
    let kept: HashSet<&str> = tokens.iter().map(String::as_str).collect();
    let n = tokens.len() as u64;
    let mut out = Vec::new();
    for (k, v) in &file.metadata {
        let v = match (k.as_str(), v) {
            ("tokenizer.ggml.merges", MetaValue::Array(merges)) => MetaValue::Array(
                merges
                    .iter()
                    .filter(|m| {
                        let Some((a, b)) = m.as_str().and_then(|m| m.split_once(' ')) else {
                            return false;
                        };
                        kept.contains(a)
                            && kept.contains(b)
                            && kept.contains((a.to_string() + b).as_str())
                    })
                    .cloned()
                    .collect(),
            ),
            (k, MetaValue::Array(items)) if k.starts_with("tokenizer.ggml.") => {
                MetaValue::Array(items.iter().take(keep).cloned().collect())
            }
            (k, v) if k.ends_with("_token_id") && v.as_u64().is_some_and(|id| id >= n) => {
                MetaValue::U32(n.saturating_sub(1) as u32)
            }
            _ => v.clone(),
        };
        out.push((k.clone(), v));
    }
    out
}

/// A byte-level BPE `tokenizer.json` of a (reduced) GPT-2-style vocabulary;
/// `None` for other vocabularies.
fn bpe_tokenizer_json(meta: &[(String, MetaValue)]) -> Option<Vec<u8>> {
    let get = |key: &str| meta.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    if get("tokenizer.ggml.model")?.as_str()? != "gpt2" {
        return None;
    }
    let tokens = get("tokenizer.ggml.tokens")?.as_array()?;
    let types = get("tokenizer.ggml.token_type").and_then(MetaValue::as_array);
    let mut vocab = Map::new();
    let mut added = Vec::new();
    for (id, t) in tokens.iter().enumerate() {
        let t = t.as_str()?;
        // ggml token type 3: control, an added special token in HF's terms.
        let control = types.and_then(|ty| ty.get(id)).and_then(MetaValue::as_i64) == Some(3);
        if control {
            added.push(json!({"id": id, "content": t, "special": true}));
        }
        vocab.insert(t.to_string(), json!(id));
    }
    let merges: Vec<Value> = get("tokenizer.ggml.merges")
        .and_then(MetaValue::as_array)
        .map(|m| {
            m.iter()
                .filter_map(|s| s.as_str().map(|s| json!(s)))
                .collect()
        })
        .unwrap_or_default();
    let doc = json!({
        "version": "1.0",
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "vocab": vocab, "merges": merges}
    });
    serde_json::to_vec(&doc).ok()
}

/// A one-layer Llama header (F32 tensors declared, 4 KB of zeros after it)
/// with a SentencePiece vocabulary of byte tokens and letters, and a
/// ChatML template: every stage of every GGUF target passes on it.
fn tiny_llama() -> Vec<u8> {
    let (d, ffn, kv) = (32u64, 64u64, 16u64);
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>", "▁"].map(String::from).to_vec();
    let mut types = vec![2i32, 3, 3, 1];
    tokens.extend((b'a'..=b'z').map(|c| (c as char).to_string()));
    types.extend([1; 26]);
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    let n = tokens.len() as u64;
    let scores = (0..n).map(|i| MetaValue::F32(-(i as f32))).collect();
    let s = |v: &str| MetaValue::String(v.into());
    let mut w = GgufWriter::new()
        .meta("general.architecture", s("llama"))
        .meta("llama.block_count", MetaValue::U32(1))
        .meta("llama.embedding_length", MetaValue::U32(d as u32))
        .meta("llama.feed_forward_length", MetaValue::U32(ffn as u32))
        .meta("llama.attention.head_count", MetaValue::U32(4))
        .meta("llama.attention.head_count_kv", MetaValue::U32(2))
        .meta("llama.context_length", MetaValue::U32(128))
        .meta("llama.attention.layer_norm_rms_epsilon", MetaValue::F32(1e-5))
        .meta("llama.rope.freq_base", MetaValue::F32(10000.0))
        .meta("tokenizer.ggml.model", s("llama"))
        .meta("tokenizer.ggml.tokens", MetaValue::Array(tokens.into_iter().map(MetaValue::String).collect()))
        .meta("tokenizer.ggml.scores", MetaValue::Array(scores))
        .meta("tokenizer.ggml.token_type", MetaValue::Array(types.into_iter().map(MetaValue::I32).collect()))
        .meta("tokenizer.ggml.bos_token_id", MetaValue::U32(1))
        .meta("tokenizer.ggml.eos_token_id", MetaValue::U32(2))
        .meta("tokenizer.chat_template", s("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"));
    for (name, dims) in [
        ("token_embd.weight", vec![d, n]),
        ("output_norm.weight", vec![d]),
        ("blk.0.attn_norm.weight", vec![d]),
        ("blk.0.attn_q.weight", vec![d, d]),
        ("blk.0.attn_k.weight", vec![d, kv]),
        ("blk.0.attn_v.weight", vec![d, kv]),
        ("blk.0.attn_output.weight", vec![d, d]),
        ("blk.0.ffn_norm.weight", vec![d]),
        ("blk.0.ffn_gate.weight", vec![d, ffn]),
        ("blk.0.ffn_up.weight", vec![d, ffn]),
        ("blk.0.ffn_down.weight", vec![ffn, d]),
    ] {
        w = w.declare_tensor(name, &dims, wick::format::quant::GgmlType::F32);
    }
    let mut bytes = w.try_header().unwrap_or_default();
    bytes.resize(bytes.len() + DATA_PREFIX as usize, 0);
    bytes
}

/// The tests' tiny decoder checkpoints (Llama, Qwen2, Gemma 3; F16 and
/// BF16), whole and cut after the header, as `hf_folder` inputs.
fn tiny_checkpoints() -> Vec<Vec<u8>> {
    use wick_tests::hf_checkpoint::{Storage, TinyModel};
    let mut out = Vec::new();
    for (arch, storage) in [
        ("llama", Storage::F16),
        ("qwen2", Storage::Bf16),
        ("gemma3", Storage::F16),
    ] {
        let model = TinyModel::new(arch);
        let (files, _) = model.safetensors(&model.gguf(storage), storage, 1);
        let Some(file) = files.first() else { continue };
        let mut seed = model.config_json();
        seed.push(0);
        seed.extend_from_slice(file);
        let cut =
            SafetensorsHeader::parse(file).map_or(file.len(), |h| h.data_offset as usize + 64);
        let config_len = seed.len() - file.len();
        out.push(seed[..config_len + cut.min(file.len())].to_vec());
        out.push(seed);
    }
    out
}

/// A model folder's `config.json`, NUL, its `model.safetensors` up to the
/// end of the header plus DATA_PREFIX bytes; `None` when either is missing.
fn folder_seed(dir: &Path) -> Option<Vec<u8>> {
    let config = std::fs::read(dir.join("config.json")).ok()?;
    let mut f = std::fs::File::open(dir.join("model.safetensors")).ok()?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len).ok()?;
    let header = u64::from_le_bytes(len);
    if header > MAX_RAW_HEADER {
        return None;
    }
    f.seek(SeekFrom::Start(0)).ok()?;
    let mut file = Vec::new();
    f.take(8 + header + DATA_PREFIX)
        .read_to_end(&mut file)
        .ok()?;
    let mut seed = config;
    seed.push(0);
    seed.extend_from_slice(&file);
    Some(seed)
}
