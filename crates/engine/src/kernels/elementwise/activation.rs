//! Gated activations, elementwise: `out[i] = act(gate[i]) * up[i]` over
//! `n = rows * ffn` elements (SwiGLU with SiLU, GeGLU with GELU-tanh).
//!
//! Any of gate, up and out may share a buffer: out in place over gate (the
//! usual use), over up, or all three in one scratch buffer. The output's
//! buffer is then bound once, read_write (see shaders/elementwise/activation.wgsl for why).

use crate::gpu::params::kernel_params;

use crate::gpu::{
    error::shape_err, workgroups_for, Access, GpuBuffer, GpuError, KernelSpec, Recorder,
};
use crate::kernels::norm::rms::overlaps;
use crate::kernels::{check_elems, words};

/// The activation applied to the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x * sigmoid(x)` (llama, qwen).
    Silu,
    /// `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` (gemma).
    GeluTanh,
}

kernel_params! {
    pub(crate) struct Params {
        /// elements
        n: u32,
        /// first element of gate
        gate_offset: u32,
        /// first element of up
        up_offset: u32,
        /// first element of out
        out_offset: u32,
    }
}

const SOURCES: &[&str] = &[
    include_str!("../../../../../shaders/elementwise/activation.wgsl"),
    include_str!("../../../../../shaders/elementwise/act_fns.wgsl"),
];

/// Binding variants, named as in the WGSL: which operands live in out's buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Split,
    GateOut,
    UpOut,
    One,
}

const NAMES: [[&str; 4]; 2] = [
    [
        "gated_silu_split",
        "gated_silu_gate_out",
        "gated_silu_up_out",
        "gated_silu_one",
    ],
    [
        "gated_gelu_split",
        "gated_gelu_gate_out",
        "gated_gelu_up_out",
        "gated_gelu_one",
    ],
];

/// `out[out_offset + i] = act(gate[gate_offset + i]) * up[up_offset + i]` for
/// `i < n` (offsets in f32 elements). Out may be gate or up at the same
/// offset; a range of out's buffer that partly overlaps gate's or up's is
/// refused (other elements' invocations would read what this one wrote).
#[allow(clippy::too_many_arguments)]
pub fn gated_act(
    rec: &mut Recorder,
    gate: &GpuBuffer,
    gate_offset: usize,
    up: &GpuBuffer,
    up_offset: usize,
    out: &GpuBuffer,
    out_offset: usize,
    n: usize,
    act: Activation,
) -> Result<(), GpuError> {
    const K: &str = "gated_act";
    check_elems(K, "gate", gate, gate_offset + n)?;
    check_elems(K, "up", up, up_offset + n)?;
    check_elems(K, "out", out, out_offset + n)?;
    let gate_in_out = gate.id() == out.id();
    let up_in_out = up.id() == out.id();
    for (what, shares, offset) in [
        ("gate", gate_in_out, gate_offset),
        ("up", up_in_out, up_offset),
    ] {
        if shares && offset != out_offset && overlaps(offset, out_offset, n) {
            return Err(shape_err(
                K,
                format!("out [{out_offset}, +{n}) partly overlaps {what} [{offset}, +{n}) in one buffer"),
            ));
        }
    }
    // gate and up read, out written.
    rec.moved(words(3 * n));
    let variant = match (gate_in_out, up_in_out) {
        (false, false) => Variant::Split,
        (true, false) => Variant::GateOut,
        (false, true) => Variant::UpOut,
        (true, true) => Variant::One,
    };
    // One flag a variant: each keeps that variant's binding declarations.
    let flags = [
        ("SPLIT", variant == Variant::Split),
        ("GATE_OUT", variant == Variant::GateOut),
        ("UP_OUT", variant == Variant::UpOut),
        ("ONE", variant == Variant::One),
    ];
    let act_fn = act_name(act);
    let defines = [
        (
            "GATE",
            if gate_in_out { "dst" } else { "gate" }.to_string().into(),
        ),
        (
            "UP",
            if up_in_out { "dst" } else { "up" }.to_string().into(),
        ),
        ("ACT", act_fn.to_string().into()),
    ];
    const R: Access = Access::Read;
    const RW: Access = Access::ReadWrite;
    let (storage, buffers, bound): (&[Access], [&GpuBuffer; 3], usize) = match variant {
        Variant::Split => (&[R, R, RW], [gate, up, out], 3),
        Variant::GateOut => (&[R, RW], [up, out, out], 2),
        Variant::UpOut => (&[R, RW], [gate, out, out], 2),
        Variant::One => (&[RW], [out, out, out], 1),
    };
    let spec = KernelSpec {
        name: NAMES[act as usize][variant as usize],
        sources: SOURCES,
        flags: &flags,
        defines: &defines,
        entry: "main",
        storage,
    };
    let params = Params {
        n: n as u32,
        gate_offset: gate_offset as u32,
        up_offset: up_offset as u32,
        out_offset: out_offset as u32,
    };
    rec.dispatch(
        &spec,
        &params,
        &buffers[..bound],
        workgroups_for(n as u32, 256),
    );
    Ok(())
}

pub(crate) fn act_name(act: Activation) -> &'static str {
    match act {
        Activation::Silu => "silu",
        Activation::GeluTanh => "gelu_tanh",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, ctx, random_vec};

    /// The slow reference, in f64, straight from the definitions.
    fn reference(gate: &[f32], up: &[f32], act: Activation) -> Vec<f32> {
        gate.iter()
            .zip(up)
            .map(|(&g, &u)| {
                let x = g as f64;
                let a = match act {
                    Activation::Silu => x / (1.0 + (-x).exp()),
                    Activation::GeluTanh => {
                        let k = (2.0 / std::f64::consts::PI).sqrt();
                        0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
                    }
                };
                (a * u as f64) as f32
            })
            .collect()
    }

    // Relative error, absolute below 1 (assert_close). The sigmoid's exp sees
    // arguments down to -40 (GELU's 2u at x = -20 is clamped only past -80),
    // where WGSL promises 3 + 2|v| ULP: up to 83 ULP = 5e-6 relative in e,
    // and e / (1 + e) at most doubles that; the products add 3 ULP and the
    // polynomial for u ~3 ULP, which sigmoid' <= 1/4 damps. Outputs below 1
    // in size sit far inside the absolute 1e-5, larger ones (x * ~1) carry
    // the ~1e-5 relative error of their sigmoid: 2e-5 leaves a little margin.
    const TOL: f32 = 2e-5;

    /// Runs one case: `bufs` are the initial buffer contents, and each
    /// operand is (buffer index, offset). Checks out's range against the
    /// reference, and that nothing else in out's buffer changed.
    fn run(
        bufs: &[Vec<f32>],
        gate: (usize, usize),
        up: (usize, usize),
        out: (usize, usize),
        n: usize,
        act: Activation,
    ) {
        let ctx = ctx();
        let gpu: Vec<_> = bufs
            .iter()
            .map(|b| ctx.upload_f32("buf", b).unwrap())
            .collect();
        let mut rec = Recorder::new(ctx);
        gated_act(
            &mut rec,
            &gpu[gate.0],
            gate.1,
            &gpu[up.0],
            up.1,
            &gpu[out.0],
            out.1,
            n,
            act,
        )
        .unwrap();
        pollster::block_on(rec.submit()).unwrap();
        let got = pollster::block_on(ctx.read_f32(&gpu[out.0], 0, bufs[out.0].len())).unwrap();
        let g = &bufs[gate.0][gate.1..gate.1 + n];
        let u = &bufs[up.0][up.1..up.1 + n];
        let mut want = bufs[out.0].clone();
        want[out.1..out.1 + n].copy_from_slice(&reference(g, u, act));
        let what = format!("gated_act {act:?} n {n} gate {gate:?} up {up:?} out {out:?}");
        assert_close(&got, &want, TOL, &what);
    }

    /// Gates spread over [-20, 20), where the sigmoid saturates both ways,
    /// with the exact extremes and 0 planted; ups in [-1, 1).
    fn gates(n: usize, seed: u64) -> Vec<f32> {
        let mut g: Vec<f32> = random_vec(n, seed).into_iter().map(|v| 20.0 * v).collect();
        let last = n - 1;
        g[0] = 20.0;
        g[last] = -20.0;
        g[last / 2] = 0.0;
        g
    }

    #[test]
    fn gated_act_matches_cpu_on_awkward_lengths() {
        for act in [Activation::Silu, Activation::GeluTanh] {
            for (case, n) in [1usize, 7, 257, 2049, 37 * 63].into_iter().enumerate() {
                let seed = 80 + 10 * case as u64;
                let (g_off, u_off, o_off) = (case % 3, case * 5 % 7, case % 2);
                let bufs = [
                    gates(g_off + n, seed),
                    random_vec(u_off + n, seed + 1),
                    random_vec(o_off + n + 2, seed + 2),
                ];
                run(&bufs, (0, g_off), (1, u_off), (2, o_off), n, act);
            }
        }
    }

    #[test]
    fn gated_act_shares_buffers() {
        let n = 300;
        for act in [Activation::Silu, Activation::GeluTanh] {
            // [gate | up] in one buffer, as from one scratch allocation.
            let mut both = gates(2 * n + 3, 91);
            both[n + 3..].copy_from_slice(&random_vec(n, 92));
            let other = random_vec(n + 1, 93);
            // Gate and up share a read-only buffer, out elsewhere.
            run(
                &[both.clone(), other.clone()],
                (0, 3),
                (0, n + 3),
                (1, 1),
                n,
                act,
            );
            // Out in place over gate (the usual use).
            run(
                &[both.clone(), other.clone()],
                (0, 3),
                (1, 1),
                (0, 3),
                n,
                act,
            );
            // Out in place over up.
            run(
                &[other.clone(), both.clone()],
                (0, 1),
                (1, n + 3),
                (1, n + 3),
                n,
                act,
            );
            // Gate, up and out all in one buffer, out over gate.
            run(
                std::slice::from_ref(&both),
                (0, 3),
                (0, n + 3),
                (0, 3),
                n,
                act,
            );
            // ... and out in a third, disjoint range of that buffer.
            let mut three = both.clone();
            three.extend(random_vec(n, 94));
            run(&[three], (0, 3), (0, n + 3), (0, 2 * n + 3), n, act);
        }
    }

    #[test]
    fn gated_act_rejects_bad_shapes() {
        let ctx = ctx();
        let a = ctx.create_storage("a", 4 * 64).unwrap();
        let b = ctx.create_storage("b", 4 * 64).unwrap();
        let c = ctx.create_storage("c", 4 * 64).unwrap();
        let mut rec = Recorder::new(ctx);
        // (gate, gate_offset, up, up_offset, out, out_offset, n)
        let cases: [(
            &GpuBuffer,
            usize,
            &GpuBuffer,
            usize,
            &GpuBuffer,
            usize,
            usize,
        ); 5] = [
            (&a, 1, &b, 0, &c, 0, 64),  // gate too short by one element
            (&a, 0, &b, 1, &c, 0, 64),  // up too short
            (&a, 0, &b, 0, &c, 1, 64),  // out too short
            (&a, 0, &b, 0, &a, 16, 32), // out partly over gate
            (&a, 0, &b, 8, &b, 0, 32),  // out partly over up
        ];
        for (i, (g, go, u, uo, o, oo, n)) in cases.into_iter().enumerate() {
            let err = gated_act(&mut rec, g, go, u, uo, o, oo, n, Activation::Silu).unwrap_err();
            assert!(
                matches!(
                    err,
                    GpuError::Shape {
                        kernel: "gated_act",
                        ..
                    }
                ),
                "case {i}: {err}"
            );
        }
    }
}
