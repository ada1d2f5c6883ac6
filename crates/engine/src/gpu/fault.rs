//! GPU errors that no error scope of wick's caught: wgpu's uncaptured-error
//! handler (natively its default panics; in the browser the device's
//! `uncapturederror` event) routed to a typed `GpuError` that the context
//! keeps, so every later submit and readback fails with it: the engine is
//! unusable after one, as after a lost device.
//!
//! Out of memory at buffer creation is also caught where it happens
//! natively (`scoped_oom`): the load fails there, naming the buffer.

use std::sync::{Arc, Mutex};

use super::error::GpuError;

/// The first uncaptured error, once there was one.
pub(crate) type FaultSlot = Arc<Mutex<Option<GpuError>>>;

/// The typed form of an error wgpu reports; `what` says where it came from.
pub(crate) fn typed(e: &wgpu::Error, what: &str) -> GpuError {
    let message = e.to_string();
    match e {
        wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory {
            what: what.to_string(),
            message,
        },
        _ => GpuError::Validation {
            what: what.to_string(),
            message,
        },
    }
}

/// Routes `device`'s uncaptured errors into `slot` (the first one stays).
pub(crate) fn install(device: &wgpu::Device, slot: &FaultSlot) {
    let slot = slot.clone();
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
        let mut fault = slot.lock().unwrap_or_else(|p| p.into_inner());
        fault.get_or_insert_with(|| typed(&e, "work outside a recorded step"));
    }));
}

/// Runs `create` (one buffer's creation) inside an out-of-memory error
/// scope. Natively the scope's answer is ready at once, and an allocation
/// the driver refused is returned as `OutOfMemory` naming `label`. In the
/// browser the answer is a promise: the scope is not pushed, and an
/// allocation failure reaches the uncaptured-error handler instead (the
/// next submit or readback reports it).
pub(crate) fn scoped_oom<T>(
    device: &wgpu::Device,
    label: &str,
    size: u64,
    create: impl FnOnce() -> T,
) -> Result<T, GpuError> {
    #[cfg(target_arch = "wasm32")]
    {
        let _ = (device, label, size);
        Ok(create())
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        let scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let made = create();
        let mut pop = std::pin::pin!(scope.pop());
        match pop.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Some(e)) => Err(typed(
                &e,
                &format!("creating buffer '{label}' of {size} bytes"),
            )),
            // Native error scopes answer at once; Pending cannot happen.
            Poll::Ready(None) | Poll::Pending => Ok(made),
        }
    }
}
