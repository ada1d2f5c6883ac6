//! A plain CPU forward pass of a Llama-family decoder over the dequantized
//! weights of a GGUF file: the slow, obviously-correct reference the GPU
//! pipeline is checked against end to end (independently of llama.cpp, whose
//! 8-bit activation quantization makes its logits differ by ~0.1-0.2).
//!
//! Written straight from the math, one token at a time, accumulating in f64.

use wick::format::gguf::GgufFile;
use wick::format::quant::dequantize;

pub struct RefLayer {
    attn_norm: Vec<f32>,
    wq: Vec<f32>,
    wk: Vec<f32>,
    wv: Vec<f32>,
    wo: Vec<f32>,
    ffn_norm: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
}

pub struct RefLlama {
    d: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    ffn: usize,
    vocab: usize,
    eps: f32,
    theta: f32,
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

/// Adjacent-pair rotation (llama.cpp's permuted Llama layout).
fn rope(x: &mut [f32], head_dim: usize, pos: usize, theta: f32) {
    for head in x.chunks_mut(head_dim) {
        for i in 0..head_dim / 2 {
            let freq = (theta as f64).powf(-2.0 * i as f64 / head_dim as f64);
            let (s, c) = (pos as f64 * freq).sin_cos();
            let (a, b) = (head[2 * i] as f64, head[2 * i + 1] as f64);
            head[2 * i] = (a * c - b * s) as f32;
            head[2 * i + 1] = (a * s + b * c) as f32;
        }
    }
}

impl RefLlama {
    pub fn load(bytes: &[u8]) -> RefLlama {
        let file = GgufFile::parse(bytes).unwrap();
        let arch = file.architecture().unwrap().to_string();
        let u = |k: &str| file.meta_u64(&format!("{arch}.{k}")).unwrap() as usize;
        let d = u("embedding_length");
        let heads = u("attention.head_count");
        let t = |n: &str| tensor(&file, bytes, n);
        let embd = t("token_embd.weight");
        let output = if file.tensor("output.weight").is_some() {
            t("output.weight")
        } else {
            embd.clone()
        };
        let layers = (0..u("block_count"))
            .map(|l| {
                let n = |s: &str| t(&format!("blk.{l}.{s}"));
                RefLayer {
                    attn_norm: n("attn_norm.weight"),
                    wq: n("attn_q.weight"),
                    wk: n("attn_k.weight"),
                    wv: n("attn_v.weight"),
                    wo: n("attn_output.weight"),
                    ffn_norm: n("ffn_norm.weight"),
                    gate: n("ffn_gate.weight"),
                    up: n("ffn_up.weight"),
                    down: n("ffn_down.weight"),
                }
            })
            .collect();
        RefLlama {
            d,
            heads,
            kv_heads: u("attention.head_count_kv"),
            head_dim: d / heads,
            ffn: u("feed_forward_length"),
            vocab: embd.len() / d,
            eps: file
                .meta_f32(&format!("{arch}.attention.layer_norm_rms_epsilon"))
                .unwrap(),
            theta: file
                .meta_f32(&format!("{arch}.rope.freq_base"))
                .unwrap_or(10_000.0),
            embd,
            layers,
            out_norm: t("output_norm.weight"),
            output,
        }
    }

    /// Logits at every position of `ids` (teacher forcing).
    pub fn forward(&self, ids: &[u32]) -> Vec<Vec<f32>> {
        let (d, hd) = (self.d, self.head_dim);
        let kv_dim = self.kv_heads * hd;
        let group = self.heads / self.kv_heads;
        let mut k_cache = vec![Vec::<f32>::new(); self.layers.len()];
        let mut v_cache = vec![Vec::<f32>::new(); self.layers.len()];
        let mut all = Vec::new();
        for (pos, &id) in ids.iter().enumerate() {
            let mut x = self.embd[id as usize * d..(id as usize + 1) * d].to_vec();
            for (l, w) in self.layers.iter().enumerate() {
                let h = rms_norm(&x, &w.attn_norm, self.eps);
                let mut q = matvec(&w.wq, &h);
                let mut k = matvec(&w.wk, &h);
                let v = matvec(&w.wv, &h);
                rope(&mut q, hd, pos, self.theta);
                rope(&mut k, hd, pos, self.theta);
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
                let o = matvec(&w.wo, &attn);
                x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
                let h = rms_norm(&x, &w.ffn_norm, self.eps);
                let g = matvec(&w.gate, &h);
                let u = matvec(&w.up, &h);
                let act: Vec<f32> = g
                    .iter()
                    .zip(&u)
                    .map(|(&g, &u)| ((g as f64 / (1.0 + (-g as f64).exp())) * u as f64) as f32)
                    .collect();
                debug_assert_eq!(act.len(), self.ffn);
                let o = matvec(&w.down, &act);
                x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            }
            let h = rms_norm(&x, &self.out_norm, self.eps);
            let logits = matvec(&self.output, &h);
            debug_assert_eq!(logits.len(), self.vocab);
            all.push(logits);
        }
        all
    }
}
