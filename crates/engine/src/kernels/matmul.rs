//! Matrix multiply against a stored-format weight matrix:
//! `out[t, n] = sum_k x[t, k] * W[n, k]` for token rows `t < m`.
//!
//! Two forms, chosen by `m`: a matrix-vector form for decode (up to
//! `GEMV_MAX_TOKENS` rows; memory bound, so it streams each weight row once
//! with a whole workgroup) and a register-blocked form for prefill, where each
//! decoded weight serves several token rows. Both decode inside the kernel
//! with quant.wgsl, and both record one dispatch per matrix part.

use bytemuck::{Pod, Zeroable};

use super::check_elems;
use super::weights::{QuantMatrix, QUANT_WGSL, UNIT};
use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};

/// Up to this many token rows go through the matrix-vector form.
pub const GEMV_MAX_TOKENS: usize = 4;
/// Tile of the prefill form per invocation: token rows x output rows. Each
/// decoded weight unit serves TILE_M tokens, each x unit TILE_N rows; live
/// registers ~ 16 * TILE_M (x) + 16 (weights) + TILE_M * TILE_N (sums) = 112.
/// On lavapipe 4 x 8 ran 1.3-1.9 GFLOP/s (Q8_0/Q4_K, m = 64, 1024 x 1024)
/// against 1.0-1.6 for 4 x 4 (noisy: shared 2-core machine).
const TILE_M: u32 = 4;
const TILE_N: u32 = 8;

/// Output rows per GEMV workgroup. GPUs get 4: enough workgroups to fill
/// them even for 896-row matrices, and x reused from registers 4 times.
/// CPU adapters pay a large fixed cost per workgroup (on lavapipe probably
/// the two barriers: workgroup-memory zeroing and the reduction): 2048 x 2048
/// Q8_0 GEMVs ran 2-2.7x faster with 16 rows than with 2 there. The
/// reduction's shared array (rows * tokens * 64 f32) stays within 8 KiB,
/// half of WebGPU's default 16 KiB.
fn gemv_rows(software: bool, tokens: usize) -> u32 {
    match (software, tokens) {
        (false, _) => 4,
        (true, 1 | 2) => 16,
        (true, _) => 8,
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    m: u32,
    k: u32,
    rows: u32,
    row_bytes: u32,
    x_offset: u32,
    out_offset: u32,
    out_stride: u32,
    full_units: u32,
    units: u32,
}

const COMMON_WGSL: &str = include_str!("../../../../shaders/matmul_common.wgsl");
const GEMV_WGSL: &str = include_str!("../../../../shaders/matmul_gemv.wgsl");
const TILED_WGSL: &str = include_str!("../../../../shaders/matmul_tiled.wgsl");
const STORAGE: &[Access] = &[Access::Read, Access::Read, Access::ReadWrite];

/// Which kernel computes a matmul; `matmul` picks by `m` and the adapter,
/// tests force each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// Matrix-vector, this many output rows per workgroup (at most 16).
    Gemv(u32),
    Tiled,
}

/// `out[out_offset + t * w.rows + n] = sum_k x[x_offset + t * w.cols + k] * W[n, k]`
/// for `t < m`, `n < w.rows` (offsets in f32 elements).
pub fn matmul(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    w: &QuantMatrix,
    out: &GpuBuffer,
    out_offset: usize,
    m: usize,
) -> Result<(), GpuError> {
    let software = rec.ctx().adapter.is_software;
    let form = if m <= GEMV_MAX_TOKENS {
        Form::Gemv(gemv_rows(software, m))
    } else {
        Form::Tiled
    };
    matmul_form(rec, form, x, x_offset, w, out, out_offset, m)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_form(
    rec: &mut Recorder,
    form: Form,
    x: &GpuBuffer,
    x_offset: usize,
    w: &QuantMatrix,
    out: &GpuBuffer,
    out_offset: usize,
    m: usize,
) -> Result<(), GpuError> {
    check_elems("matmul", "x", x, x_offset + m * w.cols)?;
    check_elems("matmul", "out", out, out_offset + m * w.rows)?;
    if m == 0 {
        return Ok(());
    }
    let fmt = w.format();
    let mut defines = fmt.defines();
    let params = |m: usize, x_offset: usize, out_offset: usize, rows: usize| Params {
        m: m as u32,
        k: w.cols as u32,
        rows: rows as u32,
        row_bytes: w.row_bytes() as u32,
        x_offset: x_offset as u32,
        out_offset: out_offset as u32,
        out_stride: w.rows as u32,
        full_units: (w.cols / UNIT) as u32,
        units: w.cols.div_ceil(UNIT) as u32,
    };
    match form {
        Form::Gemv(rows_per_group) => {
            defines.push(("ROWS", rows_per_group.to_string()));
            defines.push(("TOKENS", String::new()));
            // Token rows in chunks of up to GEMV_MAX_TOKENS, one variant per
            // chunk size so the kernel's register arrays have fixed length.
            let mut t0 = 0;
            while t0 < m {
                let chunk = (m - t0).min(GEMV_MAX_TOKENS);
                defines.last_mut().expect("pushed above").1 = chunk.to_string();
                let name = format!("matmul_gemv_{}_r{rows_per_group}_t{chunk}", fmt.fmt);
                let spec = KernelSpec {
                    name: &name,
                    sources: &[QUANT_WGSL, COMMON_WGSL, GEMV_WGSL],
                    defines: &defines,
                    entry: "main",
                    storage: STORAGE,
                };
                for part in &w.parts {
                    let p = params(
                        chunk,
                        x_offset + t0 * w.cols,
                        out_offset + t0 * w.rows + part.first_row,
                        part.rows,
                    );
                    let groups = workgroups_for(part.rows as u32, rows_per_group);
                    rec.dispatch(&spec, &p, &[&part.buffer, x, out], groups);
                }
                t0 += chunk;
            }
        }
        Form::Tiled => {
            // Token tiles per workgroup: enough for m, at most 8.
            let tt = (m as u32).div_ceil(TILE_M).next_power_of_two().min(8);
            let rows_per_group = 64 / tt * TILE_N;
            defines.push(("TM", TILE_M.to_string()));
            defines.push(("TN", TILE_N.to_string()));
            defines.push(("TT", tt.to_string()));
            let name = format!("matmul_tiled_{}_m{TILE_M}_n{TILE_N}_t{tt}", fmt.fmt);
            let spec = KernelSpec {
                name: &name,
                sources: &[QUANT_WGSL, COMMON_WGSL, TILED_WGSL],
                defines: &defines,
                entry: "main",
                storage: STORAGE,
            };
            let token_groups = (m as u32).div_ceil(tt * TILE_M);
            if token_groups > 65535 {
                return Err(shape_err(
                    "matmul",
                    format!("{m} token rows exceed one dispatch"),
                ));
            }
            for part in &w.parts {
                let row_groups = (part.rows as u32).div_ceil(rows_per_group);
                if row_groups > 65535 {
                    return Err(shape_err(
                        "matmul",
                        format!("a part of {} rows exceeds one dispatch", part.rows),
                    ));
                }
                let p = params(m, x_offset, out_offset + part.first_row, part.rows);
                rec.dispatch(
                    &spec,
                    &p,
                    &[&part.buffer, x, out],
                    [row_groups, token_groups, 1],
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "matmul_tests.rs"]
mod tests;
