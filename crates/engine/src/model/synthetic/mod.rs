//! Synthetic models: published architectures' exact shapes with deterministic
//! random weights, built in memory as a GGUF file, so a benchmark measures a
//! real model's work on any machine without downloading one.
//!
//! The weights are cheap to make even for 8B parameters: for every (type,
//! row length) a pool of about a million random values is quantized once, and
//! each row of every matrix is a slice of that pool starting at a hashed
//! offset. Values are uniform with standard deviation 1/sqrt(row length), so
//! every matmul after an RMSNorm keeps activations near unit size and logits
//! stay finite through any depth. Norm weights are 1, biases small.
//!
//! The tokenizer is a byte-level BPE with the 256 byte tokens, no merges, and
//! filler tokens up to the vocabulary size: enough for the engine to load the
//! file; benchmarks feed synthetic ids.
//!
//! A file is streamed tensor by tensor ([`SyntheticModel::stream`]) into the
//! engine's `ModelLoader`, so an 8B model is never held twice in memory.
//! No filesystem and no threads: this runs in the browser too.

use crate::format::gguf::MetaValue;
use crate::format::gguf_write::{GgufWriteError, GgufWriter, ALIGNMENT};
use crate::format::quant::{quantize, GgmlType, QuantError};

mod archs;
pub use archs::{Arch, ARCHS, LLAMA_3_1_70B};

/// The matrix types a synthetic model can be stored in, by CLI name.
pub const QUANTS: [(&str, GgmlType); 4] = [
    ("q4_0", GgmlType::Q4_0),
    ("q4_k", GgmlType::Q4_K),
    ("q8_0", GgmlType::Q8_0),
    ("f16", GgmlType::F16),
];

#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    #[error("unknown synthetic model '{name}' (valid: {valid})")]
    UnknownModel { name: String, valid: String },
    #[error("unknown quant '{name}' (valid: {valid})")]
    UnknownQuant { name: String, valid: String },
    #[error(transparent)]
    Write(#[from] GgufWriteError),
    #[error(transparent)]
    Quant(#[from] QuantError),
}

/// The architecture called `name`, or an error listing the valid names.
pub fn arch(name: &str) -> Result<&'static Arch, SyntheticError> {
    ARCHS
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| SyntheticError::UnknownModel {
            name: name.to_string(),
            valid: ARCHS.map(|a| a.name).join(", "),
        })
}

/// The type called `name` in [`QUANTS`], or an error listing the valid names.
pub fn quant(name: &str) -> Result<GgmlType, SyntheticError> {
    QUANTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, t)| t)
        .ok_or_else(|| SyntheticError::UnknownQuant {
            name: name.to_string(),
            valid: QUANTS.map(|(n, _)| n).join(", "),
        })
}

/// The type a `cols`-wide matrix is stored in when the model's type is
/// `quant`: a K-quant needs rows of whole 256-element blocks, so narrower
/// rows fall back as llama.cpp's quantizer does (Q4_K → Q5_0; SmolLM2's 576
/// and Qwen2.5's 896 columns).
pub fn matrix_type(quant: GgmlType, cols: usize) -> GgmlType {
    match quant {
        q if cols % q.block_elements() == 0 => q,
        GgmlType::Q4_K => GgmlType::Q5_0,
        _ => GgmlType::Q8_0,
    }
}

/// How a tensor's values are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    /// A weight matrix: slices of a quantized random pool.
    Matrix,
    /// A norm's weights: all 1.
    Ones,
    /// A bias: small random values.
    Bias,
}

/// One tensor of the file: ggml dims (`[cols, rows]` for a matrix).
#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub dims: Vec<u64>,
    pub dtype: GgmlType,
    fill: Fill,
}

impl TensorSpec {
    /// Stored bytes of the tensor's data (without alignment padding).
    pub fn bytes(&self) -> u64 {
        let rows: u64 = self.dims[1..].iter().product();
        self.dtype.row_bytes(self.dims[0]).unwrap_or(0) * rows
    }
}

impl Arch {
    /// Every tensor in file order, with matrices in `quant` (or its fallback)
    /// and norms and biases in F32; named as `llama::needs` expects.
    pub fn tensors(&self, quant: GgmlType) -> Vec<TensorSpec> {
        let (d, q, kv, ffn) = (
            self.d_model,
            self.n_heads * self.head_dim,
            self.n_kv_heads * self.head_dim,
            self.ffn_dim,
        );
        let matrix = |name: String, rows: usize, cols: usize| TensorSpec {
            name,
            dims: vec![cols as u64, rows as u64],
            dtype: matrix_type(quant, cols),
            fill: Fill::Matrix,
        };
        let vector = |name: String, n: usize, fill: Fill| TensorSpec {
            name,
            dims: vec![n as u64],
            dtype: GgmlType::F32,
            fill,
        };
        let mut out = vec![
            matrix("token_embd.weight".into(), self.vocab_size, d),
            vector("output_norm.weight".into(), d, Fill::Ones),
        ];
        if !self.tied {
            out.push(matrix("output.weight".into(), self.vocab_size, d));
        }
        for l in 0..self.n_layers {
            let n = |s: &str| format!("blk.{l}.{s}");
            out.extend([
                vector(n("attn_norm.weight"), d, Fill::Ones),
                matrix(n("attn_q.weight"), q, d),
                matrix(n("attn_k.weight"), kv, d),
                matrix(n("attn_v.weight"), kv, d),
            ]);
            if self.qkv_bias {
                out.extend([
                    vector(n("attn_q.bias"), q, Fill::Bias),
                    vector(n("attn_k.bias"), kv, Fill::Bias),
                    vector(n("attn_v.bias"), kv, Fill::Bias),
                ]);
            }
            out.extend([
                matrix(n("attn_output.weight"), d, q),
                vector(n("ffn_norm.weight"), d, Fill::Ones),
                matrix(n("ffn_gate.weight"), ffn, d),
                matrix(n("ffn_up.weight"), ffn, d),
                matrix(n("ffn_down.weight"), d, ffn),
            ]);
        }
        out
    }

    /// The GGUF metadata: the architecture's keys and a minimal tokenizer.
    fn metadata(&self, quant: GgmlType) -> Vec<(String, MetaValue)> {
        let a = self.architecture;
        let u = |v: usize| MetaValue::U32(v as u32);
        let mut meta = vec![
            (
                "general.architecture".to_string(),
                MetaValue::String(a.into()),
            ),
            (
                "general.name".to_string(),
                MetaValue::String(format!("synthetic {} {}", self.name, quant.name())),
            ),
        ];
        let keys = [
            ("block_count", u(self.n_layers)),
            ("context_length", u(self.ctx_train)),
            ("embedding_length", u(self.d_model)),
            ("feed_forward_length", u(self.ffn_dim)),
            ("attention.head_count", u(self.n_heads)),
            ("attention.head_count_kv", u(self.n_kv_heads)),
            ("attention.key_length", u(self.head_dim)),
            ("attention.value_length", u(self.head_dim)),
            ("rope.dimension_count", u(self.head_dim)),
            ("rope.freq_base", MetaValue::F32(self.rope_theta)),
            (
                "attention.layer_norm_rms_epsilon",
                MetaValue::F32(self.rms_eps),
            ),
        ];
        meta.extend(keys.into_iter().map(|(k, v)| (format!("{a}.{k}"), v)));
        let tokens = byte_level_tokens(self.vocab_size);
        let string = |s: &str| MetaValue::String(s.into());
        meta.extend([
            ("tokenizer.ggml.model".to_string(), string("gpt2")),
            ("tokenizer.ggml.pre".to_string(), string("gpt-2")),
            (
                "tokenizer.ggml.tokens".to_string(),
                MetaValue::Array(tokens.into_iter().map(MetaValue::String).collect()),
            ),
            (
                "tokenizer.ggml.merges".to_string(),
                MetaValue::Array(Vec::new()),
            ),
        ]);
        meta
    }
}

/// GPT-2's byte-level alphabet (each byte as the character byte-level BPE
/// shows it), then `<synthetic_N>` fillers up to `n` tokens.
fn byte_level_tokens(n: usize) -> Vec<String> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
    let mut shifted = 0;
    let mut tokens: Vec<String> = (0..256u32)
        .map(|b| {
            let c = if printable(b) {
                b
            } else {
                shifted += 1;
                255 + shifted
            };
            char::from_u32(c).expect("below the surrogates").to_string()
        })
        .collect();
    tokens.extend((tokens.len()..n).map(|i| format!("<synthetic_{i}>")));
    tokens.truncate(n);
    tokens
}

/// Quantized random values shared by every matrix of one type and row
/// length: `units` start positions (blocks, or elements for F16) plus one
/// row's worth more, so a row starting at any of them fits.
struct Pool {
    dtype: GgmlType,
    cols: usize,
    units: usize,
    bytes: Vec<u8>,
}

/// Values per pool: quantizing a million floats takes milliseconds.
const POOL_VALUES: usize = 1 << 20;

impl Pool {
    fn new(dtype: GgmlType, cols: usize) -> Result<Pool, QuantError> {
        let be = dtype.block_elements();
        let units = (POOL_VALUES / be).max(1);
        let amplitude = (3.0 / cols as f32).sqrt(); // uniform: std 1/sqrt(cols)
        let seed = ((dtype.id() as u64) << 32) ^ cols as u64;
        let values = uniform(units * be + cols, seed, amplitude);
        Ok(Pool {
            dtype,
            cols,
            units,
            bytes: quantize(dtype, &values)?,
        })
    }
}

/// A 64-bit mix (SplitMix64's finalizer): cheap and well spread.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `n` deterministic values uniform in [-amplitude, amplitude).
fn uniform(n: usize, seed: u64, amplitude: f32) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let r = (mix(seed.wrapping_mul(0x1_0000_0001) ^ i) >> 40) as f32 / (1u64 << 24) as f32;
            (r * 2.0 - 1.0) * amplitude
        })
        .collect()
}

/// A synthetic model ready to stream as GGUF bytes.
pub struct SyntheticModel {
    pub arch: Arch,
    pub quant: GgmlType,
    pub tensors: Vec<TensorSpec>,
    header: Vec<u8>,
    pools: Vec<Pool>,
}

impl SyntheticModel {
    /// Writes the header and quantizes the random pools (fast); the tensor
    /// data is made while streaming.
    pub fn new(arch: &Arch, quant: GgmlType) -> Result<SyntheticModel, SyntheticError> {
        let tensors = arch.tensors(quant);
        let mut w = GgufWriter::new();
        for (k, v) in arch.metadata(quant) {
            w = w.meta(k, v);
        }
        for t in &tensors {
            w = w.declare_tensor(&t.name, &t.dims, t.dtype);
        }
        let header = w.try_header()?;
        let mut pools: Vec<Pool> = Vec::new();
        for t in tensors.iter().filter(|t| t.fill == Fill::Matrix) {
            let cols = t.dims[0] as usize;
            if !pools.iter().any(|p| p.dtype == t.dtype && p.cols == cols) {
                pools.push(Pool::new(t.dtype, cols)?);
            }
        }
        Ok(SyntheticModel {
            arch: arch.clone(),
            quant,
            tensors,
            header,
            pools,
        })
    }

    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        let data: u64 = self
            .tensors
            .iter()
            .map(|t| t.bytes().next_multiple_of(ALIGNMENT))
            .sum();
        self.header.len() as u64 + data
    }

    /// The file's header: metadata and tensor table, up to the data section.
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// Never: a model has a header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Sends the file to `sink` in order: the header, then each tensor's
    /// data in one chunk, then its alignment padding (when there is any) in
    /// another. Only one tensor's data is in memory at a time.
    pub fn stream<E>(&self, mut sink: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        sink(&self.header)?;
        let zeros = [0u8; ALIGNMENT as usize];
        for i in 0..self.tensors.len() {
            let data = self.tensor_data(i);
            sink(&data)?;
            let pad = (data.len() as u64).next_multiple_of(ALIGNMENT) as usize - data.len();
            if pad > 0 {
                sink(&zeros[..pad])?;
            }
        }
        Ok(())
    }

    /// The whole file in one buffer (small models and tests).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() as usize);
        let ok: Result<(), ()> = self.stream(|chunk| {
            out.extend_from_slice(chunk);
            Ok(())
        });
        ok.expect("an infallible sink");
        out
    }

    /// The bytes of tensor `i`.
    fn tensor_data(&self, i: usize) -> Vec<u8> {
        let t = &self.tensors[i];
        let f32s = |v: Vec<f32>| v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let n = t.dims[0] as usize;
        match t.fill {
            Fill::Ones => f32s(vec![1.0; n]),
            Fill::Bias => f32s(uniform(n, mix(i as u64), 0.1)),
            Fill::Matrix => {
                let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
                let pool = self
                    .pools
                    .iter()
                    .find(|p| p.dtype == t.dtype && p.cols == cols)
                    .expect("a pool for every matrix's type and width");
                let unit_bytes = t.dtype.block_bytes();
                let row_bytes = cols / t.dtype.block_elements() * unit_bytes;
                let mut out = Vec::with_capacity(rows * row_bytes);
                for r in 0..rows {
                    let unit = mix(((i as u64) << 32) | r as u64) as usize % pool.units;
                    let start = unit * unit_bytes;
                    out.extend_from_slice(&pool.bytes[start..start + row_bytes]);
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests;
