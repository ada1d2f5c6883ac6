//! Validation errors outside any scope are a typed `GpuError`, never a
//! panic (wgpu's default for an error no scope catches); out of memory:
//! `out_of_memory.rs`.

use std::sync::Arc;

use wick::gpu::{GpuContext, GpuError, Recorder};

fn own_ctx() -> Arc<GpuContext> {
    Arc::new(pollster::block_on(GpuContext::new()).unwrap())
}

/// An error outside any scope goes to wgpu's uncaptured-error handler,
/// whose default panics: wick's keeps it, and every later submit and
/// readback returns it typed.
#[test]
fn an_uncaptured_validation_error_is_typed_and_sticks() {
    let ctx = own_ctx();
    let buf = ctx.create_storage("small", 16).unwrap();
    // A write past the end of the buffer: a validation error at the queue,
    // outside every recorder's scope.
    ctx.write(&buf, 1024, &[0; 16]);
    for _ in 0..2 {
        match pollster::block_on(Recorder::new(&ctx).submit()) {
            Err(GpuError::Validation { what, message }) => {
                assert!(what.contains("outside a recorded step"), "{what}");
                assert!(message.to_lowercase().contains("write"), "{message}");
            }
            other => panic!("wanted Validation, got {other:?}"),
        }
    }
    match pollster::block_on(ctx.read_f32(&buf, 0, 4)) {
        Err(GpuError::Validation { .. }) => {}
        other => panic!("wanted Validation, got {other:?}"),
    }
}
