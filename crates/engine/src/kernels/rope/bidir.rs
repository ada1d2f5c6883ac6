//! Rotary positions for an encoder's padded batch (nomic-bert): in place on
//! the q and k columns of the fused q/k/v rows that `attention_bidir` reads,
//! each row at its position within its own sequence. The decoder's `rope`
//! rotates contiguous rows from one starting position; a padded batch needs
//! a row stride and positions that restart per sequence, so this is a kernel
//! of its own rather than a change to that one. See shaders/rope/rope_bidir.wgsl.

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;
use crate::kernels::rope::{RopeLayout, MAX_POSITION};

/// Where the rotated heads are and how they turn. Columns in f32 elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeBidir {
    /// Rows (tokens, padding included): `seqs * seq_len`.
    pub rows: usize,
    pub seq_len: usize,
    /// Rotated heads per row, contiguous from `col` (q's heads then k's).
    pub heads: usize,
    pub head_dim: usize,
    /// Rotated elements of each head (even; the rest pass through).
    pub n_rot: usize,
    pub row_stride: usize,
    pub col: usize,
    pub theta: f32,
    pub layout: RopeLayout,
}

kernel_params! {
    pub(crate) struct Params {
        /// tokens, padding included
        rows: u32,
        /// padded length of every sequence
        seq_len: u32,
        /// rotated heads per row
        heads: u32,
        /// elements per head
        head_dim: u32,
        /// rotated elements per head: even, <= head_dim
        n_rot: u32,
        /// elements between rows
        row_stride: u32,
        /// first rotated column of a row
        col: u32,
        /// 0: adjacent pairs (2i, 2i + 1), 1: half split (i, i + n_rot / 2)
        neox: u32,
        /// 2 * log2(base) / n_rot, computed in f64 on the CPU
        log2_base_step: f32,
    }
}

const K: &str = "rope_bidir";
const SPEC: KernelSpec = KernelSpec {
    name: K,
    sources: &[include_str!("../../../../../shaders/rope/rope_bidir.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::ReadWrite],
};

/// Rotates `a.heads` heads of every row of `x` in place.
pub fn rope_bidir(rec: &mut Recorder, a: &RopeBidir, x: &GpuBuffer) -> Result<(), GpuError> {
    if a.rows == 0 || a.seq_len == 0 || a.rows % a.seq_len != 0 || a.heads == 0 {
        return Err(shape_err(
            K,
            format!(
                "{} rows are not whole sequences of {} ({} heads)",
                a.rows, a.seq_len, a.heads
            ),
        ));
    }
    if a.n_rot == 0 || a.n_rot % 2 != 0 || a.n_rot > a.head_dim {
        return Err(shape_err(
            K,
            format!(
                "n_rot {} must be even, > 0 and <= head_dim {}",
                a.n_rot, a.head_dim
            ),
        ));
    }
    if a.col + a.heads * a.head_dim > a.row_stride {
        return Err(shape_err(
            K,
            format!(
                "heads from column {} pass the row stride {}",
                a.col, a.row_stride
            ),
        ));
    }
    if !(a.theta > 0.0 && a.theta.is_finite()) || a.seq_len as u64 > MAX_POSITION {
        return Err(shape_err(
            K,
            format!("theta {} or sequence length {}", a.theta, a.seq_len),
        ));
    }
    check_elems(K, "x", x, a.rows * a.row_stride)?;
    let params = Params {
        rows: a.rows as u32,
        seq_len: a.seq_len as u32,
        heads: a.heads as u32,
        head_dim: a.head_dim as u32,
        n_rot: a.n_rot as u32,
        row_stride: a.row_stride as u32,
        col: a.col as u32,
        neox: (a.layout == RopeLayout::NeoX) as u32,
        // In f64 so that the only rounding is the one to f32, as `rope`.
        log2_base_step: (2.0 * (a.theta as f64).log2() / a.n_rot as f64) as f32,
    };
    let pairs = (a.rows * a.heads * (a.n_rot / 2)) as u32;
    rec.dispatch(&SPEC, &params, &[x], workgroups_for(pairs, 256));
    Ok(())
}

/// The f64 reference: what `rope_bidir` computes, exact but for the final
/// rounding to f32.
pub fn rope_bidir_reference(a: &RopeBidir, x: &[f32]) -> Vec<f32> {
    let mut out = x.to_vec();
    let half = a.n_rot / 2;
    for row in 0..a.rows {
        let pos = (row % a.seq_len) as f64;
        for h in 0..a.heads {
            let head = row * a.row_stride + a.col + h * a.head_dim;
            for i in 0..half {
                let freq = (a.theta as f64).powf(-2.0 * i as f64 / a.n_rot as f64);
                let angle = pos * freq;
                let (p, q) = match a.layout {
                    RopeLayout::Interleaved => (head + 2 * i, head + 2 * i + 1),
                    RopeLayout::NeoX => (head + i, head + i + half),
                };
                let (x0, x1) = (x[p] as f64, x[q] as f64);
                out[p] = (x0 * angle.cos() - x1 * angle.sin()) as f32;
                out[q] = (x0 * angle.sin() + x1 * angle.cos()) as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec};

    fn run(a: &RopeBidir, x: &[f32]) -> Vec<f32> {
        let ctx = ctx();
        let g = ctx.upload_f32("x", x).unwrap();
        let mut rec = Recorder::new(ctx);
        rope_bidir(&mut rec, a, &g).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        pollster::block_on(ctx.read_f32(&g, 0, x.len())).unwrap()
    }

    /// Awkward shapes: odd head counts, n_rot below head_dim, a rotated
    /// range that starts mid-row and leaves columns on both sides alone,
    /// sequences long enough that angles wrap many times, both layouts.
    #[test]
    fn rope_bidir_matches_f64_reference() {
        for (i, (seqs, seq_len, heads, head_dim, n_rot, col, extra, theta, layout)) in [
            (3, 5, 3, 6, 4, 2, 3, 1000.0, RopeLayout::NeoX),
            (2, 7, 2, 8, 8, 0, 0, 10000.0, RopeLayout::Interleaved),
            (1, 300, 4, 16, 16, 16, 16, 1000.0, RopeLayout::NeoX),
            (5, 1, 1, 2, 2, 1, 1, 10.0, RopeLayout::Interleaved),
        ]
        .into_iter()
        .enumerate()
        {
            let row_stride = col + heads * head_dim + extra;
            let a = RopeBidir {
                rows: seqs * seq_len,
                seq_len,
                heads,
                head_dim,
                n_rot,
                row_stride,
                col,
                theta,
                layout,
            };
            let x = random_vec(a.rows * row_stride, 40 + i as u64);
            let got = run(&a, &x);
            let want = rope_bidir_reference(&a, &x);
            // f32 angles of up to ~300 rad carry ~2e-5 of error.
            assert_close(&got, &want, 1e-4, &format!("rope_bidir case {i}"));
            // Columns outside the heads are untouched, bit for bit.
            for r in 0..a.rows {
                let row = r * row_stride;
                assert_eq!(got[row..row + col], x[row..row + col], "case {i}");
                let end = row + col + heads * head_dim;
                assert_eq!(got[end..row + row_stride], x[end..row + row_stride]);
            }
        }
    }

    #[test]
    fn rope_bidir_rejects_bad_shapes() {
        let ctx = ctx();
        let b = ctx.create_storage("b", 4 * 256).unwrap();
        let good = RopeBidir {
            rows: 4,
            seq_len: 2,
            heads: 2,
            head_dim: 8,
            n_rot: 8,
            row_stride: 32,
            col: 0,
            theta: 1000.0,
            layout: RopeLayout::NeoX,
        };
        let mut rec = Recorder::new(ctx);
        rope_bidir(&mut rec, &good, &b).unwrap();
        for (i, bad) in [
            RopeBidir { rows: 5, ..good },
            RopeBidir { n_rot: 7, ..good },
            RopeBidir { n_rot: 10, ..good },
            RopeBidir { col: 17, ..good },
            RopeBidir { rows: 16, ..good },
            RopeBidir { theta: 0.0, ..good },
        ]
        .iter()
        .enumerate()
        {
            let err = rope_bidir(&mut rec, bad, &b).unwrap_err();
            assert!(
                matches!(err, GpuError::Shape { kernel: K, .. }),
                "case {i}: {err}"
            );
        }
    }
}
