//! The load probe against the CPU on awkward shapes, its refusals, and
//! its own check.

use super::*;
use crate::testutil::ctx;

/// Awkward shapes: rows not a multiple of a workgroup's rows (64) or
/// of an invocation's (8), a texture narrower than the matrix so its
/// rows wrap and the last is part padding; every path must give the
/// CPU's y (`check` inside the probe) and a time, in each format.
#[test]
fn every_path_gives_the_cpus_gemv() {
    let ctx = ctx();
    let cases = [
        (ProbeFormat::F32, 13, 36, 16),
        (ProbeFormat::F32, 70, 4, 8),
        (ProbeFormat::Q4, 13, 96, 16),
        (ProbeFormat::Q4, 70, 32, 4),
    ];
    for (format, rows, cols, width) in cases {
        let probe = probe_with_width(ctx, format, rows, cols, 1, width);
        let probes = pollster::block_on(probe).unwrap();
        assert_eq!(probes.len(), LoadPath::ALL.len());
        for (p, path) in probes.iter().zip(LoadPath::ALL) {
            assert_eq!((p.format, p.path), (format, path));
            assert!(p.seconds > 0.0 && p.gbps.is_finite(), "{p:?}");
        }
    }
}

#[test]
fn shapes_the_adapter_cannot_hold_are_refused_by_name() {
    let ctx = ctx();
    let run = |format, rows, cols| pollster::block_on(probe_load_paths(ctx, format, rows, cols, 1));
    let err = run(ProbeFormat::F32, 8, 6).unwrap_err().to_string();
    assert!(err.contains("multiple of 4"), "{err}");
    let err = run(ProbeFormat::Q4, 8, 48).unwrap_err().to_string();
    assert!(
        err.contains("Q4 matrix") && err.contains("multiple of 32"),
        "{err}"
    );
    let cols = ctx.limits.max_uniform_buffer_binding_size as usize / 4 + 32;
    let err = run(ProbeFormat::Q4, 1, cols).unwrap_err().to_string();
    assert!(err.contains("uniform binding"), "{err}");
    let rows = ctx.max_binding_bytes() as usize / (64 * 4) + 1;
    let err = run(ProbeFormat::F32, rows, 64).unwrap_err().to_string();
    assert!(err.contains("storage binding"), "{err}");
    // A texture one texel wide holds a texel a row: one past its
    // height limit.
    let side = ctx.limits.max_texture_dimension_2d as usize;
    let probe = probe_with_width(ctx, ProbeFormat::F32, side + 1, 4, 1, 1);
    let err = pollster::block_on(probe).unwrap_err().to_string();
    assert!(err.contains("texels a side"), "{err}");
}

#[test]
fn a_wrong_y_is_caught() {
    let (format, path) = (ProbeFormat::Q4, LoadPath::ALL[0]);
    let expected = [(1.0, 3.0), (2.0, 2.0)];
    assert!(check(format, path, &[1.0, 2.0], &expected, 4).is_ok());
    let err = check(format, path, &[1.0, 2.001], &expected, 4).unwrap_err();
    assert!(err.to_string().contains("row 1"), "{err}");
    assert!(check(format, path, &[1.0], &expected, 4).is_err());
    assert!(check(format, path, &[f32::NAN], &expected[..1], 4).is_err());
}
