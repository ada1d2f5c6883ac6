//! x's token rows cut into ranges of columns, each range's rows side by
//! side: what the windowed prefill core reads where a whole row of x is too
//! long for a uniform window to hold enough tokens (Qwen2.5's 4864-wide
//! down projection: 3 rows in 64 KiB). Each range is then a matmul over
//! its columns of the weights whose rows fit a window, adding into out
//! (kernels::matmul::linear).

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;

kernel_params! {
    pub(crate) struct Params {
        /// token rows
        m: u32,
        /// vec4s of an x row
        k4: u32,
        /// vec4s of a whole range's row
        width4: u32,
        /// vec4 of x where token row 0 starts
        x_offset4: u32,
        /// vec4s to copy: m * k4
        n4: u32,
    }
}

const SPEC: KernelSpec = KernelSpec {
    name: "x_ranges",
    sources: &[include_str!("../../../../../shaders/matmul/x_ranges.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::Read, Access::ReadWrite],
};

/// One range of columns: where it starts in a row and how many it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ColRange {
    pub first_col: usize,
    pub cols: usize,
}

impl ColRange {
    /// Where the range's `m` rows start in the copied buffer (elements):
    /// every range before it is whole, `first_col` columns in all.
    pub(crate) fn offset(&self, m: usize) -> usize {
        self.first_col * m
    }
}

/// Ranges of at most `most` columns of `k`-column rows, as even as whole
/// multiples of `granule` allow: `None` where no granule fits in `most`.
pub(crate) fn col_ranges(k: usize, most: usize, granule: usize) -> Option<Vec<ColRange>> {
    let most = most / granule * granule;
    if most == 0 || k == 0 {
        return None;
    }
    let width = k.div_ceil(k.div_ceil(most)).next_multiple_of(granule);
    let ranges = (0..k.div_ceil(width))
        .map(|r| ColRange {
            first_col: r * width,
            cols: width.min(k - r * width),
        })
        .collect();
    Some(ranges)
}

/// Copies `m` rows of `k` columns of `x` (from element `x_offset`) into
/// `out` as ranges of `width` columns (the last one narrower), each range's
/// rows side by side from `ColRange::offset`.
pub(crate) fn copy_ranges(
    rec: &mut Recorder,
    x: &GpuBuffer,
    x_offset: usize,
    m: usize,
    k: usize,
    width: usize,
    out: &GpuBuffer,
) -> Result<(), GpuError> {
    const K: &str = "x_ranges";
    if k % 4 != 0 || width % 4 != 0 || x_offset % 4 != 0 || width == 0 || m == 0 {
        return Err(shape_err(
            K,
            format!("{m} rows of {k} columns from {x_offset} in ranges of {width}: need rows, a range, and multiples of 4"),
        ));
    }
    if x.id() == out.id() {
        return Err(shape_err(K, "out may not live in x's buffer"));
    }
    check_elems(K, "x", x, x_offset + m * k)?;
    check_elems(K, "out", out, m * k)?;
    let n4 = (m * k / 4) as u32;
    let params = Params {
        m: m as u32,
        k4: (k / 4) as u32,
        width4: (width / 4) as u32,
        x_offset4: (x_offset / 4) as u32,
        n4,
    };
    rec.dispatch(&SPEC, &params, &[x, out], workgroups_for(n4, 256));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_shape_err, ctx, random_vec};

    #[test]
    fn ranges_cover_the_row_evenly_in_granules() {
        // Qwen2.5's down projection (Q6_K granule 256, Q5_0's 32), one
        // range, a row shorter than a granule, a granule wider than `most`.
        let cases = [
            (4864, 1024, 256, Some(vec![1024, 1024, 1024, 1024, 768])),
            (4864, 1024, 32, Some(vec![992, 992, 992, 992, 896])),
            (1536, 1024, 32, Some(vec![768, 768])),
            (512, 1024, 32, Some(vec![512])),
            (20, 1024, 32, Some(vec![20])),
            (4864, 200, 256, None),
        ];
        for (k, most, granule, want) in cases {
            let got = col_ranges(k, most, granule);
            let widths = got
                .as_ref()
                .map(|r| r.iter().map(|r| r.cols).collect::<Vec<_>>());
            assert_eq!(widths, want, "k {k} most {most} granule {granule}");
            if let Some(ranges) = got {
                let mut next = 0;
                for r in &ranges {
                    assert_eq!(r.first_col, next, "k {k}: in order, no gap");
                    assert!(r.cols <= most && r.first_col % granule == 0);
                    next += r.cols;
                }
                assert_eq!(next, k);
            }
        }
    }

    #[test]
    fn copy_matches_the_ranges_layout_on_awkward_shapes() {
        let ctx = ctx();
        // Several ranges with a narrow last one, one range, rows from an
        // offset, one token row, a range width that divides k.
        for (m, k, width, x_offset) in [
            (5, 52, 16, 0),
            (3, 40, 40, 8),
            (7, 4864, 992, 12),
            (1, 24, 8, 4),
            (64, 96, 32, 0),
        ] {
            let x = random_vec(x_offset + m * k, (m * k) as u64);
            let gx = ctx.upload_f32("x", &x).unwrap();
            let out = ctx.create_storage("out", (4 * m * k) as u64).unwrap();
            let mut rec = Recorder::new(ctx);
            copy_ranges(&mut rec, &gx, x_offset, m, k, width, &out).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let got = pollster::block_on(ctx.read_f32(&out, 0, m * k)).unwrap();
            assert_eq!(got.len(), m * k);
            // Range r: columns r * width.. (the last narrower), its rows
            // side by side after every earlier range's.
            let mut want = Vec::with_capacity(m * k);
            for first_col in (0..k).step_by(width) {
                let r = ColRange {
                    first_col,
                    cols: width.min(k - first_col),
                };
                assert_eq!(
                    want.len(),
                    r.offset(m),
                    "m {m} k {k}: {r:?} starts where offset says"
                );
                for t in 0..m {
                    let row = x_offset + t * k + first_col;
                    want.extend_from_slice(&x[row..row + r.cols]);
                }
            }
            // A copy: bit for bit.
            assert_eq!(got, want, "m {m} k {k} width {width} from {x_offset}");
        }
    }

    #[test]
    fn copy_refuses_what_it_cannot_lay_out() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 64).unwrap();
        let out = ctx.create_storage("out", 4 * 64).unwrap();
        let mut rec = Recorder::new(ctx);
        for (m, k, width, x_offset) in [
            (2, 30, 16, 0),
            (2, 32, 6, 0),
            (2, 32, 16, 2),
            (0, 32, 16, 0),
            (3, 32, 16, 0),
        ] {
            let err = copy_ranges(&mut rec, &x, x_offset, m, k, width, &out).unwrap_err();
            assert_shape_err(&err, "x_ranges");
        }
        let err = copy_ranges(&mut rec, &x, 0, 2, 16, 16, &x).unwrap_err();
        assert_shape_err(&err, "x_ranges");
    }
}
