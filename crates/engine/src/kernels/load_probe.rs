//! Which binding kinds a GEMV's loads are cheap through on this adapter:
//! the same F32 GEMV (`shaders/load_probe.wgsl`) with its weights in a
//! storage buffer or a texture, and x in a storage or a uniform buffer.
//!
//! Why it exists: on Mesa 22.3's llvmpipe (Debian 12's lavapipe, this
//! project's test GPU) a storage-buffer load whose address is not a
//! compile-time uniform runs as a loop over the SIMD lanes, and its machine
//! code (read from a running decode) puts each lane's word into the vector
//! through the stack: a narrow store then a wide reload, a store-forwarding
//! stall per 4 bytes loaded. That is where the engine's GEMVs spend their
//! time there. Texel fetches and uniform-buffer loads do not take that loop
//! (on a 2-core EPYC the texture path read the same weights 3-4x faster).
//! `wick bench-kernels --load-paths` measures it on any adapter.
//! Native only (it blocks on the device), like the rest of `bench`.

use wgpu::util::DeviceExt;

use super::bench::{pseudo_random, seconds_each};
use crate::gpu::error::shape_err;
use crate::gpu::{GpuContext, GpuError};

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

/// One path's result.
#[derive(Clone, Debug)]
pub struct LoadProbe {
    pub path: LoadPath,
    pub rows: usize,
    pub cols: usize,
    /// Wall-clock seconds per GEMV.
    pub seconds: f64,
    /// Weight bytes (4 a weight) read per second, in GB/s.
    pub gbps: f64,
}

/// Rows each invocation takes: x is loaded once for all of them, as the
/// engine's vec4 core loads it once for a group's rows.
const LANE_ROWS: usize = 8;
/// Invocations a workgroup: one llvmpipe SIMD batch (AVX2).
const WORKGROUP: usize = 8;
/// Texels in a texture row (at most the adapter's largest dimension).
const TEXTURE_WIDTH: u32 = 4096;

/// Times at least `iters` GEMVs of a `rows x cols` F32 matrix (cols a
/// multiple of 4) through each of `LoadPath::ALL`, after checking each
/// path's y against the CPU's. Errors name a shape the adapter's texture or
/// uniform limits cannot hold.
pub async fn probe_load_paths(
    ctx: &GpuContext,
    rows: usize,
    cols: usize,
    iters: usize,
) -> Result<Vec<LoadProbe>, GpuError> {
    let width = TEXTURE_WIDTH.min(ctx.limits.max_texture_dimension_2d.next_power_of_two() / 2);
    probe_with_width(ctx, rows, cols, iters, width.max(1)).await
}

/// The matrix and x every path reads, and the CPU's y.
struct Operands {
    weights: Vec<f32>,
    x: Vec<f32>,
    /// Each row's exact sum and its sum of |w x| (the error bound's scale).
    expected: Vec<(f64, f64)>,
}

async fn probe_with_width(
    ctx: &GpuContext,
    rows: usize,
    cols: usize,
    iters: usize,
    width: u32,
) -> Result<Vec<LoadProbe>, GpuError> {
    let bad = |m: String| shape_err("load_probe", m);
    if rows == 0 || cols == 0 || cols % 4 != 0 {
        return Err(bad(format!(
            "a {rows}x{cols} matrix: rows and cols must be positive, cols a multiple of 4"
        )));
    }
    let x_bytes = cols as u64 * 4;
    let max_uniform = ctx.limits.max_uniform_buffer_binding_size;
    if x_bytes > max_uniform {
        return Err(bad(format!(
            "x of {cols} f32s is {x_bytes} bytes, over the adapter's {max_uniform}-byte uniform binding"
        )));
    }
    let texels = (rows * cols / 4) as u64;
    let height = texels.div_ceil(width as u64);
    let max_dim = ctx.limits.max_texture_dimension_2d as u64;
    if height > max_dim || width as u64 > max_dim {
        return Err(bad(format!(
            "{texels} texels need a {width}x{height} texture, over the adapter's {max_dim} texels a side"
        )));
    }
    let weights = pseudo_random(rows * cols, 3);
    let x = pseudo_random(cols, 4);
    let expected = (0..rows)
        .map(|r| {
            let row = &weights[r * cols..(r + 1) * cols];
            row.iter().zip(&x).fold((0.0, 0.0), |(sum, abs), (&w, &v)| {
                let p = w as f64 * v as f64;
                (sum + p, abs + p.abs())
            })
        })
        .collect();
    let ops = Operands {
        weights,
        x,
        expected,
    };
    let mut out = Vec::with_capacity(LoadPath::ALL.len());
    for path in LoadPath::ALL {
        out.push(probe_one(ctx, &ops, (rows, cols), iters, path, (width, height as u32)).await?);
    }
    Ok(out)
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
    let source = probe_source(path, rows, cols, width);
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
            weights_buffer = ctx.upload_f32("load probe w", &ops.weights)?;
            weights_buffer.raw().as_entire_binding()
        }
        WeightsIn::Texture => {
            texture_view = upload_texture(ctx, &ops.weights, width, height);
            wgpu::BindingResource::TextureView(&texture_view)
        }
    };
    let x_storage;
    let x_uniform;
    let x = match path.x {
        XIn::StorageBuffer => {
            x_storage = ctx.upload_f32("load probe x", &ops.x)?;
            x_storage.raw().as_entire_binding()
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
                resource: y.raw().as_entire_binding(),
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
    check(path, &got, &ops.expected, cols)?;
    let seconds = seconds_each(iters.div_ceil(4), async |n| {
        run(n);
        Ok(())
    })
    .await?;
    Ok(LoadProbe {
        path,
        rows,
        cols,
        seconds,
        gbps: (rows * cols * 4) as f64 / seconds / 1e9,
    })
}

/// The weights as a `width x height` rgba32float texture, zero past the end.
fn upload_texture(ctx: &GpuContext, weights: &[f32], width: u32, height: u32) -> wgpu::TextureView {
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
        format: wgpu::TextureFormat::Rgba32Float,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    let mut padded = weights.to_vec();
    padded.resize(width as usize * height as usize * 4, 0.0);
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
/// order errs by at most about cols * 2^-24 * sum |w x| (each of the
/// cols - 1 additions and each product rounds by 2^-24 of a value no larger
/// than that sum); f32::EPSILON (2^-23) doubles it for the last dot of the
/// four accumulator lanes. A wrong load (another row, a zero) is off by a
/// sizeable part of the sum itself.
fn check(
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
                what: format!("load probe ({})", path.name()),
                message: format!("row {row}: {g} where the CPU has {e}"),
            });
        }
    }
    Ok(())
}

/// load_probe.wgsl for `path`, its row steps written out (a run-time index
/// into the accumulators would put them in memory on CPU adapters).
fn probe_source(path: LoadPath, rows: usize, cols: usize, width: u32) -> String {
    let (w_decl, w_load) = match path.weights {
        WeightsIn::StorageBuffer => (
            "@group(0) @binding(0) var<storage, read> w: array<vec4<f32>>;",
            "w[i]",
        ),
        WeightsIn::Texture => (
            "@group(0) @binding(0) var w: texture_2d<f32>;",
            "textureLoad(w, vec2<u32>(i & ((1u << WIDTH_SHIFT) - 1u), i >> WIDTH_SHIFT), 0)",
        ),
    };
    let x_decl = match path.x {
        XIn::StorageBuffer => {
            "@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;".to_string()
        }
        XIn::Uniform => format!(
            "@group(0) @binding(1) var<uniform> x: array<vec4<f32>, {}>;",
            cols / 4
        ),
    };
    let steps: String = (0..LANE_ROWS)
        .map(|j| format!("        acc[{j}] += w_at(min(row0 + {j}u, ROWS - 1u) * K4 + i) * xv;\n"))
        .collect();
    let defines = [
        ("K4", (cols / 4).to_string()),
        ("ROWS", rows.to_string()),
        ("WIDTH_SHIFT", width.trailing_zeros().to_string()),
        ("LANE_ROWS", LANE_ROWS.to_string()),
        ("WG", WORKGROUP.to_string()),
        ("W_DECL", w_decl.to_string()),
        ("X_DECL", x_decl),
        ("W_LOAD", w_load.to_string()),
        ("ROW_STEPS", steps.trim_end().to_string()),
    ];
    let mut text = include_str!("../../../../shaders/load_probe.wgsl").to_string();
    for (name, value) in defines {
        text = text.replace(&format!("{{{{{name}}}}}"), &value);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::ctx;

    /// Awkward shapes: rows not a multiple of a workgroup's rows (64) or
    /// of an invocation's (8), a texture narrower than the matrix so its
    /// rows wrap and the last is part padding; every path must give the
    /// CPU's y (`check` inside the probe) and a time.
    #[test]
    fn every_path_gives_the_cpus_gemv() {
        let ctx = ctx();
        for (rows, cols, width) in [(13, 36, 16), (70, 4, 8)] {
            let probes = pollster::block_on(probe_with_width(ctx, rows, cols, 1, width)).unwrap();
            assert_eq!(probes.len(), LoadPath::ALL.len());
            for (p, path) in probes.iter().zip(LoadPath::ALL) {
                assert_eq!(p.path, path);
                assert!(p.seconds > 0.0 && p.gbps.is_finite(), "{p:?}");
            }
        }
    }

    #[test]
    fn shapes_the_adapter_cannot_hold_are_refused_by_name() {
        let ctx = ctx();
        let run = |rows, cols| pollster::block_on(probe_load_paths(ctx, rows, cols, 1));
        let err = run(8, 6).unwrap_err().to_string();
        assert!(err.contains("multiple of 4"), "{err}");
        let cols = ctx.limits.max_uniform_buffer_binding_size as usize / 4 + 4;
        let err = run(1, cols).unwrap_err().to_string();
        assert!(err.contains("uniform binding"), "{err}");
        let side = ctx.limits.max_texture_dimension_2d as usize;
        let err = run(side * 4 + 1, 4096 * 4).unwrap_err().to_string();
        assert!(err.contains("texels a side"), "{err}");
    }

    #[test]
    fn a_wrong_y_is_caught() {
        let path = LoadPath::ALL[0];
        let expected = [(1.0, 3.0), (2.0, 2.0)];
        assert!(check(path, &[1.0, 2.0], &expected, 4).is_ok());
        let err = check(path, &[1.0, 2.001], &expected, 4).unwrap_err();
        assert!(err.to_string().contains("row 1"), "{err}");
        assert!(check(path, &[1.0], &expected, 4).is_err());
        assert!(check(path, &[f32::NAN], &expected[..1], 4).is_err());
    }
}
