//! `rope_kv` against the separate kernels it fuses (each tested against its
//! own CPU reference): per-head `rms_norm`, `rope`, `kv_write`.

use super::*;
use crate::gpu::GpuContext;
use crate::kernels::attention::kv::{kv_write, KvDtype};
use crate::kernels::norm::rms::rms_norm;
use crate::kernels::rope::rope;
use crate::kernels::rope::tests::llama3_factors;
use crate::testutil::{assert_close, assert_shape_err, ctx, random_vec};

#[derive(Clone, Copy, Debug)]
struct Case {
    rows: usize,
    q_heads: usize,
    kv_heads: usize,
    head_dim: usize,
    n_rot: usize,
    layout: RopeLayout,
    norm: bool,
    /// Frequency factors (Llama 3.2's where n_rot is 64, else arbitrary).
    factors: bool,
    pos0: u32,
    kv_dtype: KvDtype,
    /// YaRN over an original context of 16, which the positions pass.
    yarn: bool,
}

/// YaRN as a model extended from a context of 16 would have it, with an
/// attn_factor that is not 1 so the magnitude shows.
const YARN: Yarn = Yarn {
    ext_factor: 1.0,
    attn_factor: 0.9,
    beta_fast: 32.0,
    beta_slow: 1.0,
    n_ctx_orig: 16,
};

/// (q, k cache, v cache) after one call of the fused kernel (`Some(serial)`:
/// its serial form or the workgroup one) or of the chain (None).
fn run(c: &Case, fused: Option<bool>) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let ctx: &GpuContext = ctx();
    let kv = KvLayout {
        layers: 2,
        ctx_len: 40,
        kv_heads: c.kv_heads,
        head_dim: c.head_dim,
        dtype: c.kv_dtype,
    };
    let (hd, qd, kvd) = (c.head_dim, c.q_heads * c.head_dim, c.kv_heads * c.head_dim);
    let row = qd + 2 * kvd;
    let qkv_host = random_vec(3 + c.rows * row, 11 + c.rows as u64);
    let qkv = ctx.upload_f32("qkv", &qkv_host).unwrap();
    let q = ctx.upload_f32("q", &vec![-3.0; 2 + c.rows * qd]).unwrap();
    let words = kv.dtype.words(kv.elements());
    let kc = ctx.upload_f32("k", &vec![-4.0; words]).unwrap();
    let vc = ctx.upload_f32("v", &vec![-5.0; words]).unwrap();
    let qn = ctx
        .upload_f32(
            "qn",
            &random_vec(hd, 12)
                .iter()
                .map(|v| 1.0 + v)
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let kn = ctx
        .upload_f32(
            "kn",
            &random_vec(hd, 13)
                .iter()
                .map(|v| 1.0 + v)
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let factors = c.factors.then(|| {
        let f = match c.n_rot {
            64 => llama3_factors(64, 10000.0, 32.0, 1.0, 4.0),
            n => random_vec(n / 2, 14)
                .iter()
                .map(|v| 1.0 + 8.0 * v.abs())
                .collect(),
        };
        ctx.upload_f32("ff", &f).unwrap()
    });
    // n_rot 0: a layer without RoPE.
    let rotary = (c.n_rot > 0).then_some(Rotary {
        n_rot: c.n_rot,
        theta: 10000.0,
        layout: c.layout,
        freq_scale: 0.5,
        freq_factors: factors.as_deref(),
        yarn: if c.yarn { YARN } else { Yarn::NONE },
    });
    let mut rec = Recorder::new(ctx);
    if let Some(serial) = fused {
        let args = RopeKv {
            qkv: &qkv,
            qkv_offset: 3,
            q_heads: c.q_heads,
            q_out: &q,
            q_offset: 2,
            k_cache: &kc,
            v_cache: &vc,
            kv,
            layer: 1,
            qk_norm: c.norm.then_some((&*qn, &*kn, 1e-6)),
            rotary,
            rows: c.rows,
            pos0: c.pos0,
        };
        rope_kv_form(&mut rec, &args, serial).unwrap();
    } else {
        // Unpack the rows into q / k / v scratch, then the old chain.
        let (qs, ks, vs) = (
            ctx.create_storage("qs", (4 * c.rows * qd) as u64).unwrap(),
            ctx.create_storage("ks", (4 * c.rows * kvd) as u64).unwrap(),
            ctx.create_storage("vs", (4 * c.rows * kvd) as u64).unwrap(),
        );
        for t in 0..c.rows {
            let base = 3 + t * row;
            ctx.write(
                &qs,
                (4 * t * qd) as u64,
                bytemuck::cast_slice(&qkv_host[base..base + qd]),
            );
            ctx.write(
                &ks,
                (4 * t * kvd) as u64,
                bytemuck::cast_slice(&qkv_host[base + qd..base + qd + kvd]),
            );
            ctx.write(
                &vs,
                (4 * t * kvd) as u64,
                bytemuck::cast_slice(&qkv_host[base + qd + kvd..base + row]),
            );
        }
        if c.norm {
            rms_norm(&mut rec, &qs, 0, &qn, &qs, 0, c.rows * c.q_heads, hd, 1e-6).unwrap();
            rms_norm(&mut rec, &ks, 0, &kn, &ks, 0, c.rows * c.kv_heads, hd, 1e-6).unwrap();
        }
        for (x, heads) in [(&qs, c.q_heads), (&ks, c.kv_heads)] {
            if let Some(rotary) = &rotary {
                rope(&mut rec, x, 0, c.rows, heads, hd, c.pos0, rotary).unwrap();
            }
        }
        for (src, cache) in [(&ks, &kc), (&vs, &vc)] {
            kv_write(
                &mut rec,
                src,
                0,
                cache,
                &kv,
                kv.layer_offset(1),
                c.rows,
                c.pos0,
            )
            .unwrap();
        }
        rec.copy_buffer(
            qs.raw().unwrap(),
            0,
            q.raw().unwrap(),
            8,
            (4 * c.rows * qd) as u64,
        );
    }
    pollster::block_on(rec.submit()).unwrap();
    let read =
        |b: &GpuBuffer| pollster::block_on(ctx.read_f32(b, 0, (b.size() / 4) as usize)).unwrap();
    // An f16 cache's words as their two elements.
    let read_cache = |b: &GpuBuffer| match c.kv_dtype {
        KvDtype::F32 => read(b),
        KvDtype::F16 => read(b)
            .iter()
            .flat_map(|w| {
                let bits = w.to_bits();
                [bits as u16, (bits >> 16) as u16].map(|h| half::f16::from_bits(h).to_f32())
            })
            .collect(),
    };
    (read(&q), read_cache(&kc), read_cache(&vc))
}

#[test]
fn rope_kv_equals_the_separate_kernels() {
    let cases = [
        Case {
            rows: 1,
            q_heads: 9,
            kv_heads: 3,
            head_dim: 64,
            n_rot: 64,
            layout: RopeLayout::Interleaved,
            norm: false,
            factors: false,
            pos0: 0,
            kv_dtype: KvDtype::F32,
            yarn: false,
        },
        Case {
            rows: 5,
            q_heads: 4,
            kv_heads: 1,
            head_dim: 256,
            n_rot: 256,
            layout: RopeLayout::NeoX,
            norm: true,
            factors: false,
            pos0: 33,
            kv_dtype: KvDtype::F16,
            yarn: false,
        },
        Case {
            rows: 3,
            q_heads: 6,
            kv_heads: 2,
            head_dim: 96,
            n_rot: 32,
            layout: RopeLayout::NeoX,
            norm: false,
            factors: true,
            pos0: 7,
            kv_dtype: KvDtype::F32,
            yarn: false,
        },
        Case {
            rows: 2,
            q_heads: 2,
            kv_heads: 2,
            head_dim: 20,
            n_rot: 14,
            layout: RopeLayout::Interleaved,
            norm: true,
            factors: true,
            pos0: 38,
            kv_dtype: KvDtype::F32,
            yarn: false,
        },
        // Llama 3.2's shape of head and its factors.
        Case {
            rows: 4,
            q_heads: 4,
            kv_heads: 2,
            head_dim: 64,
            n_rot: 64,
            layout: RopeLayout::Interleaved,
            norm: false,
            factors: true,
            pos0: 36,
            kv_dtype: KvDtype::F16,
            yarn: false,
        },
        // YaRN past its original context, with q/k norms and factors on an
        // odd shape, and on a head of 128 without.
        Case {
            rows: 3,
            q_heads: 3,
            kv_heads: 1,
            head_dim: 40,
            n_rot: 30,
            layout: RopeLayout::NeoX,
            norm: true,
            factors: true,
            pos0: 21,
            kv_dtype: KvDtype::F32,
            yarn: true,
        },
        Case {
            rows: 5,
            q_heads: 2,
            kv_heads: 2,
            head_dim: 128,
            n_rot: 128,
            layout: RopeLayout::Interleaved,
            norm: false,
            factors: false,
            pos0: 30,
            kv_dtype: KvDtype::F32,
            yarn: true,
        },
        // No rotation (SmolLM3's NoPE layers), with and without q/k norms.
        Case {
            rows: 4,
            q_heads: 4,
            kv_heads: 2,
            head_dim: 64,
            n_rot: 0,
            layout: RopeLayout::Interleaved,
            norm: false,
            factors: false,
            pos0: 9,
            kv_dtype: KvDtype::F32,
            yarn: false,
        },
        Case {
            rows: 2,
            q_heads: 3,
            kv_heads: 1,
            head_dim: 24,
            n_rot: 0,
            layout: RopeLayout::NeoX,
            norm: true,
            factors: false,
            pos0: 0,
            kv_dtype: KvDtype::F32,
            yarn: false,
        },
        // An odd head_dim (an f32 cache only): its last element has no pair.
        Case {
            rows: 3,
            q_heads: 3,
            kv_heads: 3,
            head_dim: 21,
            n_rot: 18,
            layout: RopeLayout::NeoX,
            norm: true,
            factors: false,
            pos0: 5,
            kv_dtype: KvDtype::F32,
            yarn: false,
        },
    ];
    // Each case on both caches (an f16 one needs an even head_dim).
    let both = cases
        .iter()
        .flat_map(|c| [KvDtype::F32, KvDtype::F16].map(|kv_dtype| Case { kv_dtype, ..*c }))
        .filter(|c| c.kv_dtype == KvDtype::F32 || c.head_dim % 2 == 0);
    for c in both {
        let (rq, rk, rv) = run(&c, None);
        // Both forms: the serial one (CPU adapters) and a workgroup a head.
        for serial in [false, true] {
            let (fq, fk, fv) = run(&c, Some(serial));
            // Same rotation code; the norms' sums differ only in order (64
            // lanes or one vs 32..256 lanes): a few ulps, and untouched slots
            // must stay equal.
            let what = format!("{c:?}, serial {serial}");
            assert_close(&fq, &rq, 2e-6, &format!("q {what}"));
            // An f16 cache holds each key rounded once; keys a few f32 ulps
            // apart may round to neighbouring f16s, one f16 step apart: at
            // most 2^-10 of |k| (of 1 below 1), which is how assert_close
            // scales. Twice that.
            let k_tol = match c.kv_dtype {
                KvDtype::F32 => 2e-6,
                KvDtype::F16 => 2.0 / 1024.0,
            };
            assert_close(&fk, &rk, k_tol, &format!("k cache {what}"));
            assert_eq!(fv, rv, "v cache {what}");
            assert!(
                fk.iter().zip(&rk).any(|(a, _)| *a != -4.0),
                "keys were written"
            );
        }
    }
}

#[test]
fn rope_kv_refuses_bad_shapes() {
    let ctx = ctx();
    let kv = KvLayout {
        layers: 1,
        ctx_len: 4,
        kv_heads: 1,
        head_dim: 8,
        dtype: KvDtype::F32,
    };
    let b = |n: usize, l: &str| ctx.create_storage(l, 4 * n as u64).unwrap();
    let (qkv, q, kc, vc) = (b(64, "qkv"), b(64, "q"), b(32, "k"), b(32, "v"));
    let base = || RopeKv {
        qkv: &qkv,
        qkv_offset: 0,
        q_heads: 2,
        q_out: &q,
        q_offset: 0,
        k_cache: &kc,
        v_cache: &vc,
        kv,
        layer: 0,
        qk_norm: None,
        rotary: Some(Rotary {
            n_rot: 8,
            theta: 1e4,
            layout: RopeLayout::NeoX,
            freq_scale: 1.0,
            freq_factors: None,
            yarn: Yarn::NONE,
        }),
        rows: 1,
        pos0: 0,
    };
    let mut rec = Recorder::new(ctx);
    let odd = Rotary {
        n_rot: 7,
        ..base().rotary.unwrap()
    };
    let short = b(3, "ff");
    let few_factors = Rotary {
        freq_factors: Some(&short),
        ..base().rotary.unwrap()
    };
    for bad in [
        RopeKv { pos0: 4, ..base() },
        RopeKv { layer: 1, ..base() },
        RopeKv {
            rotary: Some(odd),
            ..base()
        },
        RopeKv {
            rotary: Some(few_factors),
            ..base()
        },
        RopeKv {
            rows: 3,
            pos0: 0,
            qkv_offset: 60,
            ..base()
        },
        RopeKv {
            q_out: &qkv,
            ..base()
        },
    ] {
        assert_shape_err(&rope_kv(&mut rec, &bad).unwrap_err(), "rope_kv");
    }
    assert_eq!(rec.dispatches(), 0);
}
