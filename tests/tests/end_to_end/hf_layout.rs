//! Hugging Face checkpoints run through the same model code as GGUF files: a
//! tiny model of each architecture, written as GGUF and as the checkpoint
//! transformers would store (`wick_tests::hf_checkpoint`), gives
//! bit-identical logits both ways, for F32 and F16 checkpoints and for BF16
//! ones (read as F32, exactly) against a GGUF file of the same values. Any
//! wrong name, norm offset or rotary layout would move the logits by far
//! more than a bit. The real tiny Gemma 2, Phi-3 and SmolLM3 files, written
//! as checkpoints, run bit for bit as the files dequantized to F32 do, and
//! give the Q8_0 files' greedy tokens; configs of theirs that wick would run
//! otherwise than transformers are refused naming the field.

use wick::format::quant::{dequantize, GgmlType};
use wick::format::{GgufFile, GgufWriter, SafetensorsError};
use wick::hf_folder::{HfConfigFiles, HfFiles, HfLoader};
use wick::model::hf::HfOptions;
use wick::model::ModelError;
use wick::pipeline::{KvDtype, PipelineOptions};
use wick::tokenizer::chat_template::{ChatMessage, ChatTemplate};
use wick::{Engine, WickError};
use wick_tests::hf_checkpoint::{
    checkpoint_of_gguf, tokenizer_config_json, tokenizer_json, Storage, TinyModel, CHAT_TEMPLATE,
    EOS_ID,
};
use wick_tests::{gpu, logits_by_steps, max_abs_diff, model_path};

/// Longer than Gemma's test window (4), so its local layers slide.
const IDS: [u32; 9] = [3, 104, 259, 257, 30, 200, 271, 5, 258];

/// An f32 KV cache: these tests compare weights and kernels, and an f16
/// cache would round keys that differ in their last f32 bits (F32 weights
/// against Q4_1 decoded in the kernel) to neighbouring halves, moving logits
/// by 1e-3 where the kernels alone move them by 3e-5.
fn opts() -> PipelineOptions {
    PipelineOptions {
        ctx_len: Some(32),
        kv_dtype: KvDtype::F32,
        ..Default::default()
    }
}

fn load_gguf(bytes: &[u8]) -> Engine {
    pollster::block_on(Engine::load(gpu(), bytes, &opts(), &mut |_| {})).unwrap()
}

struct Checkpoint {
    config: Vec<u8>,
    shards: Vec<Vec<u8>>,
    index: Option<Vec<u8>>,
    tokenizer: Vec<u8>,
    tokenizer_config: Vec<u8>,
}

impl Checkpoint {
    fn of(model: &TinyModel, gguf: &[u8], storage: Storage, shards: usize) -> Checkpoint {
        let (shards, index) = model.safetensors(gguf, storage, shards);
        Checkpoint {
            config: model.config_json(),
            shards,
            index,
            tokenizer: tokenizer_json(),
            tokenizer_config: tokenizer_config_json(),
        }
    }

    fn meta(&self) -> HfConfigFiles<'_> {
        HfConfigFiles {
            config: &self.config,
            tokenizer: &self.tokenizer,
            tokenizer_config: Some(&self.tokenizer_config),
            index: self.index.as_deref(),
        }
    }

    fn load(&self, hf_opts: &HfOptions) -> Result<Engine, WickError> {
        self.load_with(&opts(), hf_opts)
    }

    fn load_with(&self, opts: &PipelineOptions, hf_opts: &HfOptions) -> Result<Engine, WickError> {
        let files = HfFiles {
            meta: self.meta(),
            shards: self.shards.iter().map(Vec::as_slice).collect(),
        };
        pollster::block_on(Engine::load_hf(gpu(), &files, opts, hf_opts, &mut |_| {}))
    }
}

/// Prefill in chunks of 4, then two decode steps: both step shapes.
fn logits(engine: &mut Engine) -> Vec<Vec<f32>> {
    logits_by_steps(engine, &IDS, 4, 2)
}

fn assert_bit_identical(arch: &'static str, storage: Storage) {
    let model = TinyModel::new(arch);
    let gguf = model.gguf(storage);
    let want = logits(&mut load_gguf(&gguf));
    let ckpt = Checkpoint::of(&model, &gguf, storage, 1);
    let got = logits(&mut ckpt.load(&HfOptions::default()).unwrap());
    assert_eq!(got.len(), want.len());
    for (pos, (g, w)) in got.iter().zip(&want).enumerate() {
        let same = g.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same,
            "{arch} {storage:?}: position {pos} differs by up to {}",
            wick_tests::max_abs_diff(g, w)
        );
    }
}

#[test]
fn llama_checkpoints_equal_gguf() {
    for storage in [Storage::F32, Storage::F16, Storage::Bf16] {
        assert_bit_identical("llama", storage);
    }
}

#[test]
fn qwen2_checkpoints_equal_gguf() {
    for storage in [Storage::F32, Storage::F16, Storage::Bf16] {
        assert_bit_identical("qwen2", storage);
    }
}

#[test]
fn gemma3_checkpoints_equal_gguf() {
    for storage in [Storage::F32, Storage::F16, Storage::Bf16] {
        assert_bit_identical("gemma3", storage);
    }
}

#[test]
fn sharded_checkpoint_equals_one_file() {
    let model = TinyModel::new("qwen2");
    let gguf = model.gguf(Storage::F16);
    let one = Checkpoint::of(&model, &gguf, Storage::F16, 1);
    let three = Checkpoint::of(&model, &gguf, Storage::F16, 3);
    assert!(three.index.is_some() && three.shards.len() == 3);
    let want = logits(&mut one.load(&HfOptions::default()).unwrap());
    assert_eq!(
        logits(&mut three.load(&HfOptions::default()).unwrap()),
        want
    );

    // An index that places a tensor in the wrong shard is refused.
    let mut swapped = three;
    swapped.shards.swap(0, 1);
    match swapped.load(&HfOptions::default()) {
        Err(WickError::Model(ModelError::Safetensors(SafetensorsError::BadIndex(msg)))) => {
            assert!(msg.contains("listed under"), "{msg}")
        }
        other => panic!("expected a bad index, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn tokenizer_and_chat_template_come_from_the_tokenizer_files() {
    let model = TinyModel::new("llama");
    let gguf = model.gguf(Storage::F16);
    let gguf_engine = load_gguf(&gguf);
    let hf = Checkpoint::of(&model, &gguf, Storage::F16, 1)
        .load(&HfOptions::default())
        .unwrap();
    for text in ["hello world", "hell<|endoftext|>o\n  x"] {
        assert_eq!(
            hf.tokenizer.encode(text, true, true).unwrap(),
            gguf_engine.tokenizer.encode(text, true, true).unwrap(),
            "{text:?}"
        );
    }
    assert_eq!(
        hf.tokenizer.encode("hello", true, false).unwrap(),
        [258, 111]
    );
    assert_eq!(hf.tokenizer.eos_id(), Some(EOS_ID));
    assert!(!hf.tokenizer.add_bos());
    let template = ChatTemplate::from_gguf(&hf.gguf, &hf.tokenizer).unwrap();
    assert_eq!(template.source(), CHAT_TEMPLATE);
    let rendered = template
        .render(&[ChatMessage::new("user", "hi")], false)
        .unwrap();
    assert_eq!(rendered, "hi<|endoftext|>");
}

/// Q8_0 at load against the unquantized checkpoint. Q8_0 rounds each weight
/// to a step of 1/127 of its 32-block's largest magnitude: for these uniform
/// random weights an error of about 0.4 % of a weight's spread, compounding
/// over the 9 matrices on a token's path. Measured on this model (lavapipe):
/// cosine similarity of every position's logits >= 0.99978 and a largest
/// difference of 2.4 % of the logits' range. The bounds (0.999, 6 %) leave
/// room for other GPUs' rounding; a wrong block layout or scale makes errors
/// the size of the logits themselves and fails both.
#[test]
fn q8_0_at_load_stays_close_to_unquantized() {
    let model = TinyModel::new("llama");
    let gguf = model.gguf(Storage::F32);
    let ckpt = Checkpoint::of(&model, &gguf, Storage::F32, 1);
    let want = logits(&mut ckpt.load(&HfOptions::default()).unwrap());
    let q8 = HfOptions {
        quantize: Some(GgmlType::Q8_0),
    };
    let mut engine = ckpt.load(&q8).unwrap();
    let got = logits(&mut engine);
    for (pos, (g, w)) in got.iter().zip(&want).enumerate() {
        let dot: f64 = g.iter().zip(w).map(|(a, b)| *a as f64 * *b as f64).sum();
        let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        let cos = dot / (norm(g) * norm(w));
        let range = w.iter().fold(0f32, |m, x| m.max(x.abs()));
        let diff = wick_tests::max_abs_diff(g, w);
        eprintln!("position {pos}: cosine {cos:.7}, max diff {diff} of range {range}");
        assert!(cos > 0.999, "position {pos}: cosine {cos}");
        assert!(diff < 0.06 * range, "position {pos}: {diff} of {range}");
    }
}

/// Feeds the checkpoint's shards to the engine in chunks of the given sizes
/// (cycled), as a browser's stream would deliver them.
fn load_in_chunks(ckpt: &Checkpoint, sizes: &[usize], cut: usize) -> Result<Engine, WickError> {
    let headers: Vec<_> = ckpt
        .shards
        .iter()
        .map(|s| wick::format::SafetensorsHeader::parse(s).unwrap())
        .collect();
    let mut loader = HfLoader::new(gpu(), opts(), &HfOptions::default(), &ckpt.meta(), &headers)?;
    let mut i = 0;
    for (shard, bytes) in ckpt.shards.iter().enumerate() {
        // `cut` bytes of the last shard never arrive.
        let len = if shard + 1 == ckpt.shards.len() {
            bytes.len() - cut
        } else {
            bytes.len()
        };
        let mut at = 0;
        while at < len {
            let n = sizes[i % sizes.len()].min(len - at);
            loader.push(shard, &bytes[at..at + n], &mut |_| {})?;
            at += n;
            i += 1;
        }
        // A short shard is reported as its stream ends, not at `finish`.
        loader.end_shard(shard)?;
    }
    assert_eq!(cut, 0, "a shard cut short passed end_shard");
    loader.finish()
}

#[test]
fn checkpoints_stream_in_chunks_of_any_size() {
    // Qwen2 F16 passes its tensors through; Llama BF16 converts every one.
    for (arch, storage) in [("qwen2", Storage::F16), ("llama", Storage::Bf16)] {
        let model = TinyModel::new(arch);
        let gguf = model.gguf(storage);
        let ckpt = Checkpoint::of(&model, &gguf, storage, 2);
        let want = logits(&mut ckpt.load(&HfOptions::default()).unwrap());
        let mut streamed = load_in_chunks(&ckpt, &[1, 7, 4093, 100_000, 3], 0).unwrap();
        assert_eq!(logits(&mut streamed), want, "{arch}");
        match load_in_chunks(&ckpt, &[4093], 5) {
            Err(WickError::Model(ModelError::Truncated(msg))) => {
                assert!(msg.contains("shard 1") && msg.contains("model."), "{msg}")
            }
            other => panic!(
                "{arch}: expected a truncated shard, got {:?}",
                other.map(|_| ())
            ),
        }
    }
}

/// A real model's shapes (SmolLM2: 9 query heads sharing 3 key/value heads of
/// 64, RoPE base 1e5, tied head): its Q4_1 GGUF file's tensors, dequantized,
/// written as an F32 checkpoint. The two loads hold the same values; only the
/// kernels differ (Q4_1 decoded in the matmul vs F32 read), which moved the
/// logits by at most 3.1e-5 on lavapipe (gemma-3-270m and Qwen2.5-0.5B
/// converted the same way: 1.7e-5 and 2.5e-5). A rotary, norm or name
/// mistake moves them by whole units, so 1e-3 tells the two apart.
#[test]
fn a_real_models_tensors_as_a_checkpoint_match_its_gguf_file() {
    let bytes = std::fs::read(model_path("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    let (config, model) = checkpoint_of_gguf(&bytes);
    let (shards, _) = model.safetensors(&bytes, Storage::F32, 1);
    // The tiny tokenizer: the input is ids, and the model's vocabulary is
    // only in its GGUF metadata.
    let ckpt = Checkpoint {
        config,
        shards,
        index: None,
        tokenizer: tokenizer_json(),
        tokenizer_config: tokenizer_config_json(),
    };
    let ids = [1, 504, 3575, 282, 4649, 314];
    let got = logits_by_steps(&mut ckpt.load(&HfOptions::default()).unwrap(), &ids, 4, 2);
    drop(ckpt);
    let want = logits_by_steps(&mut load_gguf(&bytes), &ids, 4, 2);
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap();
    for (pos, (g, w)) in got.iter().zip(&want).enumerate() {
        let diff = max_abs_diff(g, w);
        assert!(diff < 1e-3, "position {pos}: logits differ by {diff}");
        assert_eq!(argmax(g), argmax(w), "position {pos}");
    }
}

fn opts_at(ctx: usize) -> PipelineOptions {
    PipelineOptions {
        ctx_len: Some(ctx),
        ..opts()
    }
}

/// Greedy decoding: `prompt` prefilled, then `n` tokens, each the argmax of
/// the last logits. The ids chosen and the logits at every position.
fn greedy(engine: &mut Engine, prompt: &[u32], n: usize) -> (Vec<u32>, Vec<Vec<f32>>) {
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap() as u32;
    engine.pipeline.reset();
    let mut logits = pollster::block_on(engine.pipeline.prefill(prompt, prompt.len())).unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = argmax(logits.last().unwrap());
        ids.push(id);
        logits.push(pollster::block_on(engine.pipeline.decode(id)).unwrap());
    }
    (ids, logits)
}

/// The checkpoint of a real GGUF file's dequantized tensors (F32), with
/// the tiny tokenizer: the input is ids.
fn f32_checkpoint(config: Vec<u8>, model: &TinyModel, gguf: &[u8]) -> Checkpoint {
    let (shards, _) = model.safetensors(gguf, Storage::F32, 1);
    Checkpoint {
        config,
        shards,
        index: None,
        tokenizer: tokenizer_json(),
        tokenizer_config: tokenizer_config_json(),
    }
}

/// The GGUF file with every tensor dequantized to F32: the values of the
/// checkpoint `checkpoint_of_gguf` writes, read by the same kernels.
fn as_f32(gguf: &[u8]) -> Vec<u8> {
    let file = GgufFile::parse(gguf).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &file.metadata {
        w = w.meta(k.clone(), v.clone());
    }
    for t in &file.tensors {
        let bytes = file.tensor_bytes(gguf, t).unwrap();
        let values = dequantize(t.dtype, bytes, t.n_elements as usize).unwrap();
        w = w.tensor_f32(t.name.clone(), &t.dims, &values);
    }
    w.to_bytes()
}

/// A greedy run (`greedy`) at context `ctx`.
struct Run {
    ctx: usize,
    ids: Vec<u32>,
    logits: Vec<Vec<f32>>,
}

const GREEDY_TOKENS: usize = 8;

fn run_gguf(gguf: &[u8], ctx: usize, prompt: &[u32]) -> Run {
    let mut engine =
        pollster::block_on(Engine::load(gpu(), gguf, &opts_at(ctx), &mut |_| {})).unwrap();
    let (ids, logits) = greedy(&mut engine, prompt, GREEDY_TOKENS);
    Run { ctx, ids, logits }
}

/// Largest logit difference the checkpoint and the Q8_0 file may show. The
/// checkpoint holds the file's weights dequantized, and runs bit for bit as
/// the F32 file of those values does (checked first), so only the kernels
/// differ: Q8_0 decoded in the matmul against F32 read. Measured on
/// lavapipe over 80 positions: at most 4.0e-4 (Gemma 2, logits up to 26),
/// 1.35e-3 (SmolLM3, logits up to 2.6: a few positions reach 1e-4 to 1e-3,
/// most stay near 1e-5), 9e-5 (Phi-3, both factor sets). A wrong
/// name, norm offset, rotary order, window, soft-cap, NoPE layer or
/// LongRoPE factor set moves them by tenths to whole units (Phi-3's two
/// factor sets alone: 0.47 a position on average in llama.cpp), and fails
/// the bit-for-bit check besides; 1e-2 leaves other GPUs' rounding room.
const Q8_0_TOLERANCE: f32 = 1e-2;

/// The checkpoint's greedy runs at `contexts` against the GGUF file's: bit
/// for bit against the file dequantized to F32, the same ids and logits
/// within `Q8_0_TOLERANCE` at every position against the file itself,
/// whose runs are returned.
fn assert_same_runs(
    what: &str,
    gguf: &[u8],
    config: Vec<u8>,
    model: &TinyModel,
    contexts: &[usize],
    prompt: &[u32],
) -> Vec<Run> {
    let hf: Vec<Run> = {
        let ckpt = f32_checkpoint(config, model, gguf);
        contexts
            .iter()
            .map(|&ctx| {
                let mut engine = ckpt
                    .load_with(&opts_at(ctx), &HfOptions::default())
                    .unwrap();
                let (ids, logits) = greedy(&mut engine, prompt, GREEDY_TOKENS);
                Run { ctx, ids, logits }
            })
            .collect()
    };
    {
        let f32_file = as_f32(gguf);
        for h in &hf {
            let want = run_gguf(&f32_file, h.ctx, prompt);
            for (pos, (g, w)) in h.logits.iter().zip(&want.logits).enumerate() {
                let same = g.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{what}, context {}: position {pos} differs from the F32 file by {}",
                    h.ctx,
                    max_abs_diff(g, w)
                );
            }
        }
    }
    let mut runs = Vec::new();
    for h in hf {
        let want = run_gguf(gguf, h.ctx, prompt);
        assert_eq!(h.ids, want.ids, "{what}, context {}: greedy ids", h.ctx);
        let mut worst = 0f32;
        for (pos, (g, w)) in h.logits.iter().zip(&want.logits).enumerate() {
            let diff = max_abs_diff(g, w);
            worst = worst.max(diff);
            assert!(
                diff < Q8_0_TOLERANCE,
                "{what}, context {}: position {pos} differs by {diff}",
                h.ctx
            );
        }
        eprintln!(
            "{what}, context {}: greedy {:?}, logits within {worst:.2e} of the Q8_0 file",
            h.ctx, want.ids
        );
        runs.push(want);
    }
    runs
}

/// Gemma 2, Phi-3 and SmolLM3 from Hugging Face folders against their GGUF
/// files: the tiny models' tensors, dequantized, written as the F32
/// checkpoint transformers would store (`checkpoint_of_gguf`: Gemma's norms
/// as w, SmolLM3's q/k rows in HF's rotary order, Phi-3's fused tensors
/// under their HF names and its LongRoPE factors as `rope_scaling` lists).
/// A 72-token prompt passes Gemma 2's 64-token window; Phi-3 runs at a
/// context over its original 256 (long factors) and at one within it (short
/// factors). The attention factor a config without `attention_factor`
/// derives is the `model::hf` unit tests' (the tiny file's 1.190238 is
/// Phi-3.5's, from 131072 / 4096, so its checkpoint carries it).
#[test]
fn gemma2_phi3_and_smollm3_checkpoints_match_their_gguf_files() {
    let prompt: Vec<u32> = (0..72u32).map(|i| 3 + (i * 7919) % 30_000).collect();
    for (file, contexts) in [
        ("tiny-gemma2.q8_0.gguf", &[128][..]),
        ("tiny-smollm3.q8_0.gguf", &[128]),
        ("tiny-phi3.q8_0.gguf", &[512, 128]),
    ] {
        let gguf = std::fs::read(model_path(file)).unwrap();
        let (config, model) = checkpoint_of_gguf(&gguf);
        let runs = assert_same_runs(file, &gguf, config, &model, contexts, &prompt);
        if let [long, short] = &runs[..] {
            // The two factor sets really differ on this prompt.
            let apart = long
                .logits
                .iter()
                .zip(&short.logits)
                .map(|(l, s)| max_abs_diff(l, s))
                .fold(0f32, f32::max);
            assert!(
                apart > 0.1,
                "{file}: long and short factors agree ({apart})"
            );
        }
    }
}

/// A safetensors file of no tensors: enough for a load refused by its config.
fn no_tensors() -> Vec<u8> {
    let mut out = 8u64.to_le_bytes().to_vec();
    out.extend_from_slice(b"{}      ");
    out
}

/// Configs of these architectures that wick would run otherwise than
/// transformers are refused, naming the field.
#[test]
fn gemma2_phi3_and_smollm3_configs_wick_runs_otherwise_are_refused_by_field() {
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 5] = [
        // Layer 3 rotating: wick's smollm3 skips RoPE there.
        (
            "tiny-smollm3.q8_0.gguf",
            |c| c["no_rope_layers"] = serde_json::json!([1, 1, 1, 1]),
            "`no_rope_layers[3]`",
        ),
        (
            "tiny-smollm3.q8_0.gguf",
            |c| c["no_rope_layer_interval"] = serde_json::json!(3),
            "`no_rope_layer_interval`",
        ),
        (
            "tiny-phi3.q8_0.gguf",
            |c| c["rope_scaling"]["type"] = serde_json::json!("dynamic"),
            "`rope_scaling.type`",
        ),
        (
            "tiny-phi3.q8_0.gguf",
            |c| c["rope_scaling"]["short_mscale"] = serde_json::json!(1.1),
            "`rope_scaling.short_mscale`",
        ),
        // Layer 0 global, layer 1 sliding: the other way round from wick's.
        (
            "tiny-gemma2.q8_0.gguf",
            |c| c["layer_types"] = serde_json::json!(["full_attention", "sliding_attention"]),
            "`layer_types[0]`",
        ),
    ];
    for (file, edit, field) in cases {
        let gguf = std::fs::read(model_path(file)).unwrap();
        let (config, _) = checkpoint_of_gguf(&gguf);
        let mut config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        edit(&mut config);
        let ckpt = Checkpoint {
            config: serde_json::to_vec(&config).unwrap(),
            shards: vec![no_tensors()],
            index: None,
            tokenizer: tokenizer_json(),
            tokenizer_config: tokenizer_config_json(),
        };
        match ckpt.load(&HfOptions::default()) {
            Err(WickError::Model(ModelError::Config(msg))) => {
                assert!(msg.contains(field), "{file}: {msg}")
            }
            other => panic!(
                "{file}: expected a refusal naming {field}, got {:?}",
                other.map(|_| ())
            ),
        }
    }
}
