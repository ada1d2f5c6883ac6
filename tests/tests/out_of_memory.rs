//! Out of memory is a typed `GpuError`, never a panic (validation errors:
//! `gpu_errors.rs`).
//!
//! It is forced honestly: lavapipe allocates device memory from
//! the process's own address space, so with the address-space limit just
//! above what the process already maps, its `vkAllocateMemory` fails and
//! wgpu reports an out-of-memory error, which the buffer path returns as
//! `OutOfMemory` naming the buffer. (Asking for more than `max_buffer_size`
//! would be a validation error, and wick refuses that before wgpu sees it:
//! `BufferTooLarge`.) The only test in its binary: the limit is
//! process-wide.

use std::sync::Arc;

use wick::gpu::{GpuContext, GpuError};

fn own_ctx() -> Arc<GpuContext> {
    Arc::new(pollster::block_on(GpuContext::new()).unwrap())
}

/// Bytes of address space the process maps now.
#[cfg(target_os = "linux")]
fn mapped_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// Runs `f` with the address space capped at `limit` bytes, then restores
/// the old limit.
#[cfg(target_os = "linux")]
fn with_address_space<T>(limit: u64, f: impl FnOnce() -> T) -> T {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_AS, &mut old), 0);
        let capped = libc::rlimit {
            rlim_cur: limit,
            rlim_max: old.rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &capped), 0);
    }
    let out = f();
    // SAFETY: as above.
    unsafe { assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &old), 0) };
    out
}

#[cfg(target_os = "linux")]
#[test]
fn an_allocation_the_driver_refuses_is_out_of_memory() {
    let ctx = own_ctx();
    assert!(
        ctx.tuning.class.is_cpu(),
        "the address-space cap only starves a CPU driver such as lavapipe"
    );
    // Warm the buffer path, so the capped call does nothing new but the
    // allocation.
    drop(ctx.create_storage("warm", 1 << 20).unwrap());
    // The largest buffer a kernel may bind (128 MiB on lavapipe), well
    // over the 32 MiB of address space left free.
    let size = ctx.max_binding_bytes();
    assert!(size >= 64 << 20, "{size}");
    let limit = mapped_bytes() + (32 << 20);
    let result = with_address_space(limit, || ctx.create_storage("kv cache", size));
    match result {
        Err(GpuError::OutOfMemory { what, message }) => {
            assert!(
                what.contains("'kv cache'") && what.contains(&size.to_string()),
                "{what}"
            );
            assert!(!message.is_empty());
        }
        Err(other) => panic!("wanted OutOfMemory, got {other:?}"),
        Ok(_) => panic!("{size} bytes allocated under a cap of {limit} bytes"),
    }
    // The upload path (a buffer created mapped, filled, unmapped): the
    // bytes are in hand before the cap, only the device's copy is refused.
    let bytes = vec![7u8; size as usize];
    let limit = mapped_bytes() + (32 << 20);
    let result = with_address_space(limit, || ctx.upload_bytes("weights", &bytes));
    match result {
        Err(GpuError::OutOfMemory { what, .. }) => assert!(what.contains("'weights'"), "{what}"),
        Err(other) => panic!("wanted OutOfMemory, got {other:?}"),
        Ok(_) => panic!("{size} bytes uploaded under a cap of {limit} bytes"),
    }
    drop(bytes);
    // A failed allocation is the caller's to handle (a load gives up): the
    // device itself is fine, and work goes on.
    let small = ctx.upload_f32("small", &[1.0, 2.0]).unwrap();
    let got = pollster::block_on(ctx.read_f32(&small, 0, 2)).unwrap();
    assert_eq!(got, [1.0, 2.0]);
    ctx.check_alive().unwrap();
}
