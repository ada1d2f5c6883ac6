//! WebGPU's default limits (`DeviceLimits::WebGpuDefault`: 128 MiB per
//! storage binding, 256 MiB per buffer, as a phone grants): a model whose
//! matrices exceed a binding is split by rows to fit, and generates the
//! same greedy ids as on the adapter's largest limits.

use std::sync::Arc;

use wick::format::gguf::GgufFile;
use wick::gpu::{DeviceLimits, GpuContext};
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::StopCriteria;
use wick::Engine;
use wick_tests::{load_engine, load_engine_on, model_path};

fn greedy(engine: &mut Engine, prompt: &str, n: usize) -> Vec<u32> {
    let ids = engine.tokenize_prompt(prompt).unwrap();
    let stop = StopCriteria {
        stop_ids: Vec::new(),
        max_tokens: n,
    };
    let sampling = SamplingParams::default();
    pollster::block_on(
        engine
            .pipeline
            .generate(&ids, &sampling, &stop, None, &mut |_| true),
    )
    .unwrap()
    .ids
}

/// The largest tensor of `file`, in bytes.
fn largest_tensor(file: &str) -> u64 {
    use std::io::Read;
    // The header is within the first 16 MiB of these files.
    let mut bytes = Vec::new();
    std::fs::File::open(model_path(file))
        .unwrap()
        .take(16 << 20)
        .read_to_end(&mut bytes)
        .unwrap();
    let gguf = GgufFile::parse_header(&bytes).unwrap();
    gguf.tensors
        .iter()
        .map(|t| {
            let r = gguf.tensor_range(t);
            r.end - r.start
        })
        .max()
        .unwrap()
}

#[test]
fn webgpu_default_limits_split_matrices_and_give_the_same_ids() {
    let ctx = match pollster::block_on(GpuContext::open(None, DeviceLimits::WebGpuDefault)) {
        Ok(ctx) => Arc::new(ctx),
        Err(e) => panic!("GPU tests need an adapter: {e}"),
    };
    let binding = ctx.limits.max_storage_buffer_binding_size;
    assert_eq!(binding, 128 << 20, "WebGPU's default binding limit");
    assert_eq!(ctx.device_limits, DeviceLimits::WebGpuDefault);
    let qwen = "qwen2.5-coder-0.5b-instruct-awq.gguf";
    // Qwen2.5's embedding is over a binding: the split path runs.
    assert!(
        largest_tensor(qwen) > binding,
        "{qwen} has a tensor over {binding} bytes"
    );
    for file in ["SmolLM2-135M-Instruct.Q4_1.gguf", qwen] {
        let prompt = "The capital of France is";
        let mut phone = load_engine_on(ctx.clone(), file, 64);
        let mut desktop = load_engine(file, 64);
        assert_eq!(
            greedy(&mut phone, prompt, 4),
            greedy(&mut desktop, prompt, 4),
            "{file}: greedy ids on WebGPU's default limits and on the adapter's"
        );
    }
}
