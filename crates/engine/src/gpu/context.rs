//! The GPU context: adapter, device, queue, and what they granted.
//!
//! Every later choice (which kernel variant, how big a buffer may be, whether
//! timestamps can be taken) reads the `GpuFeatures` and `wgpu::Limits` recorded
//! here, once, at start-up.

use std::sync::{Arc, Mutex};

use super::counters::GpuCounters;
use super::error::GpuError;
use super::pipeline::PipelineCache;
use super::residency::{LiveMemory, Residency};
use super::tuning::{AdapterClass, Tuning, TUNING_ENV};
use super::uniform_arena::UniformArena;
use super::weight_store::{WeightStore, WEIGHT_STORE_ENV};

/// What the adapter is, as reported to users (`wick info`, `engine.info()`).
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
}

/// Which limits a context asks its device for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DeviceLimits {
    /// Everything the adapter offers: model weights want the largest
    /// storage bindings and buffers it can give.
    #[default]
    Adapter,
    /// WebGPU's defaults (128 MiB storage bindings, 256 MiB buffers, 256
    /// invocations a workgroup): what every device grants, a phone's
    /// included. Matrices are split by rows to fit a binding.
    WebGpuDefault,
}

impl DeviceLimits {
    pub fn name(self) -> &'static str {
        match self {
            DeviceLimits::Adapter => "adapter",
            DeviceLimits::WebGpuDefault => "default",
        }
    }
}

impl std::str::FromStr for DeviceLimits {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "adapter" => Ok(DeviceLimits::Adapter),
            "default" => Ok(DeviceLimits::WebGpuDefault),
            _ => Err(format!(
                "\"{s}\" is not a limits choice: \"adapter\" (the adapter's largest, the default) or \"default\" (WebGPU's defaults, as a phone grants)"
            )),
        }
    }
}

/// Optional features wick can use, as granted by the device.
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuFeatures {
    pub shader_f16: bool,
    pub subgroups: bool,
    /// The fewest invocations a subgroup may have (0 without subgroups):
    /// the windowed prefill core shares x through subgroups of at least a
    /// chunk's 8 vec4s (`kernels::matmul::tile_shape::TileShape::windowed`).
    pub subgroup_min_size: u32,
    pub timestamp_query: bool,
    /// WGSL's `dot4I8Packed` (the `packed_4x8_integer_dot_product` language
    /// feature): decode's GEMV dots 8-bit x with 8-bit weights four at a
    /// time (`linear_x_q8_dot4.wgsl`).
    pub packed_dot4: bool,
}

pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
    /// What the kernels do on this adapter (`tuning.rs`).
    pub tuning: Tuning,
    pub features: GpuFeatures,
    pub limits: wgpu::Limits,
    /// Which limits were asked for (`limits` holds what was granted).
    pub device_limits: DeviceLimits,
    /// Where weight matrices live (`weight_store.rs`).
    pub weight_store: WeightStore,
    /// Bytes of device memory, where the adapter reports it (Vulkan's
    /// largest device-local heap; never in the browser): see
    /// `device_memory.rs`.
    pub device_memory: Option<u64>,
    pub counters: GpuCounters,
    pub(crate) pipelines: PipelineCache,
    /// Live buffers and the bind-group cache (`residency.rs`); shared with
    /// every buffer, which leaves it when dropped.
    pub(crate) residency: Arc<Residency>,
    pub(crate) arena: Mutex<UniformArena>,
    /// The profile being measured, while profiling (gpu::profile).
    pub(crate) profile: Mutex<Option<super::profile::Profile>>,
    /// Why the device was lost, once it was (set by wgpu's callback).
    lost: Arc<Mutex<Option<String>>>,
    /// The first error no scope caught (`fault.rs`).
    fault: super::fault::FaultSlot,
}

impl GpuContext {
    /// Opens the best adapter: a high-performance GPU first; a software adapter
    /// (lavapipe, SwiftShader) is accepted and reported as such. `WGPU_BACKEND`
    /// narrows the backends natively, as in every wgpu program.
    pub async fn new() -> Result<GpuContext, GpuError> {
        Self::with_weight_store(None).await
    }

    /// As `new`, with weights in `store` where given (tests run both stores
    /// on one adapter); otherwise `WICK_WEIGHT_STORE`, else the adapter's
    /// default.
    pub async fn with_weight_store(store: Option<WeightStore>) -> Result<GpuContext, GpuError> {
        Self::open(store, DeviceLimits::Adapter).await
    }

    /// As `with_weight_store`, asking the device for `limits`.
    pub async fn open(
        store: Option<WeightStore>,
        limits: DeviceLimits,
    ) -> Result<GpuContext, GpuError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        if cfg!(target_arch = "wasm32") {
            desc.backends = wgpu::Backends::BROWSER_WEBGPU;
        }
        let backends = format!("{:?}", desc.backends);
        let instance = wgpu::Instance::new(desc);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                ..Default::default()
            })
            .await
            .map_err(|_| GpuError::NoAdapter { backends })?;
        let packed_dot4 = instance
            .wgsl_language_features()
            .contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct);
        Self::from_adapter(adapter, packed_dot4, store, limits).await
    }

    async fn from_adapter(
        adapter: wgpu::Adapter,
        packed_dot4: bool,
        store: Option<WeightStore>,
        limits_asked: DeviceLimits,
    ) -> Result<GpuContext, GpuError> {
        let info = adapter.get_info();
        let device_memory = super::device_memory::device_memory(&adapter);
        let summary = AdapterSummary {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
        };
        let offered = adapter.features();
        let wanted =
            wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP | wgpu::Features::TIMESTAMP_QUERY;
        let required_features = offered & wanted;
        let required_limits = match limits_asked {
            DeviceLimits::Adapter => adapter.limits(),
            // WebGPU's defaults, which every adapter offers.
            DeviceLimits::WebGpuDefault => wgpu::Limits::default(),
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wick"),
                required_features,
                required_limits: required_limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::RequestDevice {
                adapter: summary.name.clone(),
                message: e.to_string(),
            })?;
        let granted = device.features();
        let features = GpuFeatures {
            shader_f16: granted.contains(wgpu::Features::SHADER_F16),
            subgroups: granted.contains(wgpu::Features::SUBGROUP),
            subgroup_min_size: match granted.contains(wgpu::Features::SUBGROUP) {
                true => info.subgroup_min_size,
                false => 0,
            },
            timestamp_query: granted.contains(wgpu::Features::TIMESTAMP_QUERY),
            packed_dot4,
        };
        let limits = device.limits();
        let mut tuning = Tuning::for_class(AdapterClass::of(&info), features.subgroups);
        // A developer's override, to measure what a choice buys (natively;
        // the browser has no environment).
        if let Ok(spec) = std::env::var(TUNING_ENV) {
            tuning = tuning
                .overridden(&spec, features.subgroups)
                .map_err(GpuError::Setting)?;
        }
        let weight_store = match (store, std::env::var(WEIGHT_STORE_ENV)) {
            (Some(store), _) => store,
            (None, Ok(name)) if !cfg!(target_arch = "wasm32") => WeightStore::parse(&name)?,
            _ => WeightStore::default_for(
                tuning.weights_in_textures,
                limits.max_texture_dimension_2d,
            ),
        };
        if weight_store == WeightStore::Textures
            && limits.max_texture_dimension_2d < super::weight_store::TEXTURE_WIDTH
        {
            return Err(GpuError::Setting(format!(
                "weights in textures need textures {} texels wide; adapter '{}' allows {}",
                super::weight_store::TEXTURE_WIDTH,
                summary.name,
                limits.max_texture_dimension_2d
            )));
        }
        let residency = Arc::new(Residency::default());
        let arena = UniformArena::new(&device, &limits, &residency);
        let lost = Arc::new(Mutex::new(None));
        let on_lost = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            let why = match message.is_empty() {
                true => format!("{reason:?}"),
                false => format!("{reason:?}: {message}"),
            };
            *on_lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        });
        let fault = super::fault::FaultSlot::default();
        super::fault::install(&device, &fault);
        Ok(GpuContext {
            device,
            queue,
            adapter: summary,
            tuning,
            features,
            limits,
            device_limits: limits_asked,
            weight_store,
            device_memory,
            counters: GpuCounters::default(),
            pipelines: PipelineCache::default(),
            residency,
            arena: Mutex::new(arena),
            profile: Mutex::new(None),
            lost,
            fault,
        })
    }

    /// `DeviceLost` once the device is known to be gone, else the first
    /// uncaptured error (out of memory, validation): every later submit and
    /// read fails with it, so a caller learns why rather than seeing
    /// garbage. Cheap (two flags): submits call it.
    pub fn check_alive(&self) -> Result<(), GpuError> {
        if let Some(reason) = self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Err(GpuError::DeviceLost { reason });
        }
        match self.fault.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Why an operation failed when it may be the device: natively wgpu
    /// calls the lost callback only from a poll, so give it one first. For
    /// error paths only.
    pub(crate) fn lost_cause(&self) -> Result<(), GpuError> {
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::Poll);
        self.check_alive()
    }

    /// The largest buffer one kernel binding may see: the smaller of the
    /// storage-binding and buffer limits.
    pub fn max_binding_bytes(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// Keeps `error` as the context's fault (the first one stays): every
    /// later submit and readback fails with it (`check_alive`).
    pub(crate) fn record_fault(&self, error: GpuError) {
        let mut fault = self.fault.lock().unwrap_or_else(|p| p.into_inner());
        fault.get_or_insert(error);
    }

    /// The most bytes one weight part may take in this context's store.
    pub fn max_weight_part_bytes(&self) -> u64 {
        self.weight_store.max_part_bytes(
            self.max_binding_bytes(),
            self.limits.max_texture_dimension_2d,
        )
    }

    /// Waits for all submitted work (native only; in the browser the event
    /// loop drives completion and readbacks await their own promises).
    pub fn wait_idle(&self) {
        self.wait_for(None);
    }

    /// Natively, blocks until `submission` (the latest when none) has run and
    /// its callbacks fired; in the browser callbacks come from the event loop.
    pub fn wait_for(&self, submission: Option<wgpu::SubmissionIndex>) {
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::Wait {
            submission_index: submission,
            timeout: None,
        });
        #[cfg(target_arch = "wasm32")]
        let _ = submission;
    }
}

impl GpuContext {
    /// What the engine holds on this context now: live buffers, their bytes
    /// and cached bind groups. After `Engine::dispose` it is back to what it
    /// was before the load.
    pub fn live_memory(&self) -> LiveMemory {
        self.residency.live()
    }
}
