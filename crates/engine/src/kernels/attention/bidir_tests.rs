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
    // of head_dim <= 256 terms and an online softmax over <= 40 keys stay
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
            kv_heads: heads,
            window: None,
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
        kv_heads: 2,
        window: None,
    };
    run(&a, &[6, 4], 1, 5);
}

/// Grouped queries and a symmetric window: q heads in groups over k/v
/// heads, columns q | k | v as one projection writes them (EmbeddingGemma:
/// 3 q heads over 1 k/v head of 256, window 512).
fn grouped(
    seqs: usize,
    seq_len: usize,
    heads: usize,
    kv_heads: usize,
    hd: usize,
    window: Option<usize>,
) -> BidirArgs {
    let (q, kv) = (heads * hd, kv_heads * hd);
    BidirArgs {
        seqs,
        seq_len,
        heads,
        head_dim: hd,
        row_stride: q + 2 * kv,
        q_col: 0,
        k_col: q,
        v_col: q + kv,
        scale: 1.0 / (hd as f32).sqrt(),
        kv_heads,
        window,
    }
}

#[test]
fn grouped_queries_and_sliding_windows_match_reference() {
    // GQA ratio 1 and > 1, with the window smaller than, equal to and
    // larger than the sequences, in padded batches of mixed lengths.
    run(&grouped(1, 9, 3, 1, 8, None), &[9], 0, 11);
    run(&grouped(3, 12, 4, 2, 12, Some(3)), &[12, 5, 1], 2, 12);
    run(&grouped(2, 10, 2, 2, 16, Some(1)), &[10, 7], 0, 13);
    run(&grouped(2, 11, 6, 3, 8, Some(11)), &[11, 4], 1, 14);
    run(&grouped(2, 8, 3, 1, 4, Some(20)), &[8, 6], 0, 15);
    // EmbeddingGemma's head (256) with a window that cuts a sequence of 9.
    run(&grouped(2, 9, 3, 1, 256, Some(4)), &[9, 3], 0, 16);
}

#[test]
fn a_window_changes_what_a_query_sees_only_when_it_cuts() {
    // A window at least the sequence's length is no window; one shorter is
    // a different answer (so the window is really applied).
    let ctx = ctx();
    let lens = [9u32, 6];
    let go = |a: &BidirArgs| {
        let qkv = random_vec(a.seqs * a.seq_len * a.row_stride, 21);
        let gq = ctx.upload_f32("qkv", &qkv).unwrap();
        let gl = ctx.upload_u32("lens", &lens).unwrap();
        let n = a.seqs * a.seq_len * a.heads * a.head_dim;
        let out = ctx.create_storage("out", (n * 4) as u64).unwrap();
        let mut rec = Recorder::new(ctx);
        attention_bidir(&mut rec, a, &gq, &gl, &out, 0).unwrap();
        pollster::block_on(rec.submit()).unwrap();
        pollster::block_on(ctx.read_f32(&out, 0, n)).unwrap()
    };
    let all = go(&grouped(2, 9, 2, 1, 8, None));
    assert_eq!(all, go(&grouped(2, 9, 2, 1, 8, Some(9))));
    assert_eq!(all, go(&grouped(2, 9, 2, 1, 8, Some(1000))));
    let cut = go(&grouped(2, 9, 2, 1, 8, Some(8)));
    // Only the first and last query rows of sequence 0 lose a key (0 and 8
    // are 8 apart); sequence 1 (6 long) is untouched.
    let row = 2 * 8;
    for t in 0..18 {
        let same = all[t * row..][..row] == cut[t * row..][..row];
        assert_eq!(same, t != 0 && t != 8, "token {t}");
    }
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
        kv_heads: heads,
        window: None,
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
        kv_heads: 2,
        window: None,
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
        BidirArgs {
            kv_heads: 0,
            ..good
        },
        // 2 query heads do not split over 3 k/v heads (whose columns fit).
        BidirArgs {
            kv_heads: 3,
            row_stride: 64,
            k_col: 16,
            v_col: 40,
            ..good
        },
        BidirArgs {
            window: Some(0),
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

#[test]
fn long_rows_of_wide_heads_see_every_key() {
    // 548 keys of 256 (EmbeddingGemma's head): with the head's loops nested
    // in the key loop, llvmpipe's cap of 65535 loop trips in all dropped
    // the keys past ~500 (and a windowed row's past its 508th), silently.
    run(&grouped(1, 548, 3, 1, 256, None), &[548], 0, 32);
    run(&grouped(1, 548, 3, 1, 256, Some(257)), &[548], 0, 31);
}
