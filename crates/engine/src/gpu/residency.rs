//! What the engine keeps resident on the GPU: counters of live buffers,
//! their bytes and cached bind groups, and the bind-group cache itself.
//!
//! A cached bind group holds its buffers alive inside wgpu, so the cache is
//! the one place that could keep a disposed model's weights resident. It is
//! therefore indexed by buffer as well as by key: when a `GpuBuffer` drops,
//! every bind group that binds it is evicted, and the buffer's memory really
//! goes. The counters are the engine's own (wgpu does not report live
//! memory on every backend, and never in the browser); they count what the
//! engine created and still holds, which is what a test or a page can check
//! returns to its baseline after `Engine::dispose`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::pipeline::MAX_STORAGE_BINDINGS;

/// A bind group's identity: the pipeline and its buffers' ids (0-padded).
pub(crate) type BindKey = (u64, [u64; MAX_STORAGE_BINDINGS]);

#[derive(Default)]
struct BindGroupCache {
    groups: HashMap<BindKey, wgpu::BindGroup>,
    /// Buffer id -> the keys of the cached groups that bind it.
    keys_of: HashMap<u64, Vec<BindKey>>,
}

/// Live GPU memory as the engine counts it, at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveMemory {
    /// Bytes of every buffer the engine created and has not dropped
    /// (storage, staging, uniform).
    pub bytes: u64,
    pub buffers: u64,
    /// Bind groups in the cache.
    pub bind_groups: u64,
}

/// The same counts summed over every context of the process: in a page
/// each loaded engine opens its own context, and what must return to its
/// baseline after `dispose` is the page's total.
static ALL_BYTES: AtomicU64 = AtomicU64::new(0);
static ALL_BUFFERS: AtomicU64 = AtomicU64::new(0);
static ALL_BIND_GROUPS: AtomicU64 = AtomicU64::new(0);

/// Live GPU memory over every context of this process (this page).
pub fn live_memory_everywhere() -> LiveMemory {
    LiveMemory {
        bytes: ALL_BYTES.load(Ordering::Relaxed),
        buffers: ALL_BUFFERS.load(Ordering::Relaxed),
        bind_groups: ALL_BIND_GROUPS.load(Ordering::Relaxed),
    }
}

#[derive(Default)]
pub(crate) struct Residency {
    bytes: AtomicU64,
    buffers: AtomicU64,
    bind_groups: AtomicU64,
    cache: Mutex<BindGroupCache>,
}

/// One live wgpu buffer, counted until this drops (beside the buffer).
#[derive(Debug)]
pub(crate) struct Tracked {
    residency: Arc<Residency>,
    bytes: u64,
}

impl Tracked {
    pub(crate) fn residency(&self) -> &Residency {
        &self.residency
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.residency
            .bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
        self.residency.buffers.fetch_sub(1, Ordering::Relaxed);
        ALL_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
        ALL_BUFFERS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for Residency {
    /// A context's cache goes with it: its bind groups leave the totals.
    fn drop(&mut self) {
        let left = self.bind_groups.load(Ordering::Relaxed);
        ALL_BIND_GROUPS.fetch_sub(left, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Residency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Residency")
            .field("live", &self.live())
            .finish()
    }
}

impl Residency {
    pub(crate) fn track(self: &Arc<Self>, bytes: u64) -> Tracked {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.buffers.fetch_add(1, Ordering::Relaxed);
        ALL_BYTES.fetch_add(bytes, Ordering::Relaxed);
        ALL_BUFFERS.fetch_add(1, Ordering::Relaxed);
        Tracked {
            residency: self.clone(),
            bytes,
        }
    }

    pub(crate) fn live(&self) -> LiveMemory {
        LiveMemory {
            bytes: self.bytes.load(Ordering::Relaxed),
            buffers: self.buffers.load(Ordering::Relaxed),
            bind_groups: self.bind_groups.load(Ordering::Relaxed),
        }
    }

    /// The cached bind group of that key.
    pub(crate) fn cached_bind_group(&self, key: &BindKey) -> Option<wgpu::BindGroup> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.groups.get(key).cloned()
    }

    /// Caches `group` under `key`, indexed by each buffer it binds.
    pub(crate) fn cache_bind_group(&self, key: BindKey, bound: usize, group: wgpu::BindGroup) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.groups.insert(key, group).is_some() {
            return;
        }
        self.bind_groups.fetch_add(1, Ordering::Relaxed);
        ALL_BIND_GROUPS.fetch_add(1, Ordering::Relaxed);
        let mut distinct = key.1[..bound].to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        for id in distinct {
            cache.keys_of.entry(id).or_default().push(key);
        }
    }

    /// Evicts every cached bind group that binds buffer `id` (which is
    /// being dropped), so none of them keeps it alive.
    pub(crate) fn evict(&self, id: u64) {
        let mut evicted = Vec::new();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let Some(keys) = cache.keys_of.remove(&id) else {
                return;
            };
            for key in keys {
                let Some(group) = cache.groups.remove(&key) else {
                    continue;
                };
                evicted.push(group);
                // The other buffers of the group no longer lead to it.
                for other in key.1.iter().filter(|&&o| o != 0 && o != id) {
                    if let Some(list) = cache.keys_of.get_mut(other) {
                        list.retain(|k| *k != key);
                        if list.is_empty() {
                            cache.keys_of.remove(other);
                        }
                    }
                }
            }
        }
        self.bind_groups
            .fetch_sub(evicted.len() as u64, Ordering::Relaxed);
        ALL_BIND_GROUPS.fetch_sub(evicted.len() as u64, Ordering::Relaxed);
        // Dropped outside the lock: wgpu's drop may take its own locks.
        drop(evicted);
    }
}

#[cfg(test)]
#[path = "residency_tests.rs"]
mod tests;
