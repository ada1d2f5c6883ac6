//! Counters that tests and benchmarks read: submits, dispatches, what was
//! created and read back.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters that tests and benchmarks read: they prove "one submit per step"
/// and "nothing allocated per token" instead of trusting it.
#[derive(Debug, Default)]
pub struct GpuCounters {
    pub submits: AtomicU64,
    pub dispatches: AtomicU64,
    pub buffers_created: AtomicU64,
    pub bind_groups_created: AtomicU64,
    pub pipelines_created: AtomicU64,
    pub bytes_read_back: AtomicU64,
    /// Bytes the submitted dispatches read and write in device memory, as
    /// their ops count them from the tensors they bind (see
    /// `Recorder::moved`): what bounds a decode step on a GPU.
    pub bytes_moved: AtomicU64,
}

/// A plain copy of `GpuCounters` at one moment; subtract two to measure a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    pub submits: u64,
    pub dispatches: u64,
    pub buffers_created: u64,
    pub bind_groups_created: u64,
    pub pipelines_created: u64,
    pub bytes_read_back: u64,
    pub bytes_moved: u64,
}

impl CounterSnapshot {
    pub fn since(self, earlier: CounterSnapshot) -> CounterSnapshot {
        CounterSnapshot {
            submits: self.submits - earlier.submits,
            dispatches: self.dispatches - earlier.dispatches,
            buffers_created: self.buffers_created - earlier.buffers_created,
            bind_groups_created: self.bind_groups_created - earlier.bind_groups_created,
            pipelines_created: self.pipelines_created - earlier.pipelines_created,
            bytes_read_back: self.bytes_read_back - earlier.bytes_read_back,
            bytes_moved: self.bytes_moved - earlier.bytes_moved,
        }
    }
}

impl GpuCounters {
    pub fn snapshot(&self) -> CounterSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CounterSnapshot {
            submits: get(&self.submits),
            dispatches: get(&self.dispatches),
            buffers_created: get(&self.buffers_created),
            bind_groups_created: get(&self.bind_groups_created),
            pipelines_created: get(&self.pipelines_created),
            bytes_read_back: get(&self.bytes_read_back),
            bytes_moved: get(&self.bytes_moved),
        }
    }
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
