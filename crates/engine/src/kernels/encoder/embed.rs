//! BERT's input embedding for a padded batch: word + absolute position +
//! token type, summed (the LayerNorm after it is `layer_norm`). See
//! shaders/encoder/encoder_embed.wgsl.

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::check_elems;

kernel_params! {
    pub(crate) struct Params {
        /// seqs * seq_len
        tokens: u32,
        /// position i = t % seq_len
        seq_len: u32,
        /// elements per row
        dim: u32,
        /// rows of word; ids past it read row 0 (the CPU checks them first)
        vocab: u32,
        /// row of token_type
        type_row: u32,
    }
}

const K: &str = "encoder_embed";
const SPEC: KernelSpec = KernelSpec {
    name: K,
    sources: &[include_str!(
        "../../../../../shaders/encoder/encoder_embed.wgsl"
    )],
    flags: &[],
    defines: &[],
    entry: "main",
    storage: &[
        Access::Read,
        Access::Read,
        Access::Read,
        Access::Read,
        Access::ReadWrite,
    ],
};

/// The tables an encoder embeds with, each `[rows][dim]` f32.
pub struct EmbedTables<'a> {
    pub word: &'a GpuBuffer,
    pub vocab: usize,
    pub position: &'a GpuBuffer,
    pub positions: usize,
    pub token_type: &'a GpuBuffer,
    pub types: usize,
    pub dim: usize,
}

/// `out[t] = word[ids[t]] + position[t % seq_len] + token_type[type_row]`
/// for the `tokens` ids in `ids` (u32; ids past the vocabulary read row 0,
/// which callers prevent by checking them first).
pub fn encoder_embed(
    rec: &mut Recorder,
    tables: &EmbedTables,
    ids: &GpuBuffer,
    tokens: usize,
    seq_len: usize,
    type_row: usize,
    out: &GpuBuffer,
) -> Result<(), GpuError> {
    let t = tables;
    if tokens == 0 || seq_len == 0 || tokens % seq_len != 0 || t.dim == 0 {
        return Err(shape_err(
            K,
            format!(
                "{tokens} tokens are not whole sequences of {seq_len} (dim {})",
                t.dim
            ),
        ));
    }
    if seq_len > t.positions {
        return Err(shape_err(
            K,
            format!(
                "sequences of {seq_len} tokens pass the {} positions",
                t.positions
            ),
        ));
    }
    if type_row >= t.types {
        return Err(shape_err(
            K,
            format!("token type {type_row} of {}", t.types),
        ));
    }
    check_elems(K, "ids", ids, tokens)?;
    check_elems(K, "word", t.word, t.vocab * t.dim)?;
    check_elems(K, "position", t.position, t.positions * t.dim)?;
    check_elems(K, "token_type", t.token_type, t.types * t.dim)?;
    check_elems(K, "out", out, tokens * t.dim)?;
    let params = Params {
        tokens: tokens as u32,
        seq_len: seq_len as u32,
        dim: t.dim as u32,
        vocab: t.vocab as u32,
        type_row: type_row as u32,
    };
    rec.dispatch(
        &SPEC,
        &params,
        &[ids, t.word, t.position, t.token_type, out],
        workgroups_for((tokens * t.dim) as u32, 256),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec};

    #[test]
    fn encoder_embed_sums_the_three_tables() {
        let ctx = ctx();
        let (vocab, positions, types, dim) = (37, 11, 2, 13);
        let word = random_vec(vocab * dim, 1);
        let pos = random_vec(positions * dim, 2);
        let ty = random_vec(types * dim, 3);
        let (gw, gp, gt) = (
            ctx.upload_f32("w", &word).unwrap(),
            ctx.upload_f32("p", &pos).unwrap(),
            ctx.upload_f32("t", &ty).unwrap(),
        );
        let tables = EmbedTables {
            word: &gw,
            vocab,
            position: &gp,
            positions,
            token_type: &gt,
            types,
            dim,
        };
        let (seq_len, ids) = (7, [5u32, 0, 36, 2, 2, 9, 1, 30, 3, 4, 5, 6, 7, 8]);
        let gi = ctx.upload_u32("ids", &ids).unwrap();
        let out = ctx
            .create_storage("out", (ids.len() * dim * 4) as u64)
            .unwrap();
        let mut rec = Recorder::new(ctx);
        encoder_embed(&mut rec, &tables, &gi, ids.len(), seq_len, 1, &out).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&out, 0, ids.len() * dim)).unwrap();
        let want: Vec<f32> = (0..ids.len() * dim)
            .map(|i| {
                let (t, c) = (i / dim, i % dim);
                word[ids[t] as usize * dim + c] + pos[(t % seq_len) * dim + c] + ty[dim + c]
            })
            .collect();
        // Two f32 adds in the same order on both sides.
        assert_close(&got, &want, 0.0, "encoder_embed");
    }

    #[test]
    fn encoder_embed_rejects_bad_shapes() {
        let ctx = ctx();
        let b = ctx.create_storage("b", 4 * 64).unwrap();
        let tables = EmbedTables {
            word: &b,
            vocab: 8,
            position: &b,
            positions: 4,
            token_type: &b,
            types: 2,
            dim: 8,
        };
        let out = ctx.create_storage("out", 4 * 64).unwrap();
        let mut rec = Recorder::new(ctx);
        for (i, (tokens, seq_len, ty)) in [(6, 4, 0), (8, 5, 0), (8, 4, 2), (0, 4, 0), (16, 4, 0)]
            .into_iter()
            .enumerate()
        {
            let err = encoder_embed(&mut rec, &tables, &b, tokens, seq_len, ty, &out).unwrap_err();
            assert!(
                matches!(err, GpuError::Shape { kernel: K, .. }),
                "case {i}: {err}"
            );
        }
    }
}
