//! Which binding kinds a GEMV's loads are cheap through on this adapter:
//! the same GEMV (`shaders/load_probe*.wgsl`) with its weights in a
//! storage buffer or a texture, and x in a storage or a uniform buffer, over
//! F32 weights (a word a weight) or 4-bit ones (`ProbeFormat::Q4`: a word
//! per 8 weights, as the engine's nibble formats).
//!
//! Why it exists: on Mesa 22.3's llvmpipe (Debian 12's lavapipe, this
//! project's test GPU) the GEMVs' storage-buffer loads (addresses from
//! invocation ids and loop counters) run as a loop over the SIMD lanes, and
//! its machine code (read from a running decode) puts each lane's word into the vector
//! through the stack: a narrow store then a wide reload, a store-forwarding
//! stall per 4 bytes loaded. That is where the engine's GEMVs spend their
//! time there. Texel fetches and uniform-buffer loads do not take that loop
//! (on a 2-core EPYC the texture path read the same weights 3-4x faster).
//! `wick bench-kernels --load-paths` measures it on any adapter.
//! Native only (it blocks on the device), like the rest of `bench`.

use wgpu::util::DeviceExt;

use crate::gpu::error::shape_err;
use crate::gpu::{GpuContext, GpuError};
use crate::kernels::bench::{pseudo_random, seconds_each};
use source::probe_source;

/// Where the probe's GEMV reads its weights from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightsIn {
    /// `var<storage, read> w: array<vec4<f32>>`, as the engine binds them.
    StorageBuffer,
    /// An rgba32float 2-D texture read with `textureLoad`, a texel a vec4.
    Texture,
}

/// Where the probe's GEMV reads x from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XIn {
    /// `var<storage, read>`, as the engine binds activations.
    StorageBuffer,
    /// `var<uniform>`: at most the adapter's uniform binding size.
    Uniform,
}

/// One of the four ways, by name as the report prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadPath {
    pub weights: WeightsIn,
    pub x: XIn,
}

impl LoadPath {
    /// Every combination, the engine's own (storage, storage) first.
    pub const ALL: [LoadPath; 4] = [
        LoadPath::new(WeightsIn::StorageBuffer, XIn::StorageBuffer),
        LoadPath::new(WeightsIn::StorageBuffer, XIn::Uniform),
        LoadPath::new(WeightsIn::Texture, XIn::StorageBuffer),
        LoadPath::new(WeightsIn::Texture, XIn::Uniform),
    ];

    pub const fn new(weights: WeightsIn, x: XIn) -> LoadPath {
        LoadPath { weights, x }
    }

    /// "w storage, x uniform" and so on.
    pub fn name(self) -> String {
        let kind = |storage: bool, other: &str| {
            if storage {
                "storage".to_string()
            } else {
                other.to_string()
            }
        };
        format!(
            "w {}, x {}",
            kind(self.weights == WeightsIn::StorageBuffer, "texture"),
            kind(self.x == XIn::StorageBuffer, "uniform")
        )
    }
}

/// The probe's weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeFormat {
    /// f32 weights, 4 a texel.
    F32,
    /// Blocks of 32 weights d * (q - 8), as Q4_0: 16 bytes of nibbles
    /// (byte i's low nibble weight i, its high one weight i + 16), and an
    /// f32 d per block, the scales after all the quants in the same
    /// binding (as the GPU layout keeps them apart).
    Q4,
}

impl ProbeFormat {
    pub const ALL: [ProbeFormat; 2] = [ProbeFormat::F32, ProbeFormat::Q4];

    pub fn name(self) -> &'static str {
        match self {
            ProbeFormat::F32 => "F32",
            ProbeFormat::Q4 => "Q4",
        }
    }

    /// Weights per row must be a multiple of this.
    pub fn block(self) -> usize {
        match self {
            ProbeFormat::F32 => 4,
            ProbeFormat::Q4 => 32,
        }
    }

    /// Bytes a row of `cols` weights reads.
    pub fn row_bytes(self, cols: usize) -> usize {
        match self {
            ProbeFormat::F32 => cols * 4,
            ProbeFormat::Q4 => cols / 32 * 20,
        }
    }
}

/// One path's result.
#[derive(Clone, Debug)]
pub struct LoadProbe {
    pub format: ProbeFormat,
    pub path: LoadPath,
    pub rows: usize,
    pub cols: usize,
    /// Wall-clock seconds per GEMV.
    pub seconds: f64,
    /// Weight bytes (quants and scales) read per second, in GB/s.
    pub gbps: f64,
}

/// Rows each invocation takes: x is loaded once for all of them, as the
/// engine's vec4 core loads it once for a group's rows.
const LANE_ROWS: usize = 8;
/// Invocations a workgroup: one llvmpipe SIMD batch (AVX2).
const WORKGROUP: usize = 8;
/// Texels in a texture row (at most the adapter's largest dimension).
const TEXTURE_WIDTH: u32 = 4096;

/// Times at least `iters` GEMVs of a `rows x cols` matrix of `format`
/// (cols a multiple of its `block`) through each of `LoadPath::ALL`, after
/// checking each path's y against the CPU's. Errors name a shape the format
/// or the adapter's texture or uniform limits cannot hold.
pub async fn probe_load_paths(
    ctx: &GpuContext,
    format: ProbeFormat,
    rows: usize,
    cols: usize,
    iters: usize,
) -> Result<Vec<LoadProbe>, GpuError> {
    let width = TEXTURE_WIDTH.min(ctx.limits.max_texture_dimension_2d.next_power_of_two() / 2);
    probe_with_width(ctx, format, rows, cols, iters, width.max(1)).await
}

/// The matrix and x every path reads, and the CPU's y.
struct Operands {
    format: ProbeFormat,
    /// The matrix as stored: f32 bits, or Q4's quant words then scales.
    words: Vec<u32>,
    x: Vec<f32>,
    /// Each row's exact sum and its sum of |w x| (the error bound's scale).
    expected: Vec<(f64, f64)>,
}

async fn probe_with_width(
    ctx: &GpuContext,
    format: ProbeFormat,
    rows: usize,
    cols: usize,
    iters: usize,
    width: u32,
) -> Result<Vec<LoadProbe>, GpuError> {
    let bad = |m: String| shape_err("load_probe", m);
    let block = format.block();
    if rows == 0 || cols == 0 || cols % block != 0 {
        return Err(bad(format!(
            "a {rows}x{cols} {} matrix: rows and cols must be positive, cols a multiple of {block}",
            format.name()
        )));
    }
    let x_bytes = cols as u64 * 4;
    let max_uniform = ctx.limits.max_uniform_buffer_binding_size;
    if x_bytes > max_uniform {
        return Err(bad(format!(
            "x of {cols} f32s is {x_bytes} bytes, over the adapter's {max_uniform}-byte uniform binding"
        )));
    }
    let bytes = (rows * format.row_bytes(cols)) as u64;
    if bytes > ctx.max_binding_bytes() {
        return Err(bad(format!(
            "{bytes} bytes of weights, over the adapter's {}-byte storage binding",
            ctx.max_binding_bytes()
        )));
    }
    let texels = bytes.div_ceil(16);
    let height = texels.div_ceil(width as u64);
    let max_dim = ctx.limits.max_texture_dimension_2d as u64;
    if height > max_dim || width as u64 > max_dim {
        return Err(bad(format!(
            "{texels} texels need a {width}x{height} texture, over the adapter's {max_dim} texels a side"
        )));
    }
    let (words, weights) = matrix(format, rows, cols);
    let x = pseudo_random(cols, 4);
    let expected = (0..rows)
        .map(|r| {
            let row = &weights[r * cols..(r + 1) * cols];
            row.iter()
                .zip(&x)
                .fold((0.0, 0.0), |(sum, abs), (&(w, scale), &v)| {
                    let p = w * v as f64;
                    (sum + p, abs + scale * (v as f64).abs())
                })
        })
        .collect();
    let ops = Operands {
        format,
        words,
        x,
        expected,
    };
    let mut out = Vec::with_capacity(LoadPath::ALL.len());
    for path in LoadPath::ALL {
        out.push(probe_one(ctx, &ops, (rows, cols), iters, path, (width, height as u32)).await?);
    }
    Ok(out)
}

/// The stored matrix (`Operands::words`) and each weight's value with the
/// size of what the GPU sums for it (|w| for F32; Q4 computes d * (sum q x
/// - 8 sum x), so d * (q + 8)), row-major.
fn matrix(format: ProbeFormat, rows: usize, cols: usize) -> (Vec<u32>, Vec<(f64, f64)>) {
    match format {
        ProbeFormat::F32 => {
            let w = pseudo_random(rows * cols, 3);
            let words = w.iter().map(|v| v.to_bits()).collect();
            (
                words,
                w.iter().map(|&v| (v as f64, (v as f64).abs())).collect(),
            )
        }
        ProbeFormat::Q4 => {
            let blocks = rows * cols / 32;
            // Nibbles from [-1, 1) values; scales in [0, 0.1).
            let q: Vec<u32> = pseudo_random(blocks * 32, 3)
                .iter()
                .map(|v| ((v + 1.0) * 8.0).clamp(0.0, 15.0) as u32)
                .collect();
            let d: Vec<f32> = pseudo_random(blocks, 5)
                .iter()
                .map(|v| (v + 1.0) * 0.05)
                .collect();
            let mut words = Vec::with_capacity(blocks * 5);
            for b in 0..blocks {
                let nib = |i: usize| q[b * 32 + i];
                for word in 0..4 {
                    words.push((0..4).fold(0u32, |acc, byte| {
                        let i = word * 4 + byte;
                        acc | (nib(i) | nib(i + 16) << 4) << (8 * byte)
                    }));
                }
            }
            words.extend(d.iter().map(|v| v.to_bits()));
            let weights = (0..blocks * 32)
                .map(|i| {
                    let (qi, di) = (q[i] as f64, d[i / 32] as f64);
                    (di * (qi - 8.0), di * (qi + 8.0))
                })
                .collect();
            (words, weights)
        }
    }
}

async fn probe_one(
    ctx: &GpuContext,
    ops: &Operands,
    (rows, cols): (usize, usize),
    iters: usize,
    path: LoadPath,
    (width, height): (u32, u32),
) -> Result<LoadProbe, GpuError> {
    let device = &ctx.device;
    let source =
        probe_source(ops.format, path, rows, cols, width).map_err(|source| GpuError::Assembly {
            kernel: "load probe".into(),
            source,
        })?;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("load probe"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("load probe"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    // Kept alive until the bind group is made.
    let weights_buffer;
    let texture_view;
    let weights = match path.weights {
        WeightsIn::StorageBuffer => {
            weights_buffer = ctx.upload_bytes("load probe w", bytemuck::cast_slice(&ops.words))?;
            weights_buffer.binding()
        }
        WeightsIn::Texture => {
            texture_view = upload_texture(ctx, ops, width, height);
            wgpu::BindingResource::TextureView(&texture_view)
        }
    };
    let x_storage;
    let x_uniform;
    let x = match path.x {
        XIn::StorageBuffer => {
            x_storage = ctx.upload_f32("load probe x", &ops.x)?;
            x_storage.binding()
        }
        XIn::Uniform => {
            x_uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("load probe x uniform"),
                contents: bytemuck::cast_slice(&ops.x),
                usage: wgpu::BufferUsages::UNIFORM,
            });
            x_uniform.as_entire_binding()
        }
    };
    let y = ctx.create_storage("load probe y", rows as u64 * 4)?;
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("load probe"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: weights,
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: x,
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: y.binding(),
            },
        ],
    });
    let groups = rows.div_ceil(LANE_ROWS * WORKGROUP) as u32;
    let run = |n: usize| {
        let mut encoder = device.create_command_encoder(&Default::default());
        for _ in 0..n {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(groups, 1, 1);
        }
        ctx.queue.submit([encoder.finish()]);
        ctx.wait_idle();
    };
    run(1);
    let got = ctx.read_f32(&y, 0, rows).await?;
    check(ops.format, path, &got, &ops.expected, cols)?;
    let seconds = seconds_each(iters.div_ceil(4), async |n| {
        run(n);
        Ok(())
    })
    .await?;
    Ok(LoadProbe {
        format: ops.format,
        path,
        rows,
        cols,
        seconds,
        gbps: (rows * ops.format.row_bytes(cols)) as f64 / seconds / 1e9,
    })
}

/// The stored matrix as a `width x height` texture (rgba32float for F32,
/// rgba32uint for Q4), zero past the end.
fn upload_texture(ctx: &GpuContext, ops: &Operands, width: u32, height: u32) -> wgpu::TextureView {
    let size = wgpu::Extent3d {
        width,
        height,
        depth_or_array_layers: 1,
    };
    let texture = ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("load probe w texture"),
        size,
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: match ops.format {
            ProbeFormat::F32 => wgpu::TextureFormat::Rgba32Float,
            ProbeFormat::Q4 => wgpu::TextureFormat::Rgba32Uint,
        },
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    let mut padded = ops.words.clone();
    padded.resize(width as usize * height as usize * 4, 0);
    ctx.queue.write_texture(
        wgpu::TexelCopyTextureInfo {
            texture: &texture,
            mip_level: 0,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        bytemuck::cast_slice(&padded),
        wgpu::TexelCopyBufferLayout {
            offset: 0,
            bytes_per_row: Some(width * 16),
            rows_per_image: None,
        },
        size,
    );
    texture.create_view(&Default::default())
}

/// y against the CPU's f64 sums. Summing `cols` products in f32 in any
/// order errs by at most about cols * 2^-24 * the sum of the magnitudes
/// summed (each of the cols - 1 additions and each product rounds by 2^-24
/// of a value no larger than that sum; `matrix` gives those magnitudes);
/// f32::EPSILON (2^-23) doubles it for the last dot of the accumulator
/// lanes. A wrong load (another row, a zero) is off by a sizeable part of
/// the sum itself.
fn check(
    format: ProbeFormat,
    path: LoadPath,
    got: &[f32],
    expected: &[(f64, f64)],
    cols: usize,
) -> Result<(), GpuError> {
    if got.len() != expected.len() {
        return Err(shape_err(
            "load_probe",
            format!("{} values back for {} rows", got.len(), expected.len()),
        ));
    }
    for (row, (&g, &(e, abs))) in got.iter().zip(expected).enumerate() {
        let tolerance = cols as f64 * f64::from(f32::EPSILON) * abs;
        if (g as f64 - e).abs() > tolerance || !g.is_finite() {
            return Err(GpuError::Validation {
                what: format!("load probe ({} {})", format.name(), path.name()),
                message: format!("row {row}: {g} where the CPU has {e}"),
            });
        }
    }
    Ok(())
}
mod source;

#[cfg(test)]
mod tests;
