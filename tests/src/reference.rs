//! A plain CPU forward pass of a Llama-family decoder over the dequantized
//! weights of a GGUF file: the slow, obviously-correct reference the GPU
//! pipeline is checked against end to end (independently of llama.cpp, whose
//! 8-bit activation quantization makes its logits differ by ~0.1-0.2).
//!
//! Written straight from the math, one token at a time, accumulating in f64.
//! Covers what the golden models use: Llama/Mixtral (adjacent-pair RoPE),
//! Qwen2/Qwen3 and their MoE variants (half-split RoPE, q/k/v biases, per-head
//! q/k norms, experts with a shared expert), and the tiny architectures as
//! llama.cpp defines them: SmolLM3 (no RoPE on every 4th layer), Phi-3 (fused
//! qkv and gate+up, half-split RoPE, LongRoPE: `longrope.rs`) and Gemma 2
//! (scaled embeddings, soft-capped attention and logits, a sliding window on
//! even layers, post-attention and post-MLP norms, GELU).
//!
//! What a file holds that the reference does not implement stops it: unknown
//! `{arch}.` metadata, and any tensor it did not read.

use std::cell::RefCell;
use std::collections::BTreeSet;

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
    /// Norms of the attention's and the MLP's outputs before they join the
    /// residual (Gemma 2), empty when absent.
    post_norm: [Vec<f32>; 2],
    ffn_norm: Vec<f32>,
    mlp: RefMlp,
    /// Whether q and k are rotated (SmolLM3 leaves every 4th layer alone).
    rope: bool,
    /// Position p attends to p' only where p - p' < window (Gemma 2's even
    /// layers); `None`: to every earlier position.
    window: Option<usize>,
}

enum RefMlp {
    Dense(Vec<f32>, Vec<f32>, Vec<f32>),
    Moe(moe::RefMoe),
}

/// The gated MLP's activation: down(act(gate x) * up x).
#[derive(Clone, Copy)]
enum Act {
    Silu,
    /// GELU, tanh approximation (Gemma 2).
    GeluTanh,
}

/// How the rotation angles are scaled, if at all.
enum RopeScaling {
    None,
    Yarn(yarn::RefYarn),
    LongRope(longrope::RefLongRope),
}

pub struct RefLlama {
    d: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    /// Dimensions rotated per head (the first `n_rot`).
    n_rot: usize,
    vocab: usize,
    /// Half-split (NeoX) RoPE pairs instead of adjacent ones.
    neox: bool,
    weight_dtype: GgmlType,
    eps: f32,
    theta: f32,
    scaling: RopeScaling,
    /// Embeddings are multiplied by this (Gemma 2: sqrt(d)).
    embd_scale: f64,
    act: Act,
    /// c in s = c tanh(s / c) on attention scores and on the logits.
    attn_softcap: Option<f64>,
    final_softcap: Option<f64>,
    embd: Vec<f32>,
    layers: Vec<RefLayer>,
    out_norm: Vec<f32>,
    output: Vec<f32>,
}

/// The `{arch}.` metadata every architecture may hold: read here, or unable
/// to change the math (`rope.scaling.` is left to yarn.rs and longrope.rs).
const KNOWN_META: [&str; 16] = [
    "block_count",
    "context_length",
    "embedding_length",
    "feed_forward_length",
    "vocab_size",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.layer_norm_rms_epsilon",
    "attention.key_length",
    "attention.value_length",
    "rope.freq_base",
    "rope.dimension_count",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "expert_shared_feed_forward_length",
];

/// Gemma 2's own metadata.
const GEMMA2_META: [&str; 3] = [
    "attention.sliding_window",
    "attn_logit_softcapping",
    "final_logit_softcapping",
];

fn tensor(file: &GgufFile, bytes: &[u8], name: &str) -> Vec<f32> {
    let t = file
        .tensor(name)
        .unwrap_or_else(|| panic!("no tensor {name}"));
    let data = file.tensor_bytes(bytes, t).unwrap();
    dequantize(t.dtype, data, t.n_elements as usize).unwrap()
}

/// `w`'s rows (of `cols` values each) cut into consecutive blocks of
/// `rows[i]` rows.
fn split_rows(w: &[f32], cols: usize, rows: &[usize]) -> Vec<Vec<f32>> {
    assert_eq!(
        w.len(),
        rows.iter().sum::<usize>() * cols,
        "fused tensor size"
    );
    let mut rest = w;
    rows.iter()
        .map(|&r| {
            let (head, tail) = rest.split_at(r * cols);
            rest = tail;
            head.to_vec()
        })
        .collect()
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

/// Rotation of the first `n_rot` dimensions of each head: pairs (2i, 2i + 1)
/// (llama.cpp's permuted Llama layout) or, `neox`, (i, i + n_rot / 2); pair
/// i turns by pos * theta^(-2i / n_rot), scaled as `m.scaling` says.
fn rope(x: &mut [f32], m: &RefLlama, pos: usize) {
    let (n_rot, theta, neox) = (m.n_rot, m.theta as f64, m.neox);
    for head in x.chunks_mut(m.head_dim) {
        for i in 0..n_rot / 2 {
            let angle = pos as f64 * theta.powf(-2.0 * i as f64 / n_rot as f64);
            let (angle, mscale) = match &m.scaling {
                RopeScaling::None => (angle, 1.0),
                RopeScaling::Yarn(y) => y.angle(angle, i),
                RopeScaling::LongRope(l) => l.angle(angle, i),
            };
            let (s, c) = angle.sin_cos();
            let (s, c) = (s * mscale, c * mscale);
            let (ia, ib) = if neox {
                (i, i + n_rot / 2)
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

/// c tanh(s / c) where a cap c is given, else s.
fn softcap(s: f64, cap: Option<f64>) -> f64 {
    match cap {
        Some(c) => c * (s / c).tanh(),
        None => s,
    }
}

/// A gated MLP: down(act(gate x) * up x).
fn glu(gate: &[f32], up: &[f32], down: &[f32], h: &[f32], act: Act, r: ActRound) -> Vec<f32> {
    let g = mm(gate, h, r);
    let u = mm(up, h, r);
    let a: Vec<f32> = g
        .iter()
        .zip(&u)
        .map(|(&g, &u)| {
            let g = g as f64;
            let a = match act {
                Act::Silu => g / (1.0 + (-g).exp()),
                Act::GeluTanh => {
                    let k = (2.0 / std::f64::consts::PI).sqrt();
                    0.5 * g * (1.0 + (k * (g + 0.044715 * g * g * g)).tanh())
                }
            };
            (a * u as f64) as f32
        })
        .collect();
    mm(down, &a, r)
}

/// SwiGLU: down(silu(gate x) * up x).
fn swiglu(gate: &[f32], up: &[f32], down: &[f32], h: &[f32], r: ActRound) -> Vec<f32> {
    glu(gate, up, down, h, Act::Silu, r)
}

/// The architectures the reference runs.
const ARCHS: [&str; 8] = [
    "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "smollm3", "phi3", "gemma2",
];

impl RefLlama {
    /// A file whose math does not depend on the context size (any but one
    /// with LongRoPE, which refuses this).
    pub fn load(bytes: &[u8]) -> RefLlama {
        Self::load_inner(bytes, None)
    }

    /// The file as llama.cpp runs it with a context of `n_ctx` tokens:
    /// Phi-3's LongRoPE takes its long factors when `n_ctx` is over the
    /// original context, its short ones otherwise.
    pub fn load_with_context(bytes: &[u8], n_ctx: usize) -> RefLlama {
        Self::load_inner(bytes, Some(n_ctx))
    }

    fn load_inner(bytes: &[u8], n_ctx: Option<usize>) -> RefLlama {
        let file = GgufFile::parse(bytes).unwrap();
        let arch = file.architecture().unwrap().to_string();
        assert!(
            ARCHS.contains(&arch.as_str()),
            "the CPU reference does not implement {arch}"
        );
        let (gemma2, phi3) = (arch == "gemma2", arch == "phi3");
        let prefix = format!("{arch}.");
        for (k, _) in &file.metadata {
            if let Some(key) = k.strip_prefix(&prefix) {
                assert!(
                    KNOWN_META.contains(&key)
                        || key.starts_with("rope.scaling.")
                        || (gemma2 && GEMMA2_META.contains(&key)),
                    "the CPU reference does not implement {k}"
                );
            }
        }
        let key = |k: &str| format!("{arch}.{k}");
        let u_opt = |k: &str| file.meta_u64_opt(&key(k)).unwrap().map(|v| v as usize);
        let u = |k: &str| u_opt(k).unwrap_or_else(|| panic!("no {}", key(k)));
        let d = u("embedding_length");
        let heads = u("attention.head_count");
        let kv_heads = u("attention.head_count_kv");
        let head_dim = u_opt("attention.key_length").unwrap_or(d / heads);
        assert_eq!(
            u_opt("attention.value_length").unwrap_or(head_dim),
            head_dim,
            "the CPU reference does not implement values of another width than keys"
        );
        let n_rot = u_opt("rope.dimension_count").unwrap_or(head_dim);
        assert!(n_rot % 2 == 0 && n_rot <= head_dim, "n_rot {n_rot}");
        let theta = file
            .meta_f32_opt(&key("rope.freq_base"))
            .unwrap()
            .unwrap_or(10_000.0);
        // Every tensor read, to refuse those the reference would ignore.
        let read = RefCell::new(BTreeSet::new());
        let t = |n: &str| {
            read.borrow_mut().insert(n.to_string());
            tensor(&file, bytes, n)
        };
        let opt = |n: &str| {
            if file.tensor(n).is_some() {
                t(n)
            } else {
                Vec::new()
            }
        };
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
                } else if phi3 {
                    // One up tensor of 2 x ffn rows: the gate's, then the up's.
                    let ffn = u("feed_forward_length");
                    let [gate, up] = split_rows(&n("ffn_up.weight"), d, &[ffn, ffn])
                        .try_into()
                        .unwrap();
                    RefMlp::Dense(gate, up, n("ffn_down.weight"))
                } else {
                    RefMlp::Dense(
                        n("ffn_gate.weight"),
                        n("ffn_up.weight"),
                        n("ffn_down.weight"),
                    )
                };
                let [wq, wk, wv] = if phi3 {
                    // Rows of q, then of k, then of v.
                    let kv = kv_heads * head_dim;
                    split_rows(&n("attn_qkv.weight"), d, &[heads * head_dim, kv, kv])
                        .try_into()
                        .unwrap()
                } else {
                    [n("attn_q.weight"), n("attn_k.weight"), n("attn_v.weight")]
                };
                let post_norm = if gemma2 {
                    [n("post_attention_norm.weight"), n("post_ffw_norm.weight")]
                } else {
                    [Vec::new(), Vec::new()]
                };
                RefLayer {
                    attn_norm: n("attn_norm.weight"),
                    wq,
                    wk,
                    wv,
                    wo: n("attn_output.weight"),
                    bias: [o("attn_q.bias"), o("attn_k.bias"), o("attn_v.bias")],
                    qk_norm: [o("attn_q_norm.weight"), o("attn_k_norm.weight")],
                    post_norm,
                    ffn_norm: n("ffn_norm.weight"),
                    mlp,
                    // llama.cpp's smollm3 skips RoPE where (l + 1) % 4 == 0.
                    rope: !(arch == "smollm3" && (l + 1) % 4 == 0),
                    // And gemma2 slides its window on layers 0, 2, 4, ...
                    window: (gemma2 && l % 2 == 0).then(|| u("attention.sliding_window")),
                }
            })
            .collect();
        let scaling = if let Some(l) = longrope::RefLongRope::read(&file, &arch, n_rot, n_ctx, &t) {
            RopeScaling::LongRope(l)
        } else if let Some(y) = yarn::RefYarn::read(&file, &arch, n_rot, theta as f64) {
            RopeScaling::Yarn(y)
        } else {
            RopeScaling::None
        };
        let cap = |k: &str| {
            let c = file.meta_f32_opt(&key(k)).unwrap();
            gemma2.then(|| c.unwrap_or_else(|| panic!("no {}", key(k))) as f64)
        };
        let (attn_softcap, final_softcap) = (
            cap("attn_logit_softcapping"),
            cap("final_logit_softcapping"),
        );
        let out_norm = t("output_norm.weight");
        for info in &file.tensors {
            assert!(
                read.borrow().contains(&info.name),
                "the CPU reference does not implement tensor {}",
                info.name
            );
        }
        let weight_dtype = file
            .tensor("blk.0.attn_q.weight")
            .or(file.tensor("blk.0.attn_qkv.weight"))
            .unwrap()
            .dtype;
        RefLlama {
            d,
            heads,
            kv_heads,
            head_dim,
            n_rot,
            vocab: embd.len() / d,
            neox: arch.starts_with("qwen") || phi3 || gemma2,
            weight_dtype,
            eps: file
                .meta_f32(&key("attention.layer_norm_rms_epsilon"))
                .unwrap(),
            theta,
            scaling,
            embd_scale: if gemma2 { (d as f64).sqrt() } else { 1.0 },
            act: if gemma2 { Act::GeluTanh } else { Act::Silu },
            attn_softcap,
            final_softcap,
            embd,
            layers,
            out_norm,
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
            let row = &self.embd[id as usize * d..(id as usize + 1) * d];
            let mut x: Vec<f32> = row
                .iter()
                .map(|&v| (v as f64 * self.embd_scale) as f32)
                .collect();
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
                if w.rope {
                    rope(&mut q, self, pos);
                    rope(&mut k, self, pos);
                }
                k_cache[l].extend_from_slice(&k);
                v_cache[l].extend_from_slice(&v);
                // The first position attended to.
                let first = w.window.map_or(0, |win| (pos + 1).saturating_sub(win));
                let mut attn = vec![0f32; self.heads * hd];
                for head in 0..self.heads {
                    let kvh = head / group;
                    let qh = &q[head * hd..(head + 1) * hd];
                    let scores: Vec<f64> = (first..=pos)
                        .map(|p| {
                            let kp = &k_cache[l][p * kv_dim + kvh * hd..][..hd];
                            let s = qh
                                .iter()
                                .zip(kp)
                                .map(|(&a, &b)| a as f64 * b as f64)
                                .sum::<f64>()
                                / (hd as f64).sqrt();
                            softcap(s, self.attn_softcap)
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = e.iter().sum();
                    for i in 0..hd {
                        let acc: f64 = (first..=pos)
                            .zip(&e)
                            .map(|(p, e)| e * v_cache[l][p * kv_dim + kvh * hd + i] as f64)
                            .sum();
                        attn[head * hd + i] = (acc / total) as f32;
                    }
                }
                let o = mm(&w.wo, &attn, r);
                add(&mut x, &self.post_norm(o, &w.post_norm[0]));
                let h = rms_norm(&x, &w.ffn_norm, self.eps);
                let o = match &w.mlp {
                    RefMlp::Dense(gate, up, down) => glu(gate, up, down, &h, self.act, r),
                    RefMlp::Moe(m) => {
                        let (o, gate_logits) = m.forward(&h, r);
                        routes.push(gate_logits);
                        o
                    }
                };
                add(&mut x, &self.post_norm(o, &w.post_norm[1]));
            }
            let h = rms_norm(&x, &self.out_norm, self.eps);
            let logits: Vec<f32> = mm(&self.output, &h, r)
                .into_iter()
                .map(|v| softcap(v as f64, self.final_softcap) as f32)
                .collect();
            debug_assert_eq!(logits.len(), self.vocab);
            all.push(logits);
            router.push(routes);
        }
        Trace {
            logits: all,
            router,
        }
    }

    /// `o` normed by `norm`, or as it is where `norm` is empty.
    fn post_norm(&self, o: Vec<f32>, norm: &[f32]) -> Vec<f32> {
        if norm.is_empty() {
            o
        } else {
            rms_norm(&o, norm, self.eps)
        }
    }

    /// The type the blocks' weights are stored as (that of `attn_q`, or
    /// of `attn_qkv`).
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

mod longrope;
mod moe;
mod yarn;
pub use moe::router_margin;
