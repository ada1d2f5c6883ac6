//! A plain CPU forward pass of a Llama-family decoder over the dequantized
//! weights of a GGUF file: the slow, obviously-correct reference the GPU
//! pipeline is checked against end to end (independently of llama.cpp, whose
//! 8-bit activation quantization makes its logits differ by ~0.1-0.2).
//!
//! Written straight from the math, one token at a time, accumulating in f64.
//! Covers what the golden models use: Llama/Mixtral (adjacent-pair RoPE),
//! Qwen2/Qwen3 and their MoE variants (half-split RoPE, q/k/v biases, per-head
//! q/k norms, experts with a shared expert).

use wick::format::gguf::GgufFile;
use wick::format::quant::{dequantize, quantize, GgmlType};

pub struct RefLayer {
    attn_norm: Vec<f32>,
    wq: Vec<f32>,
    wk: Vec<f32>,
    wv: Vec<f32>,
    wo: Vec<f32>,
    /// q, k, v biases (Qwen2), empty when absent.
    bias: [Vec<f32>; 3],
    /// Per-head q and k norms (Qwen3), empty when absent.
    qk_norm: [Vec<f32>; 2],
    ffn_norm: Vec<f32>,
    mlp: RefMlp,
}

enum RefMlp {
    Dense(Vec<f32>, Vec<f32>, Vec<f32>),
    Moe(moe::RefMoe),
}

pub struct RefLlama {
    d: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    vocab: usize,
    /// Half-split (NeoX) RoPE pairs instead of adjacent ones.
    neox: bool,
    weight_dtype: GgmlType,
    eps: f32,
    theta: f32,
    /// YaRN scaling where the file asks for it.
    yarn: Option<yarn::RefYarn>,
    embd: Vec<f32>,
    layers: Vec<RefLayer>,
    out_norm: Vec<f32>,
    output: Vec<f32>,
}

fn tensor(file: &GgufFile, bytes: &[u8], name: &str) -> Vec<f32> {
    let t = file
        .tensor(name)
        .unwrap_or_else(|| panic!("no tensor {name}"));
    let data = file.tensor_bytes(bytes, t).unwrap();
    dequantize(t.dtype, data, t.n_elements as usize).unwrap()
}

/// How the reference rounds a weight matmul's input vector: not at all, or
/// the way llama.cpp's CPU backend does before a dot product with Q8_0
/// weights (x quantized to Q8_0 blocks). Used to measure how much that
/// rounding moves router logits, never to make the reference match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActRound {
    Exact,
    Q8_0,
    /// llama.cpp converts the input of an F16 dot product to f16.
    F16,
}

impl ActRound {
    /// The rounding llama.cpp's CPU backend applies before dot products with
    /// weights stored as `dtype`.
    pub fn llama_cpp(dtype: GgmlType) -> ActRound {
        match dtype {
            GgmlType::Q8_0 => ActRound::Q8_0,
            GgmlType::F16 => ActRound::F16,
            _ => ActRound::Exact,
        }
    }

    fn apply(self, x: &[f32]) -> Vec<f32> {
        match self {
            ActRound::Exact => x.to_vec(),
            ActRound::Q8_0 | ActRound::F16 => {
                let t = if self == ActRound::Q8_0 {
                    GgmlType::Q8_0
                } else {
                    GgmlType::F16
                };
                dequantize(t, &quantize(t, x).unwrap(), x.len()).unwrap()
            }
        }
    }
}

/// A weight matmul: the input rounded as `r` says.
fn mm(w: &[f32], x: &[f32], r: ActRound) -> Vec<f32> {
    matvec(w, &r.apply(x))
}

/// Everything a teacher-forced pass computes that the tests compare.
pub struct Trace {
    /// Per position: the logits.
    pub logits: Vec<Vec<f32>>,
    /// Per position, per MoE layer: the router's gate logits.
    pub router: Vec<Vec<Vec<f32>>>,
}

/// y[n] = sum_k w[n * cols + k] * x[k]
fn matvec(w: &[f32], x: &[f32]) -> Vec<f32> {
    let cols = x.len();
    w.chunks(cols)
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>() as f32
        })
        .collect()
}

fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + eps as f64).sqrt();
    x.iter()
        .zip(w)
        .map(|(&v, &g)| (v as f64 * inv) as f32 * g)
        .collect()
}

/// Rotation of pairs (2i, 2i + 1) (llama.cpp's permuted Llama layout) or,
/// `neox`, (i, i + head_dim / 2), YaRN-scaled where `yarn` is given.
fn rope(x: &mut [f32], m: &RefLlama, pos: usize) {
    let (head_dim, theta, neox) = (m.head_dim, m.theta, m.neox);
    for head in x.chunks_mut(head_dim) {
        for i in 0..head_dim / 2 {
            let freq = (theta as f64).powf(-2.0 * i as f64 / head_dim as f64);
            let (angle, mscale) = match &m.yarn {
                Some(y) => y.angle(pos as f64 * freq, i),
                None => (pos as f64 * freq, 1.0),
            };
            let (s, c) = angle.sin_cos();
            let (s, c) = (s * mscale, c * mscale);
            let (ia, ib) = if neox {
                (i, i + head_dim / 2)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (a, b) = (head[ia] as f64, head[ib] as f64);
            head[ia] = (a * c - b * s) as f32;
            head[ib] = (a * s + b * c) as f32;
        }
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// SwiGLU: down(silu(gate x) * up x).
fn swiglu(gate: &[f32], up: &[f32], down: &[f32], h: &[f32], r: ActRound) -> Vec<f32> {
    let g = mm(gate, h, r);
    let u = mm(up, h, r);
    let act: Vec<f32> = g
        .iter()
        .zip(&u)
        .map(|(&g, &u)| ((g as f64 / (1.0 + (-g as f64).exp())) * u as f64) as f32)
        .collect();
    mm(down, &act, r)
}

impl RefLlama {
    pub fn load(bytes: &[u8]) -> RefLlama {
        let file = GgufFile::parse(bytes).unwrap();
        let arch = file.architecture().unwrap().to_string();
        let u = |k: &str| file.meta_u64(&format!("{arch}.{k}")).unwrap() as usize;
        let d = u("embedding_length");
        let heads = u("attention.head_count");
        let t = |n: &str| tensor(&file, bytes, n);
        let opt = |n: &str| {
            if file.tensor(n).is_some() {
                t(n)
            } else {
                Vec::new()
            }
        };
        let head_dim = file
            .meta_u64(&format!("{arch}.attention.key_length"))
            .map_or(d / heads, |v| v as usize);
        let theta = file
            .meta_f32(&format!("{arch}.rope.freq_base"))
            .unwrap_or(10_000.0);
        let embd = t("token_embd.weight");
        let output = if file.tensor("output.weight").is_some() {
            t("output.weight")
        } else {
            embd.clone()
        };
        let layers = (0..u("block_count"))
            .map(|l| {
                let n = |s: &str| t(&format!("blk.{l}.{s}"));
                let o = |s: &str| opt(&format!("blk.{l}.{s}"));
                let mlp = if file
                    .tensor(&format!("blk.{l}.ffn_gate_inp.weight"))
                    .is_some()
                {
                    RefMlp::Moe(moe::RefMoe::load(&file, &n, &o))
                } else {
                    RefMlp::Dense(
                        n("ffn_gate.weight"),
                        n("ffn_up.weight"),
                        n("ffn_down.weight"),
                    )
                };
                RefLayer {
                    attn_norm: n("attn_norm.weight"),
                    wq: n("attn_q.weight"),
                    wk: n("attn_k.weight"),
                    wv: n("attn_v.weight"),
                    wo: n("attn_output.weight"),
                    bias: [o("attn_q.bias"), o("attn_k.bias"), o("attn_v.bias")],
                    qk_norm: [o("attn_q_norm.weight"), o("attn_k_norm.weight")],
                    ffn_norm: n("ffn_norm.weight"),
                    mlp,
                }
            })
            .collect();
        RefLlama {
            d,
            heads,
            kv_heads: u("attention.head_count_kv"),
            head_dim,
            vocab: embd.len() / d,
            neox: arch.starts_with("qwen"),
            weight_dtype: file.tensor("blk.0.attn_q.weight").unwrap().dtype,
            eps: file
                .meta_f32(&format!("{arch}.attention.layer_norm_rms_epsilon"))
                .unwrap(),
            theta,
            yarn: yarn::RefYarn::read(&file, &arch, head_dim, theta as f64),
            embd,
            layers,
            out_norm: t("output_norm.weight"),
            output,
        }
    }

    /// Logits at every position of `ids` (teacher forcing).
    pub fn forward(&self, ids: &[u32]) -> Vec<Vec<f32>> {
        self.trace(ids, ActRound::Exact).logits
    }

    /// Logits and router logits at every position of `ids`, weight matmul
    /// inputs rounded as `r` says.
    pub fn trace(&self, ids: &[u32], r: ActRound) -> Trace {
        let (d, hd) = (self.d, self.head_dim);
        let kv_dim = self.kv_heads * hd;
        let group = self.heads / self.kv_heads;
        let mut k_cache = vec![Vec::<f32>::new(); self.layers.len()];
        let mut v_cache = vec![Vec::<f32>::new(); self.layers.len()];
        let mut all = Vec::new();
        let mut router = Vec::new();
        for (pos, &id) in ids.iter().enumerate() {
            let mut x = self.embd[id as usize * d..(id as usize + 1) * d].to_vec();
            let mut routes = Vec::new();
            for (l, w) in self.layers.iter().enumerate() {
                let h = rms_norm(&x, &w.attn_norm, self.eps);
                let mut qkv = [mm(&w.wq, &h, r), mm(&w.wk, &h, r), mm(&w.wv, &h, r)];
                for (y, b) in qkv.iter_mut().zip(&w.bias) {
                    if !b.is_empty() {
                        add(y, b);
                    }
                }
                let [mut q, mut k, v] = qkv;
                for (y, norm) in [&mut q, &mut k].into_iter().zip(&w.qk_norm) {
                    if !norm.is_empty() {
                        for head in y.chunks_mut(hd) {
                            let normed = rms_norm(head, norm, self.eps);
                            head.copy_from_slice(&normed);
                        }
                    }
                }
                rope(&mut q, self, pos);
                rope(&mut k, self, pos);
                k_cache[l].extend_from_slice(&k);
                v_cache[l].extend_from_slice(&v);
                let mut attn = vec![0f32; self.heads * hd];
                for head in 0..self.heads {
                    let kvh = head / group;
                    let qh = &q[head * hd..(head + 1) * hd];
                    let scores: Vec<f64> = (0..=pos)
                        .map(|p| {
                            let kp = &k_cache[l][p * kv_dim + kvh * hd..][..hd];
                            qh.iter()
                                .zip(kp)
                                .map(|(&a, &b)| a as f64 * b as f64)
                                .sum::<f64>()
                                / (hd as f64).sqrt()
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = e.iter().sum();
                    for i in 0..hd {
                        let acc: f64 = (0..=pos)
                            .map(|p| e[p] * v_cache[l][p * kv_dim + kvh * hd + i] as f64)
                            .sum();
                        attn[head * hd + i] = (acc / total) as f32;
                    }
                }
                add(&mut x, &mm(&w.wo, &attn, r));
                let h = rms_norm(&x, &w.ffn_norm, self.eps);
                let o = match &w.mlp {
                    RefMlp::Dense(gate, up, down) => swiglu(gate, up, down, &h, r),
                    RefMlp::Moe(m) => {
                        let (o, gate_logits) = m.forward(&h, r);
                        routes.push(gate_logits);
                        o
                    }
                };
                add(&mut x, &o);
            }
            let h = rms_norm(&x, &self.out_norm, self.eps);
            let logits = mm(&self.output, &h, r);
            debug_assert_eq!(logits.len(), self.vocab);
            all.push(logits);
            router.push(routes);
        }
        Trace {
            logits: all,
            router,
        }
    }

    /// The type the blocks' weights are stored as (that of `attn_q`).
    pub fn weight_dtype(&self) -> GgmlType {
        self.weight_dtype
    }

    /// Experts each MoE layer picks per token (0 for a dense model).
    pub fn top_k(&self) -> usize {
        self.layers
            .iter()
            .find_map(|l| match &l.mlp {
                RefMlp::Moe(m) => Some(m.top_k),
                RefMlp::Dense(..) => None,
            })
            .unwrap_or(0)
    }
}

mod moe;
mod yarn;
pub use moe::router_margin;
