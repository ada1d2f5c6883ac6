//! The device's memory, where the adapter says how much it has.
//!
//! WebGPU (and so wgpu's portable API) reports no memory size at all. On
//! Vulkan the physical device lists its memory heaps: the largest
//! device-local one is the GPU's own memory (a discrete card's VRAM; for
//! integrated and CPU devices such as lavapipe, the system memory it may
//! use). Other native backends are not queried: `None` means "not
//! reported", and the memory preflight then checks the buffer limits only.

/// Bytes of the adapter's largest device-local memory heap, where known.
pub(crate) fn device_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    vulkan_heap(adapter)
}

#[cfg(all(
    not(target_arch = "wasm32"),
    any(target_os = "linux", target_os = "android", target_os = "windows")
))]
fn vulkan_heap(adapter: &wgpu::Adapter) -> Option<u64> {
    // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT.
    const DEVICE_LOCAL: u32 = 0x1;
    // SAFETY: the hal adapter is only read (no resource is created or
    // destroyed through it), and `vkGetPhysicalDeviceMemoryProperties` has
    // no preconditions beyond a valid physical device of that instance,
    // which the adapter owns for as long as the guard lives.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let properties = unsafe {
        hal.shared_instance()
            .raw_instance()
            .get_physical_device_memory_properties(hal.raw_physical_device())
    };
    properties
        .memory_heaps_as_slice()
        .iter()
        .filter(|heap| heap.flags.as_raw() & DEVICE_LOCAL != 0)
        .map(|heap| heap.size)
        .max()
}

#[cfg(not(all(
    not(target_arch = "wasm32"),
    any(target_os = "linux", target_os = "android", target_os = "windows")
)))]
fn vulkan_heap(_adapter: &wgpu::Adapter) -> Option<u64> {
    None
}
