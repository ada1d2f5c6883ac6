use super::*;
use crate::testutil::{assert_close, ctx, random_vec};

fn run(a: &BidirArgs, lens: &[u32], out_offset: usize, seed: u64) {
    let ctx = ctx();
    let tokens = a.seqs * a.seq_len;
    // Inputs scaled so that softmax is far from uniform: a wrong mask or
    // key order moves outputs by far more than the tolerance.
    let mut qkv = random_vec(tokens * a.row_stride, seed);
    qkv.iter_mut().for_each(|v| *v *= 2.0);
    let width = a.heads * a.head_dim;
    let gq = ctx.upload_f32("qkv", &qkv).unwrap();
    let gl = ctx.upload_u32("lens", lens).unwrap();
    // Out starts as garbage: padded rows must be written as zeros.
    let out0 = vec![7.0f32; out_offset + tokens * width + 5];
    let go = ctx.upload_f32("out", &out0).unwrap();
    let mut rec = Recorder::new(ctx);
    attention_bidir(&mut rec, a, &gq, &gl, &go, out_offset).unwrap();
    pollster::block_on(rec.submit()).unwrap();
    let got = pollster::block_on(ctx.read_f32(&go, 0, out0.len())).unwrap();
    let mut want = out0.clone();
    for (dst, v) in want[out_offset..]
        .iter_mut()
        .zip(attention_bidir_reference(a, &qkv, lens))
    {
        *dst = v as f32;
    }
    // Outputs are convex combinations of values in [-2, 2]; f32 dot products
    // of head_dim <= 64 terms and an online softmax over <= 40 keys stay
    // within ~1e-6 of them. A key seen across a sequence boundary or a
    // padded key counted moves an output by ~1e-2.
    assert_close(
        &got,
        &want,
        1e-5,
        &format!("attention_bidir {a:?} lens {lens:?}"),
    );
}

#[test]
fn bidirectional_attention_matches_reference_on_awkward_shapes() {
    // One sequence, no padding; q, k, v fused as one projection's rows.
    let fused = |seqs, seq_len, heads, head_dim| {
        let width = heads * head_dim;
        BidirArgs {
            seqs,
            seq_len,
            heads,
            head_dim,
            row_stride: 3 * width,
            q_col: 0,
            k_col: width,
            v_col: 2 * width,
            scale: 1.0 / (head_dim as f32).sqrt(),
        }
    };
    run(&fused(1, 1, 1, 4), &[1], 0, 1);
    run(&fused(1, 13, 3, 8), &[13], 3, 2);
    // Mixed lengths in one batch, including a length of 1 and a full row.
    run(&fused(4, 37, 12, 32), &[37, 1, 20, 36], 0, 3);
    run(&fused(3, 9, 2, 64), &[5, 9, 2], 7, 4);
    // Columns in another order, with slack at the end of each row.
    let a = BidirArgs {
        seqs: 2,
        seq_len: 6,
        heads: 2,
        head_dim: 12,
        row_stride: 3 * 24 + 8,
        q_col: 48,
        k_col: 0,
        v_col: 24,
        scale: 0.3,
    };
    run(&a, &[6, 4], 1, 5);
}

#[test]
fn a_sequence_attends_the_same_alone_and_in_a_padded_batch() {
    // The batch property the embedder relies on: padding and other
    // sequences leave a sequence's rows bit-for-bit unchanged.
    let ctx = ctx();
    let (heads, hd, len) = (4, 16, 7);
    let width = heads * hd;
    let args = |seqs, seq_len| BidirArgs {
        seqs,
        seq_len,
        heads,
        head_dim: hd,
        row_stride: 3 * width,
        q_col: 0,
        k_col: width,
        v_col: 2 * width,
        scale: 0.25,
    };
    let alone = random_vec(len * 3 * width, 9);
    // In the batch: sequence 1 of 3, padded to 11 with other data around it.
    let mut batch = random_vec(3 * 11 * 3 * width, 10);
    batch[11 * 3 * width..][..len * 3 * width].copy_from_slice(&alone);
    let go = |qkv: &[f32], a: BidirArgs, lens: &[u32]| {
        let gq = ctx.upload_f32("qkv", qkv).unwrap();
        let gl = ctx.upload_u32("lens", lens).unwrap();
        let out = ctx
            .create_storage("out", (a.seqs * a.seq_len * width * 4) as u64)
            .unwrap();
        let mut rec = Recorder::new(ctx);
        attention_bidir(&mut rec, &a, &gq, &gl, &out, 0).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        pollster::block_on(ctx.read_f32(&out, 0, a.seqs * a.seq_len * width)).unwrap()
    };
    let one = go(&alone, args(1, len), &[len as u32]);
    let many = go(&batch, args(3, 11), &[11, len as u32, 3]);
    assert_eq!(one[..], many[11 * width..][..len * width]);
}

#[test]
fn attention_bidir_rejects_bad_shapes() {
    let ctx = ctx();
    let qkv = ctx.create_storage("qkv", 4 * 2 * 48).unwrap();
    let lens = ctx.create_storage("lens", 4).unwrap();
    let out = ctx.create_storage("out", 4 * 2 * 16).unwrap();
    let good = BidirArgs {
        seqs: 1,
        seq_len: 2,
        heads: 2,
        head_dim: 8,
        row_stride: 48,
        q_col: 0,
        k_col: 16,
        v_col: 32,
        scale: 0.5,
    };
    let mut rec = Recorder::new(ctx);
    attention_bidir(&mut rec, &good, &qkv, &lens, &out, 0).unwrap();
    let bad = [
        BidirArgs {
            head_dim: 6,
            ..good
        },
        BidirArgs {
            head_dim: 260,
            ..good
        },
        BidirArgs { v_col: 34, ..good },
        BidirArgs { v_col: 36, ..good },
        BidirArgs { seq_len: 3, ..good },
        BidirArgs { seqs: 2, ..good },
        BidirArgs { seqs: 0, ..good },
        BidirArgs {
            scale: f32::INFINITY,
            ..good
        },
    ];
    for (i, a) in bad.iter().enumerate() {
        let err = attention_bidir(&mut rec, a, &qkv, &lens, &out, 0).unwrap_err();
        assert!(
            matches!(err, GpuError::Shape { kernel: K, .. }),
            "case {i}: {err}"
        );
    }
    let err = attention_bidir(&mut rec, &good, &qkv, &lens, &out, 1).unwrap_err();
    assert!(matches!(err, GpuError::Shape { .. }), "out offset: {err}");
}
