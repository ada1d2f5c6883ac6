//! Real GGUF files: the downloaded models (`scripts/fetch-models.sh`, into
//! `$WICK_MODELS_DIR`, default `<workspace>/models`) and the small MoE models
//! in `tests/fixtures/models`. A missing file fails the test with the command
//! that fetches it, rather than skipping silently.
//!
//! Headers are read the way the browser loader reads them (a prefix, then
//! more as `NeedMoreHeader` asks), and only a first and last row of each
//! tensor is read, so the large files are never loaded whole.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use wick::format::{dequantize, GgmlType, GgufError, GgufFile, TensorInfo};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model(name: &str, fetch: &str) -> PathBuf {
    let dir = std::env::var_os("WICK_MODELS_DIR")
        .map_or_else(|| workspace().join("models"), PathBuf::from);
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "model file {} not found: run scripts/fetch-models.sh {fetch}",
        path.display()
    );
    path
}

fn fixture(name: &str) -> PathBuf {
    let path = workspace().join("tests/fixtures/models").join(name);
    assert!(path.is_file(), "test fixture {} not found", path.display());
    path
}

struct Model {
    path: PathBuf,
    file: File,
    gguf: GgufFile,
}

impl Model {
    /// Parses the header from a growing prefix, then checks the tensor table against the file length.
    fn open(path: PathBuf) -> Model {
        let mut file = File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let mut want = 1u64 << 16;
        loop {
            let n = want.min(len);
            let prefix = read_at(&mut file, 0..n);
            match GgufFile::parse_header(&prefix) {
                Ok(gguf) => {
                    gguf.check_file_len(len).unwrap();
                    return Model { path, file, gguf };
                }
                Err(GgufError::NeedMoreHeader { needed_at_least }) => {
                    assert!(
                        needed_at_least > n && needed_at_least <= len,
                        "{}: asks {needed_at_least}",
                        path.display()
                    );
                    want = needed_at_least.max(2 * n);
                }
                Err(e) => panic!("{}: {e}", path.display()),
            }
        }
    }

    fn tensor(&self, name: &str) -> &TensorInfo {
        self.gguf
            .tensor(name)
            .unwrap_or_else(|| panic!("{}: no tensor {name}", self.path.display()))
    }

    /// Row `row` of a tensor, dequantized.
    fn row(&mut self, t: &TensorInfo, row: u64) -> Vec<f32> {
        let start = self.gguf.tensor_range(t).start + row * t.row_bytes();
        let bytes = read_at(&mut self.file, start..start + t.row_bytes());
        dequantize(t.dtype, &bytes, t.row_elements() as usize).unwrap()
    }

    /// Checks the header facts every model test states, and that the first
    /// and last row of every tensor decode to finite values.
    fn check(&mut self, arch: &str, blocks: u64, n_tensors: usize, types: &[GgmlType]) {
        let g = &self.gguf;
        assert_eq!(g.architecture().unwrap(), arch);
        assert_eq!(g.meta_u64(&format!("{arch}.block_count")).unwrap(), blocks);
        assert_eq!(g.tensors.len(), n_tensors);
        let present: BTreeSet<&str> = g.tensors.iter().map(|t| t.dtype.name()).collect();
        assert_eq!(present, types.iter().map(|t| t.name()).collect());
        assert!(types.iter().all(|t| t.can_dequantize()));
        assert!(g
            .tensors
            .iter()
            .all(|t| t.name.starts_with("blk.") || !t.name.contains("blk")));
        for t in g.tensors.clone() {
            assert_eq!(t.dims.iter().product::<u64>(), t.n_elements);
            for row in [0, t.n_rows() - 1] {
                let v = self.row(&t, row);
                assert!(
                    v.iter().all(|x| x.is_finite()),
                    "{}: {} row {row} not finite",
                    self.path.display(),
                    t.name
                );
            }
        }
    }

    /// First row of an embedding: small but not all zero, like trained or initialised weights.
    fn check_embedding(&mut self, name: &str) {
        let t = self.tensor(name).clone();
        let (rms, max) = stats(&self.row(&t, 0));
        assert!(
            rms > 1e-3 && rms < 1.0 && max < 10.0,
            "{name}: rms {rms}, max {max}"
        );
    }

    /// A norm weight: positive on average, not absurd.
    fn check_norm(&mut self, name: &str) {
        let t = self.tensor(name).clone();
        assert_eq!((t.dims.len(), t.dtype), (1, GgmlType::F32), "{name}");
        let v = self.row(&t, 0);
        let (rms, max) = stats(&v);
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        assert!(
            mean > 0.0 && rms > 1e-2 && max < 1e3,
            "{name}: mean {mean}, rms {rms}, max {max}"
        );
    }
}

fn read_at(file: &mut File, range: std::ops::Range<u64>) -> Vec<u8> {
    let mut buf = vec![0; (range.end - range.start) as usize];
    file.seek(SeekFrom::Start(range.start)).unwrap();
    file.read_exact(&mut buf).unwrap();
    buf
}

fn stats(v: &[f32]) -> (f32, f32) {
    let rms = (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt();
    (rms, v.iter().fold(0.0, |m, x| m.max(x.abs())))
}

#[test]
fn smollm2_q4_1() {
    use GgmlType::*;
    let path = model("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2");
    let mut m = Model::open(path.clone());
    m.check("llama", 30, 272, &[F32, Q4_1, Q8_0]);
    let g = &m.gguf;
    assert_eq!(g.meta_u64("llama.embedding_length").unwrap(), 576);
    assert_eq!(g.meta_u64("llama.attention.head_count").unwrap(), 9);
    assert_eq!(g.meta_u64("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(g.meta_f32("llama.rope.freq_base").unwrap(), 1e5);
    assert_eq!(g.meta_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(
        g.meta_str_array("tokenizer.ggml.tokens").unwrap().len(),
        49152
    );
    assert_eq!(m.tensor("token_embd.weight").dims, [576, 49152]);
    assert_eq!(m.tensor("blk.0.ffn_down.weight").dtype, Q4_1);
    assert!(g.tensor("output.weight").is_none(), "tied embeddings");
    m.check_embedding("token_embd.weight");
    m.check_norm("output_norm.weight");
    // The whole-file parse agrees with the streamed header, and slices the same bytes.
    let whole = std::fs::read(&path).unwrap();
    let parsed = GgufFile::parse(&whole).unwrap();
    assert_eq!(
        (&parsed.metadata, &parsed.tensors),
        (&m.gguf.metadata, &m.gguf.tensors)
    );
    let t = m.tensor("blk.29.attn_v.weight").clone();
    let r = m.gguf.tensor_range(&t);
    assert_eq!(
        parsed.tensor_bytes(&whole, &t).unwrap(),
        &whole[r.start as usize..r.end as usize]
    );
}

#[test]
fn gemma3_q4_k_m() {
    use GgmlType::*;
    let mut m = Model::open(model("gemma-3-270m-q4_k_m.gguf", "gemma3"));
    m.check("gemma3", 18, 236, &[F32, Q4_K, Q5_0, Q6_K, Q8_0]);
    assert_eq!(m.gguf.meta_u64("gemma3.attention.key_length").unwrap(), 256);
    assert_eq!(
        m.gguf.meta_u64("gemma3.attention.sliding_window").unwrap(),
        512
    );
    assert_eq!(
        m.gguf
            .meta_str_array("tokenizer.ggml.tokens")
            .unwrap()
            .len(),
        262144
    );
    m.check_embedding("token_embd.weight");
    m.check_norm("output_norm.weight");
    m.check_norm("blk.0.attn_q_norm.weight");
}

#[test]
fn qwen2_5_coder_awq() {
    use GgmlType::*;
    let mut m = Model::open(model("qwen2.5-coder-0.5b-instruct-awq.gguf", "qwen2"));
    m.check("qwen2", 24, 291, &[F32, Q4_K, Q5_0, Q6_K, Q8_0]);
    assert_eq!(m.gguf.meta_u64("qwen2.embedding_length").unwrap(), 896);
    assert_eq!(m.tensor("blk.0.attn_q.bias").dims, [896]);
    assert_eq!(
        m.gguf
            .meta_str_array("tokenizer.ggml.tokens")
            .unwrap()
            .len(),
        151936
    );
    m.check_embedding("token_embd.weight");
    m.check_embedding("output.weight");
    m.check_norm("output_norm.weight");
}

/// Expert weights are 3-D, experts outermost.
fn check_experts(m: &Model, arch: &str) {
    let n_expert = m.gguf.meta_u64(&format!("{arch}.expert_count")).unwrap();
    assert_eq!(n_expert, 8);
    assert_eq!(
        m.gguf
            .meta_u64(&format!("{arch}.expert_used_count"))
            .unwrap(),
        2
    );
    for name in ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"] {
        let t = m.tensor(&format!("blk.1.{name}.weight"));
        assert_eq!((t.dims.len(), t.dims[2]), (3, n_expert), "{name}");
    }
    assert_eq!(m.tensor("blk.0.ffn_gate_inp.weight").dims, [64, n_expert]);
}

#[test]
fn moe_fixtures() {
    use GgmlType::*;
    let mut m = Model::open(fixture("tiny-mixtral.q8_0.gguf"));
    m.check("llama", 2, 22, &[F32, Q8_0]);
    check_experts(&m, "llama");
    m.check_embedding("token_embd.weight");
    m.check_norm("output_norm.weight");

    let mut m = Model::open(fixture("tiny-qwen2moe.q8_0.gguf"));
    m.check("qwen2moe", 2, 37, &[F32, Q8_0]);
    check_experts(&m, "qwen2moe");
    assert_eq!(
        m.gguf
            .meta_u64("qwen2moe.expert_shared_feed_forward_length")
            .unwrap(),
        64
    );
    assert_eq!(m.tensor("blk.0.ffn_gate_inp_shexp.weight").dims, [64]);
    m.check_embedding("output.weight");

    for (file, types) in [
        ("tiny-qwen3moe.f16.gguf", [F16, F32]),
        ("tiny-qwen3moe.q8_0.gguf", [F32, Q8_0]),
    ] {
        let mut m = Model::open(fixture(file));
        m.check("qwen3moe", 2, 26, &types);
        check_experts(&m, "qwen3moe");
        assert_eq!(
            m.gguf.meta_u64("qwen3moe.attention.key_length").unwrap(),
            16
        );
        m.check_embedding("token_embd.weight");
    }
}

/// The same model stored as F16 and as Q8_0: every Q8_0 row decodes to the
/// F16 row within Q8_0's grid (half a step of amax/127 per 32-block, plus
/// the f16 rounding of the scale), and F32 tensors are identical.
#[test]
fn q8_0_decodes_to_the_f16_model() {
    let mut f16 = Model::open(fixture("tiny-qwen3moe.f16.gguf"));
    let mut q8 = Model::open(fixture("tiny-qwen3moe.q8_0.gguf"));
    let mut compared = 0;
    for t in q8.gguf.tensors.clone() {
        let r = f16.tensor(&t.name).clone();
        assert_eq!(r.dims, t.dims);
        for row in [0, t.n_rows() / 2, t.n_rows() - 1] {
            let (want, got) = (f16.row(&r, row), q8.row(&t, row));
            if t.dtype == GgmlType::F32 {
                assert_eq!(want, got, "{}", t.name);
                continue;
            }
            assert_eq!(
                (r.dtype, t.dtype),
                (GgmlType::F16, GgmlType::Q8_0),
                "{}",
                t.name
            );
            for (i, (w, g)) in want.chunks(32).zip(got.chunks(32)).enumerate() {
                let amax = w.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                let tol = amax * (0.5 / 127.0 + 1.0 / 1024.0) + 1e-6;
                for (a, b) in w.iter().zip(g) {
                    assert!(
                        (a - b).abs() <= tol,
                        "{} row {row} block {i}: {a} vs {b}",
                        t.name
                    );
                }
            }
            compared += 1;
        }
    }
    assert!(compared >= 45, "{compared} rows");
}
