//! The GPU core: context, buffers, pipelines, the command recorder, readback.

mod bind_groups;
pub mod buffer;
pub mod context;
pub mod counters;
mod device_memory;
pub mod error;
mod fault;
pub mod params;
pub mod pipeline;
pub(crate) mod pipeline_batch;
mod pipeline_create;
pub mod profile;
mod profile_timer;
pub mod readback;
pub mod recorder;
pub mod residency;
pub mod tuning;
mod uniform_arena;
pub mod weight_store;
pub mod wgsl;

pub use buffer::{BufferRef, GpuBuffer};
pub use context::{AdapterSummary, DeviceLimits, GpuContext, GpuFeatures};
pub use counters::{CounterSnapshot, GpuCounters};
pub use error::GpuError;
pub use pipeline::{workgroups_for, Access, KernelSpec, OwnedSpec, VariantKey};
pub use pipeline_batch::PendingPipeline;
pub use readback::Readback;
pub use recorder::{Recorder, Submitted};
pub use residency::LiveMemory;
pub use tuning::{AdapterClass, Tuning};
pub use weight_store::WeightStore;
