//! Pooling a padded batch's final hidden rows into one vector a sequence:
//! the mean of its unpadded rows, its first row (CLS) or its last unpadded
//! row (sentence-transformers' `Pooling` modes). See shaders/encoder/pool.wgsl.

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;

/// How a sequence's rows become one vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMode {
    Mean = 0,
    /// The first token's row (BERT's `[CLS]`).
    First = 1,
    /// The last unpadded token's row.
    Last = 2,
}

kernel_params! {
    pub(crate) struct Params {
        seqs: u32,
        /// padded length: sequence s is rows s * seq_len ..
        seq_len: u32,
        dim: u32,
        /// 0 mean, 1 first token, 2 last token
        mode: u32,
    }
}

const K: &str = "pool";
const SPEC: KernelSpec = KernelSpec {
    name: K,
    sources: &[include_str!("../../../../../shaders/encoder/pool.wgsl")],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[Access::Read, Access::Read, Access::ReadWrite],
};

/// Pools `x` (`[seqs * seq_len][dim]`) into `out` (`[seqs][dim]`), with
/// `lens` (u32, each in `1..=seq_len`) the sequences' unpadded lengths.
#[allow(clippy::too_many_arguments)]
pub fn pool(
    rec: &mut Recorder,
    x: &GpuBuffer,
    lens: &GpuBuffer,
    out: &GpuBuffer,
    seqs: usize,
    seq_len: usize,
    dim: usize,
    mode: PoolMode,
) -> Result<(), GpuError> {
    if seqs == 0 || seq_len == 0 || dim == 0 {
        return Err(shape_err(
            K,
            format!("empty batch ({seqs} x {seq_len} x {dim})"),
        ));
    }
    if out.id() == x.id() || out.id() == lens.id() {
        return Err(shape_err(K, "out may not live in x's or lens' buffer"));
    }
    check_elems(K, "x", x, seqs * seq_len * dim)?;
    check_elems(K, "lens", lens, seqs)?;
    check_elems(K, "out", out, seqs * dim)?;
    let params = Params {
        seqs: seqs as u32,
        seq_len: seq_len as u32,
        dim: dim as u32,
        mode: mode as u32,
    };
    rec.dispatch(
        &SPEC,
        &params,
        &[x, lens, out],
        workgroups_for((seqs * dim) as u32, 64),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec};

    #[test]
    fn pool_matches_reference_in_every_mode() {
        let ctx = ctx();
        let (seqs, seq_len, dim) = (5, 9, 67);
        let x = random_vec(seqs * seq_len * dim, 21);
        let lens = [9u32, 1, 4, 8, 2];
        let gx = ctx.upload_f32("x", &x).unwrap();
        let gl = ctx.upload_u32("lens", &lens).unwrap();
        let out = ctx.create_storage("out", (seqs * dim * 4) as u64).unwrap();
        for mode in [PoolMode::Mean, PoolMode::First, PoolMode::Last] {
            let mut rec = Recorder::new(ctx);
            pool(&mut rec, &gx, &gl, &out, seqs, seq_len, dim, mode).unwrap();
            pollster::block_on(rec.submit()).unwrap();
            let got = pollster::block_on(ctx.read_f32(&out, 0, seqs * dim)).unwrap();
            let row = |s: usize, t: usize, c: usize| x[(s * seq_len + t) * dim + c] as f64;
            let want: Vec<f32> = (0..seqs * dim)
                .map(|i| {
                    let (s, c, len) = (i / dim, i % dim, lens[i / dim] as usize);
                    (match mode {
                        PoolMode::Mean => (0..len).map(|t| row(s, t, c)).sum::<f64>() / len as f64,
                        PoolMode::First => row(s, 0, c),
                        PoolMode::Last => row(s, len - 1, c),
                    }) as f32
                })
                .collect();
            // A mean of at most 9 values in [-1, 1]: f32 rounding ~1e-6.
            // Padded rows counted would move it by ~0.1.
            assert_close(&got, &want, 2e-6, &format!("pool {mode:?}"));
        }
    }

    #[test]
    fn pool_rejects_bad_shapes() {
        let ctx = ctx();
        let x = ctx.create_storage("x", 4 * 64).unwrap();
        let lens = ctx.create_storage("lens", 4 * 2).unwrap();
        let out = ctx.create_storage("out", 4 * 16).unwrap();
        let mut rec = Recorder::new(ctx);
        for (i, (seqs, seq_len, dim)) in [(2, 4, 9), (3, 2, 4), (0, 4, 8), (2, 8, 8)]
            .into_iter()
            .enumerate()
        {
            let err = pool(
                &mut rec,
                &x,
                &lens,
                &out,
                seqs,
                seq_len,
                dim,
                PoolMode::Mean,
            )
            .unwrap_err();
            assert!(
                matches!(err, GpuError::Shape { kernel: K, .. }),
                "case {i}: {err}"
            );
        }
    }
}
