//! Quantize -> dequantize round trips on seeded random data of several
//! shapes, within per-element bounds derived from each format's grid, and
//! checks that quantized test data exercises every level and scale sign.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wick::format::{dequantize, dequantize_into, quantize, GgmlType};

/// Test vectors: several shapes of data, each a whole number of 256-blocks.
fn signals() -> Vec<(&'static str, Vec<f32>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    let n = 256 * 24;
    let mut gauss = |scale: f32| -> Vec<f32> {
        (0..n)
            .map(|_| scale * (0..4).map(|_| rng.gen_range(-1.0f32..1.0)).sum::<f32>())
            .collect()
    };
    let weights = gauss(0.02);
    let unit = gauss(1.0);
    let mut outliers = gauss(0.5);
    for i in (0..n).step_by(97) {
        outliers[i] *= 40.0;
    }
    let positive: Vec<f32> = unit.iter().map(|v| v.abs() + 0.5).collect();
    let negative: Vec<f32> = unit.iter().map(|v| -v.abs() - 3.0).collect();
    // Blocks of mixed character: zeros, a constant, a ramp, tiny and large.
    let mut mixed = vec![0.0f32; n];
    for (i, v) in mixed.iter_mut().enumerate() {
        *v = match (i / 256) % 5 {
            0 => 0.0,
            1 => 0.75,
            2 => (i % 256) as f32 / 64.0 - 2.0,
            3 => unit[i] * 1e-3,
            _ => unit[i] * 300.0,
        };
    }
    vec![
        ("weights", weights),
        ("unit", unit),
        ("outliers", outliers),
        ("positive", positive),
        ("negative", negative),
        ("mixed", mixed),
    ]
}

fn absmax(x: &[f32]) -> f32 {
    x.iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// Upper bound on an f16-rounded scale `s` (relative 2^-11, or half the
/// subnormal spacing 2^-24 near zero), with a little float slack.
fn f16_up(s: f32) -> f32 {
    s * (1.0 + 1.0 / 1024.0) + 1.0 / (1u32 << 24) as f32
}

/// Largest allowed |x - x'| for each element of `x` under `dtype`, from the
/// format's grid (see each arm) with the scale's f16 rounding.
fn bounds(dtype: GgmlType, x: &[f32]) -> Vec<f32> {
    use GgmlType::*;
    let per_block =
        |n: usize, f: &dyn Fn(&[f32]) -> Vec<f32>| x.chunks(n).flat_map(f).collect::<Vec<f32>>();
    let uniform = |b: &[f32], tol: f32| vec![tol + 1e-7; b.len()];
    match dtype {
        F32 => vec![0.0; x.len()],
        F16 => x.iter().map(|v| v.abs() / 2048.0 + 3e-8).collect(),
        BF16 => x.iter().map(|v| v.abs() / 256.0).collect(),
        // Half a step of amax/127; f16 rounding of d can clamp the extreme by ~amax/2048.
        Q8_0 => per_block(32, &|b| {
            uniform(b, absmax(b) * (0.5 / 127.0 + 1.0 / 1024.0))
        }),
        // d = extreme / -8 (or -16): the opposite side clamps one level short, so up to a whole step.
        Q4_0 => per_block(32, &|b| uniform(b, f16_up(absmax(b) / 8.0))),
        Q5_0 => per_block(32, &|b| uniform(b, f16_up(absmax(b) / 16.0))),
        // Half a step of range/15 (/31), plus the f16 rounding of min and d.
        Q4_1 | Q5_1 => per_block(32, &|b| {
            let lo = b.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = b.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let levels = if dtype == Q4_1 { 15.0 } else { 31.0 };
            uniform(
                b,
                f16_up((hi - lo) / levels) * 0.5 + (lo.abs() + hi - lo) / 1024.0,
            )
        }),
        // Mins and scales are rounded up, so nothing clamps: half of each
        // sub-block's step, which is at most (range + dmin) / levels + d.
        Q4_K | Q5_K => per_block(256, &|b| {
            let levels = if dtype == Q4_K { 15.0 } else { 31.0 };
            let lo: Vec<f32> = b
                .chunks(32)
                .map(|s| s.iter().copied().fold(0.0, f32::min))
                .collect();
            let hi: Vec<f32> = b
                .chunks(32)
                .map(|s| s.iter().copied().fold(f32::MIN, f32::max))
                .collect();
            let dmin = f16_up(lo.iter().fold(0.0f32, |m, l| m.max(-l)) / 63.0);
            let need: Vec<f32> = lo
                .iter()
                .zip(&hi)
                .map(|(l, h)| (h - l + dmin) / levels)
                .collect();
            let d = f16_up(need.iter().fold(0.0f32, |m, &n| m.max(n)) / 63.0);
            need.iter()
                .flat_map(|n| vec![0.5 * (n + d) * 1.001 + 1e-7; 32])
                .collect()
        }),
        // Sub-block scale s = extreme / -32 rounded to d * i8 (|error| <= d/2):
        // the far side can clamp, costing up to |s| + 16.5 d.
        Q6_K => per_block(256, &|b| {
            let d = f16_up(absmax(b) / 32.0 / 127.0);
            b.chunks(16)
                .flat_map(|s| vec![absmax(s) / 32.0 + 16.5 * d + 1e-7; 16])
                .collect()
        }),
        _ => unreachable!("no quantizer for {dtype}"),
    }
}

#[test]
fn round_trips_stay_within_the_grid() {
    use GgmlType::*;
    // Relative RMS error ceilings on the Gaussian signals, ~1.5x what these
    // quantizers reach: loose, only to catch one that is valid but useless.
    let rms_ceiling = [
        (F32, 0.0),
        (F16, 4e-4),
        (BF16, 3e-3),
        (Q8_0, 0.008),
        (Q5_0, 0.06),
        (Q5_1, 0.055),
        (Q4_0, 0.12),
        (Q4_1, 0.11),
        (Q5_K, 0.055),
        (Q4_K, 0.11),
        (Q6_K, 0.028),
    ];
    for (name, x) in signals() {
        for (dtype, ceiling) in rms_ceiling {
            let bytes = quantize(dtype, &x).unwrap();
            assert_eq!(bytes.len() as u64, dtype.row_bytes(x.len() as u64).unwrap());
            let y = dequantize(dtype, &bytes, x.len()).unwrap();
            let tol = bounds(dtype, &x);
            for i in 0..x.len() {
                let err = (x[i] - y[i]).abs();
                assert!(
                    err <= tol[i],
                    "{dtype} {name}[{i}]: {} -> {} (error {err} > {})",
                    x[i],
                    y[i],
                    tol[i]
                );
            }
            let norm = x.iter().map(|v| v * v).sum::<f32>().sqrt();
            let err = x
                .iter()
                .zip(&y)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f32>()
                .sqrt();
            if name == "weights" || name == "unit" {
                assert!(
                    err <= ceiling * norm,
                    "{dtype} {name}: relative RMS error {}",
                    err / norm
                );
            }
            // Decoded values quantize again within the same bounds.
            let again = dequantize(dtype, &quantize(dtype, &y).unwrap(), y.len()).unwrap();
            for ((a, b), t) in y.iter().zip(&again).zip(bounds(dtype, &y)) {
                assert!((a - b).abs() <= t, "{dtype} {name}: {a} requantized to {b}");
            }
        }
    }
}

#[test]
fn quantized_data_uses_the_whole_grid() {
    // GPU kernel tests rely on random quantized data exercising every level
    // and scale sign; check the quantizers produce them.
    let x = &signals()[1].1;
    let levels = |bytes: &[u8], nibble_bytes: std::ops::Range<usize>, block: usize| {
        let mut seen = [false; 16];
        for b in bytes.chunks(block) {
            for &q in &b[nibble_bytes.clone()] {
                seen[(q & 15) as usize] = true;
                seen[(q >> 4) as usize] = true;
            }
        }
        seen.iter().all(|&s| s)
    };
    assert!(levels(&quantize(GgmlType::Q4_0, x).unwrap(), 2..18, 18));
    assert!(levels(&quantize(GgmlType::Q4_1, x).unwrap(), 4..20, 20));
    assert!(levels(&quantize(GgmlType::Q4_K, x).unwrap(), 16..144, 144));
    let q6 = quantize(GgmlType::Q6_K, x).unwrap();
    let scales: Vec<i8> = q6
        .chunks(210)
        .flat_map(|b| b[192..208].iter().map(|&s| s as i8))
        .collect();
    assert!(scales.iter().any(|&s| s < 0) && scales.iter().any(|&s| s > 0));
    let q8 = quantize(GgmlType::Q8_0, x).unwrap();
    let q8_vals: Vec<i8> = q8
        .chunks(34)
        .flat_map(|b| b[2..].iter().map(|&q| q as i8))
        .collect();
    assert!(q8_vals.contains(&127) || q8_vals.contains(&-127));
    assert!(q8_vals.iter().any(|&q| q.abs() < 5));
}

#[test]
fn dequantize_into_matches_dequantize_block_by_block() {
    let x = &signals()[2].1;
    for dtype in GgmlType::ALL.into_iter().filter(|t| t.can_dequantize()) {
        let bytes = quantize(dtype, x).unwrap();
        let whole = dequantize(dtype, &bytes, x.len()).unwrap();
        let (be, bb) = (dtype.block_elements(), dtype.block_bytes());
        let per = 256 / be; // blocks per 256 elements
        for (i, chunk) in bytes.chunks(per * bb).enumerate() {
            let mut out = vec![f32::NAN; 256];
            dequantize_into(dtype, chunk, &mut out).unwrap();
            assert_eq!(out, whole[256 * i..256 * (i + 1)], "{dtype} chunk {i}");
        }
    }
}
