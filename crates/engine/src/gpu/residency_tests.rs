//! The live counters and bind-group eviction: a dropped buffer takes its
//! cached bind groups with it, and a model loaded and disposed leaves the
//! context as it found it.

use std::sync::Arc;

use crate::format::quant::GgmlType;
use crate::gpu::Recorder;
use crate::gpu::{GpuBuffer, GpuContext};
use crate::kernels::elementwise::add::add_in_place;
use crate::model::synthetic::{Arch, SyntheticModel, ARCHS};
use crate::pipeline::PipelineOptions;
use crate::Engine;

/// A context of the test's own: the shared one's counters move with every
/// test running beside this one.
fn own_ctx() -> Arc<GpuContext> {
    Arc::new(pollster::block_on(GpuContext::new()).expect("a GPU adapter (lavapipe)"))
}

/// Records `add` over (x, y) through a compile-only recorder: it creates
/// the bind group a real step would, and runs nothing.
fn bind(ctx: &GpuContext, x: &GpuBuffer, y: &GpuBuffer) {
    let mut rec = Recorder::compile_only(ctx);
    add_in_place(&mut rec, x, 0, y, 0, 4).unwrap();
    pollster::block_on(rec.submit()).unwrap();
}

#[test]
fn buffers_are_counted_while_they_live() {
    let ctx = own_ctx();
    let base = ctx.live_memory();
    let a = ctx.create_storage("a", 10).unwrap(); // rounds up to 12
    let b = ctx.upload_f32("b", &[1.0; 5]).unwrap();
    let live = ctx.live_memory();
    assert_eq!(live.bytes - base.bytes, 12 + 20);
    assert_eq!(live.buffers - base.buffers, 2);
    drop(a);
    assert_eq!(ctx.live_memory().bytes - base.bytes, 20);
    drop(b);
    assert_eq!(ctx.live_memory(), base);
}

#[test]
fn a_dropped_buffer_evicts_the_bind_groups_that_bind_it() {
    let ctx = own_ctx();
    let x = ctx.create_storage("x", 16).unwrap();
    let y = ctx.create_storage("y", 16).unwrap();
    let z = ctx.create_storage("z", 16).unwrap();
    bind(&ctx, &x, &y);
    bind(&ctx, &x, &z);
    bind(&ctx, &x, &y); // cached: no new group
    assert_eq!(ctx.live_memory().bind_groups, 2);
    drop(y);
    assert_eq!(ctx.live_memory().bind_groups, 1, "(x, y) must go with y");
    {
        let cache = ctx.residency.cache.lock().unwrap();
        assert_eq!(cache.keys_of[&x.id()].len(), 1, "x still listed (x, y)");
        assert_eq!(cache.keys_of[&z.id()].len(), 1);
    }
    // Binding (x, z) again finds the surviving group.
    bind(&ctx, &x, &z);
    assert_eq!(ctx.live_memory().bind_groups, 1);
    drop(x);
    assert_eq!(ctx.live_memory().bind_groups, 0);
    let cache = ctx.residency.cache.lock().unwrap();
    assert!(cache.groups.is_empty() && cache.keys_of.is_empty());
}

/// A small model with every kind of buffer a dense model has: fused q/k/v
/// with biases, fused gate/up, an untied head.
fn small_arch() -> Arch {
    Arch {
        name: "dispose-test",
        n_layers: 2,
        d_model: 128,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 32,
        ffn_dim: 256,
        vocab_size: 300,
        tied: false,
        ..ARCHS[1].clone()
    }
}

#[test]
fn loading_and_disposing_50_times_returns_every_buffer() {
    let ctx = own_ctx();
    let file = SyntheticModel::new(&small_arch(), GgmlType::Q8_0)
        .unwrap()
        .to_bytes();
    let opts = PipelineOptions {
        ctx_len: Some(64),
        ..Default::default()
    };
    let base = ctx.live_memory();
    let mut loaded = None;
    for i in 0..50 {
        let engine =
            pollster::block_on(Engine::load(ctx.clone(), &file, &opts, &mut |_| {})).unwrap();
        let live = ctx.live_memory();
        assert!(live.bind_groups > 0, "load {i}: warm-up binds");
        // Every load holds the same: nothing of an earlier one is left.
        assert_eq!(*loaded.get_or_insert(live), live, "load {i}");
        engine.dispose();
        assert_eq!(ctx.live_memory(), base, "after dispose {i}");
    }
}

#[test]
fn lavapipe_reports_its_memory() {
    let ctx = own_ctx();
    eprintln!(
        "{}: device memory {:?}",
        ctx.adapter.name, ctx.device_memory
    );
    if ctx.adapter.backend == "Vulkan" {
        assert!(ctx.device_memory.is_some_and(|m| m > 0));
    }
}
