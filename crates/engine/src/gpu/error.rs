//! Typed errors of the GPU layer: every failure names what and where.

/// `Clone`: the context keeps an uncaptured error and returns it from every
/// later call.
#[derive(Clone, Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no GPU adapter found (backends tried: {backends}); natively install a Vulkan driver such as Mesa's lavapipe (`apt-get install mesa-vulkan-drivers`), in a browser enable WebGPU")]
    NoAdapter { backends: String },
    #[error("could not open the GPU device on adapter '{adapter}': {message}")]
    RequestDevice { adapter: String, message: String },
    #[error("shader for kernel '{kernel}' failed to compile: {message}")]
    ShaderCompile { kernel: String, message: String },
    /// The kernel's WGSL could not be put together from its sources, flags
    /// and defines (`gpu::wgsl`): a mistake in the engine, caught before
    /// the text reaches the compiler.
    #[error("assembling the WGSL of kernel '{kernel}': {source}")]
    Assembly {
        kernel: String,
        source: super::wgsl::WgslAssemblyError,
    },
    #[error("GPU validation failed in {what}: {message}")]
    Validation { what: String, message: String },
    #[error("the GPU ran out of memory ({what}): {message}; the engine is unusable, free memory (a smaller model or context) and load again")]
    OutOfMemory { what: String, message: String },
    #[error("buffer '{label}' of {size} bytes exceeds the adapter's {limit_name} ({limit} bytes)")]
    BufferTooLarge {
        label: String,
        size: u64,
        limit_name: &'static str,
        limit: u64,
    },
    #[error("kernel '{kernel}': {message}")]
    Shape {
        kernel: &'static str,
        message: String,
    },
    #[error(
        "one step recorded {needed} kernel parameter slots, over the uniform arena's {capacity}"
    )]
    UniformArenaFull { needed: usize, capacity: usize },
    #[error("reading back from the GPU failed: {0}")]
    Readback(String),
    #[error("not supported here: {what}")]
    Unsupported { what: String },
    #[error("the GPU device was lost ({reason}); load the model again")]
    DeviceLost { reason: String },
    #[error("invalid setting: {0}")]
    Setting(String),
}

/// Shorthand used by every kernel's shape checks.
pub(crate) fn shape_err(kernel: &'static str, message: impl Into<String>) -> GpuError {
    GpuError::Shape {
        kernel,
        message: message.into(),
    }
}
