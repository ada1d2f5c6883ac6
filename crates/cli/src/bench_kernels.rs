//! `wick bench-kernels`: GEMV weight-read bandwidth per quant type, next to
//! the adapter's buffer-to-buffer copy bandwidth measured in the same run.
//! The ratio says how close each decode matmul gets to what the memory allows.

use serde_json::json;
use wick::gpu::GpuContext;
use wick::kernels::bench::{copy_bandwidth, gemv_bandwidth};
use wick::kernels::weights::GPU_DTYPES;

use crate::CliResult;

#[derive(clap::Args)]
pub struct BenchKernelsArgs {
    /// Output features of the benchmark matrix.
    #[arg(long, default_value_t = 2048)]
    pub rows: usize,
    /// Input features (a multiple of 256, so every format's blocks fit).
    #[arg(long, default_value_t = 2048)]
    pub cols: usize,
    #[arg(long, default_value_t = 64)]
    pub iters: usize,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BenchKernelsArgs) -> CliResult {
    if args.rows == 0 || args.cols == 0 || args.cols % 256 != 0 || args.iters == 0 {
        return Err("--rows and --iters must be >= 1 and --cols a positive multiple of 256".into());
    }
    let ctx = pollster::block_on(GpuContext::new())?;
    // 256 MiB copies: larger than any cache, like the GEMV's rotating weights.
    let copy_gbps = pollster::block_on(copy_bandwidth(&ctx, 256 << 20, 16))?;
    let mut rows = Vec::new();
    for dtype in GPU_DTYPES {
        let b = pollster::block_on(gemv_bandwidth(
            &ctx, dtype, args.rows, args.cols, args.iters,
        ))?;
        rows.push(json!({
            "dtype": dtype.name(),
            "weight_bytes": b.weight_bytes,
            "us_per_gemv": b.seconds * 1e6,
            "gemv_gbps": b.gbps,
            "copy_gbps": copy_gbps,
            "ratio": b.gbps / copy_gbps,
        }));
    }
    if args.json {
        let report = json!({
            "adapter": ctx.adapter.name,
            "shape": [args.rows, args.cols],
            "copy_gbps": copy_gbps,
            "gemv": rows,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "adapter {}  GEMV {}x{}  copy bandwidth {copy_gbps:.2} GB/s",
        ctx.adapter.name, args.rows, args.cols
    );
    println!(
        "{:<6} {:>12} {:>12} {:>10} {:>7}",
        "type", "bytes", "us/GEMV", "GB/s", "ratio"
    );
    for r in rows {
        println!(
            "{:<6} {:>12} {:>12.1} {:>10.2} {:>7.3}",
            r["dtype"].as_str().unwrap_or(""),
            r["weight_bytes"],
            r["us_per_gemv"].as_f64().unwrap_or(0.0),
            r["gemv_gbps"].as_f64().unwrap_or(0.0),
            r["ratio"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(())
}
