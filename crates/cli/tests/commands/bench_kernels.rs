//! `wick bench-kernels` as a user runs it: its JSON reports, and options it
//! cannot honour refused by name.

use crate::common;
use common::{fails_with, wick_json};

/// `wick bench-kernels --tokens N` times the prefill form: every format that
/// takes the shape reports N token rows and a finite, positive GMAC/s;
/// nonsense counts are refused by name.
#[test]
fn bench_kernels_times_many_token_matmuls() {
    let v = wick_json(&[
        "bench-kernels",
        "--rows",
        "40",
        "--cols",
        "64",
        "--tokens",
        "9",
        "--iters",
        "2",
        "--json",
    ]);
    let rows = v["gemv"].as_array().unwrap();
    // F32, F16 and the 32-element block formats; the K-quants are skipped.
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert_eq!(v["skipped"].as_array().unwrap().len(), 2);
    for r in rows {
        assert_eq!(
            (r["tokens"].as_u64(), r["x"].as_str()),
            (Some(9), Some("f32")),
            "{r}"
        );
        let gmacs = r["gmac_s"].as_f64().unwrap();
        let us = r["us_per_gemv"].as_f64().unwrap();
        assert!(gmacs.is_finite() && gmacs > 0.0 && us > 0.0, "{r}");
        // GMAC/s is the matmul's 40 x 64 x 9 multiply-adds over its time.
        let want = (40 * 64 * 9) as f64 / us / 1e3;
        assert!((gmacs - want).abs() <= 1e-9 * want, "{r}");
    }
    fails_with(&["bench-kernels", "--tokens", "0"], "--tokens");
    fails_with(&["bench-kernels", "--tokens", "4", "--sweep"], "--sweep");
}

/// `--dtypes` times only the formats it names, in its order and any case;
/// a name that is no GPU format is refused with the list of those that are.
#[test]
fn bench_kernels_times_only_the_named_formats() {
    let v = wick_json(&[
        "bench-kernels",
        "--rows",
        "8",
        "--cols",
        "256",
        "--tokens",
        "5",
        "--iters",
        "2",
        "--dtypes",
        "q6_k,F32",
        "--json",
    ]);
    let names: Vec<_> = v["gemv"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["form"] == "prefill")
        .map(|r| r["dtype"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["Q6_K", "F32"]);
    // Up to 8 rows, each format's prefill form, then an exact pass's: f32
    // x, and for the quantized format 8-bit x as this adapter's decode
    // reads it.
    let forms: Vec<_> = v["gemv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let form = r["form"].as_str().unwrap();
            let form = form.strip_suffix(" dot4").unwrap_or(form);
            format!("{} {form}", r["dtype"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        forms,
        [
            "Q6_K prefill",
            "Q6_K as decode",
            "Q6_K as decode, x q8",
            "F32 prefill",
            "F32 as decode"
        ]
    );
    fails_with(
        &["bench-kernels", "--dtypes", "Q4_0,Q3_K"],
        "'Q3_K' is not one of",
    );
}

/// `wick bench-kernels --load-paths` times the probe GEMV through each of
/// the four bindings (each checked against the CPU inside), F32 and 4-bit
/// where the columns allow, and nothing else; shapes it cannot take are
/// refused by name.
#[test]
fn bench_kernels_times_each_load_path() {
    let paths = [
        "w storage, x storage",
        "w storage, x uniform",
        "w texture, x storage",
        "w texture, x uniform",
    ];
    // 64 columns: both formats; 36: F32 alone, the 4-bit one skipped.
    for (cols, formats) in [(64, &["F32", "Q4"][..]), (36, &["F32"][..])] {
        let cols_arg = cols.to_string();
        let args = ["bench-kernels", "--rows", "20", "--cols", &cols_arg];
        let v = wick_json(&[&args[..], &["--iters", "2", "--load-paths", "--json"]].concat());
        assert!(v.get("gemv").is_none(), "{v}");
        let rows = v["load_paths"].as_array().unwrap();
        assert_eq!(rows.len(), 4 * formats.len(), "{v}");
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r["format"], formats[i / 4], "{r}");
            assert_eq!(r["path"], paths[i % 4], "{r}");
            let (us, gbps) = (
                r["us_per_gemv"].as_f64().unwrap(),
                r["gemv_gbps"].as_f64().unwrap(),
            );
            assert!(us > 0.0 && gbps.is_finite() && gbps > 0.0, "{r}");
            // 20 rows of 4 bytes a weight, or of 20 bytes a 32-weight block.
            let bytes = if formats[i / 4] == "F32" {
                20 * cols * 4
            } else {
                20 * cols / 32 * 20
            };
            let want = bytes as f64 / us / 1e3;
            assert!((gbps - want).abs() <= 1e-9 * want, "{r}");
        }
        let skipped = v["skipped"].as_array().unwrap();
        assert_eq!(skipped.len(), 2 - formats.len(), "{v}");
    }
    fails_with(
        &[
            "bench-kernels",
            "--rows",
            "8",
            "--cols",
            "6",
            "--load-paths",
        ],
        "no probe format fits 8x6",
    );
    fails_with(
        &["bench-kernels", "--load-paths", "--tokens", "4"],
        "--tokens",
    );
    fails_with(&["bench-kernels", "--load-paths", "--sweep"], "--sweep");
}
