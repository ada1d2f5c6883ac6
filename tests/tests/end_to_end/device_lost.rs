//! A lost GPU device: every later call on the engine fails with the typed
//! `DeviceLost` error (never a hang, a panic or garbage tokens), and a new
//! context loads and generates again.

use std::sync::Arc;

use wick::gpu::{GpuContext, GpuError};
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::StopCriteria;
use wick::WickError;
use wick_tests::load_engine_on;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn own_ctx() -> Arc<GpuContext> {
    Arc::new(pollster::block_on(GpuContext::new()).unwrap())
}

fn generate(engine: &mut wick::Engine) -> Result<Vec<u32>, WickError> {
    let prompt = engine.tokenize_prompt("The capital of France is").unwrap();
    let stop = StopCriteria {
        stop_ids: Vec::new(),
        max_tokens: 4,
    };
    let params = SamplingParams::default();
    pollster::block_on(
        engine
            .pipeline
            .generate(&prompt, &params, &stop, None, &mut |_| true),
    )
    .map(|out| out.ids)
    .map_err(WickError::from)
}

#[test]
fn a_lost_device_is_a_typed_error_and_a_new_context_works() {
    let ctx = own_ctx();
    let mut engine = load_engine_on(ctx.clone(), MODEL, 64);
    let before = generate(&mut engine).unwrap();
    assert_eq!(before.len(), 4);

    ctx.device.destroy();
    for _ in 0..2 {
        match generate(&mut engine) {
            Err(WickError::Gpu(GpuError::DeviceLost { reason })) => {
                assert!(!reason.is_empty())
            }
            other => panic!("wanted DeviceLost, got {other:?}"),
        }
    }
    drop(engine);

    let mut again = load_engine_on(own_ctx(), MODEL, 64);
    assert_eq!(generate(&mut again).unwrap(), before, "greedy, same ids");
}
