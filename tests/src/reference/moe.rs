//! The mixture-of-experts MLP of the CPU reference: softmax over the router
//! logits, the top k (ties to the lower index), weights renormalized over
//! them where the architecture does (qwen3moe, Mixtral; not qwen2moe), the
//! chosen experts' SwiGLU outputs summed in pick order, plus qwen2moe's
//! shared expert scaled by sigmoid(gate · x).

use wick::format::gguf::GgufFile;

use super::{matvec, swiglu, ActRound};

pub struct RefMoe {
    router: Vec<f32>,
    /// Per expert: gate, up, down, each row-major.
    experts: Vec<[Vec<f32>; 3]>,
    pub(super) top_k: usize,
    normalize: bool,
    /// gate_inp, gate, up, down of the shared expert, if any.
    shared: Option<[Vec<f32>; 4]>,
}

impl RefMoe {
    /// `t` and `opt` read a tensor of this block by its name after `blk.N.`
    /// (`opt`: empty when absent).
    pub fn load(
        file: &GgufFile,
        t: &dyn Fn(&str) -> Vec<f32>,
        opt: &dyn Fn(&str) -> Vec<f32>,
    ) -> RefMoe {
        let arch = file.architecture().unwrap();
        let u = |k: &str| file.meta_u64(&format!("{arch}.{k}")).unwrap() as usize;
        let n_experts = u("expert_count");
        let stacks =
            ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"].map(|s| t(&format!("{s}.weight")));
        let experts = (0..n_experts)
            .map(|e| {
                stacks.each_ref().map(|s| {
                    let per = s.len() / n_experts;
                    s[e * per..(e + 1) * per].to_vec()
                })
            })
            .collect();
        let shared_gate = opt("ffn_gate_inp_shexp.weight");
        let shared = (!shared_gate.is_empty()).then(|| {
            [
                shared_gate,
                t("ffn_gate_shexp.weight"),
                t("ffn_up_shexp.weight"),
                t("ffn_down_shexp.weight"),
            ]
        });
        RefMoe {
            router: t("ffn_gate_inp.weight"),
            experts,
            top_k: u("expert_used_count"),
            normalize: arch != "qwen2moe",
            shared,
        }
    }

    /// The MLP's output for normed input `h`, and the router's gate logits.
    /// The router and shared-expert gate are F32 in the files, so llama.cpp
    /// rounds nothing there: they never take `r`.
    pub fn forward(&self, h: &[f32], r: ActRound) -> (Vec<f32>, Vec<f32>) {
        let logits = matvec(&self.router, h);
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        let top = logits[order[0]] as f64;
        let denom: f64 = logits.iter().map(|&l| (l as f64 - top).exp()).sum();
        let chosen = &order[..self.top_k];
        let probs: Vec<f64> = chosen
            .iter()
            .map(|&e| (logits[e] as f64 - top).exp() / denom)
            .collect();
        let total: f64 = if self.normalize {
            probs.iter().sum()
        } else {
            1.0
        };
        let mut out = vec![0f64; h.len()];
        for (&e, &p) in chosen.iter().zip(&probs) {
            let [gate, up, down] = &self.experts[e];
            let y = swiglu(gate, up, down, h, r);
            for (o, v) in out.iter_mut().zip(y) {
                *o += p / total * v as f64;
            }
        }
        if let Some([gate_inp, gate, up, down]) = &self.shared {
            let g = matvec(gate_inp, h)[0] as f64;
            let y = swiglu(gate, up, down, h, r);
            for (o, v) in out.iter_mut().zip(y) {
                *o += v as f64 / (1.0 + (-g).exp());
            }
        }
        (out.into_iter().map(|v| v as f32).collect(), logits)
    }
}

/// How far a router is from picking other experts: its k-th highest gate
/// logit minus its (k+1)-th (infinite when every expert is picked).
pub fn router_margin(gate_logits: &[f32], top_k: usize) -> f32 {
    let mut sorted = gate_logits.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    match sorted.get(top_k) {
        Some(next) => sorted[top_k - 1] - next,
        None => f32::INFINITY,
    }
}
