//! The published architectures `SyntheticModel` builds: each one's shapes as
//! its `config.json` gives them.

/// The shape of a published model, as its `config.json` gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Arch {
    pub name: &'static str,
    /// GGUF `general.architecture`: "llama" or "qwen2".
    pub architecture: &'static str,
    pub n_layers: usize,
    pub d_model: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn_dim: usize,
    pub vocab_size: usize,
    pub ctx_train: usize,
    /// The output head is the token embedding (no `output.weight`).
    pub tied: bool,
    /// Biases on the q/k/v projections (Qwen2).
    pub qkv_bias: bool,
    pub rope_theta: f32,
    pub rms_eps: f32,
}

/// The models `wick bench --synthetic` knows. Llama 3's RoPE frequency
/// scaling (`rope_freqs`) is left out: it costs no weight traffic.
pub const ARCHS: [Arch; 4] = [
    Arch {
        name: "smollm2-135m",
        architecture: "llama",
        n_layers: 30,
        d_model: 576,
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
        ffn_dim: 1536,
        vocab_size: 49152,
        ctx_train: 8192,
        tied: true,
        qkv_bias: false,
        rope_theta: 100_000.0,
        rms_eps: 1e-5,
    },
    Arch {
        name: "qwen2.5-0.5b",
        architecture: "qwen2",
        n_layers: 24,
        d_model: 896,
        n_heads: 14,
        n_kv_heads: 2,
        head_dim: 64,
        ffn_dim: 4864,
        vocab_size: 151936,
        ctx_train: 32768,
        tied: true,
        qkv_bias: true,
        rope_theta: 1_000_000.0,
        rms_eps: 1e-6,
    },
    Arch {
        name: "llama-3.2-1b",
        architecture: "llama",
        n_layers: 16,
        d_model: 2048,
        n_heads: 32,
        n_kv_heads: 8,
        head_dim: 64,
        ffn_dim: 8192,
        vocab_size: 128256,
        ctx_train: 131072,
        tied: true,
        qkv_bias: false,
        rope_theta: 500_000.0,
        rms_eps: 1e-5,
    },
    Arch {
        name: "llama-3.1-8b",
        architecture: "llama",
        n_layers: 32,
        d_model: 4096,
        n_heads: 32,
        n_kv_heads: 8,
        head_dim: 128,
        ffn_dim: 14336,
        vocab_size: 128256,
        ctx_train: 131072,
        tied: false,
        qkv_bias: false,
        rope_theta: 500_000.0,
        rms_eps: 1e-5,
    },
];

/// Llama 3.1 70B's shapes: too large for the machines here, so not one of
/// the `ARCHS` a benchmark runs; its header (made without its weights)
/// tests that the memory preflight refuses it before any upload.
pub const LLAMA_3_1_70B: Arch = Arch {
    name: "llama-3.1-70b",
    architecture: "llama",
    n_layers: 80,
    d_model: 8192,
    n_heads: 64,
    n_kv_heads: 8,
    head_dim: 128,
    ffn_dim: 28672,
    vocab_size: 128256,
    ctx_train: 131072,
    tied: false,
    qkv_bias: false,
    rope_theta: 500_000.0,
    rms_eps: 1e-5,
};
