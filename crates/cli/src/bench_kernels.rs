//! `wick bench-kernels`: GEMV weight-read bandwidth per quant type and
//! matrix shape, next to the adapter's buffer-to-buffer copy bandwidth
//! measured in the same run. The ratio says how close each decode matmul
//! gets to what the memory allows. `--sweep` times the vec4 core's
//! workgroup shapes, which is how its defaults per adapter class are chosen.
//! Each GEMV is timed with f32 x (`x: "f32"`, what `matmul` reads) and,
//! for quantized weights whose columns are whole 32-value blocks, with x in
//! 8-bit blocks through the fused linear layer (`x: "q8"`, a decode projection's input
//! with `--activations q8`). `--tokens N` times the fused linear layer over N
//! token rows instead (its prefill form, as a model's projections run a
//! prompt chunk), in multiply-adds per second, and for up to 8 rows beside
//! it the matrix-vector form a verifying pass runs (each row summed as
//! decode sums it; with f32 x and, where decode takes it, 8-bit x).
//! `--load-paths` times instead one plain GEMV (F32 and 4-bit weights) with
//! its weights and x through each kind of binding (`kernels::bench::load_probe`).

use serde_json::{json, Value};
use wick::format::quant::GgmlType;
use wick::gpu::GpuContext;
use wick::kernels::bench::load_probe::{probe_load_paths, ProbeFormat};
use wick::kernels::bench::{
    copy_bandwidth, gemv_bandwidth, gemv_bandwidth_q8, gemv_bandwidth_vec, matmul_throughput,
    pass_throughput, GemvBench, PassX,
};
use wick::kernels::matmul::linear::{q8_dot4, q8_dot4_fits, AS_DECODE_TOKENS};
use wick::kernels::matmul::tiled::{vec_core_step, Reduce, VecShape, VEC_WORKGROUP};
use wick::kernels::norm::rms_q8::Q8_BLOCK;
use wick::kernels::weights::GPU_DTYPES;

use crate::CliResult;

/// A decode projection, the feed-forward up projection of a small model and
/// a large vocabulary's output head.
const DEFAULT_SHAPES: &str = "2048x2048,1536x576,151936x896";

#[derive(clap::Args)]
pub struct BenchKernelsArgs {
    /// Matrix shapes as ROWSxCOLS (output x input features), comma separated.
    /// A format whose blocks do not divide COLS is reported as skipped.
    #[arg(long, default_value = DEFAULT_SHAPES)]
    pub shapes: String,
    /// One shape's rows instead of --shapes (with --cols).
    #[arg(long, requires = "cols")]
    pub rows: Option<usize>,
    #[arg(long, requires = "rows")]
    pub cols: Option<usize>,
    /// Only these formats, comma separated (F32,F16,Q8_0,Q4_0,Q4_1,Q5_0,Q4_K,Q6_K;
    /// any case) instead of all of them.
    #[arg(long, conflicts_with = "load_paths")]
    pub dtypes: Option<String>,
    /// Most GEMVs timed per measurement (fewer for large matrices: about
    /// 1 GB of weights is read per measurement).
    #[arg(long, default_value_t = 64)]
    pub iters: usize,
    /// Also time the vec4 core at every rows-per-workgroup and lane order,
    /// on the first shape.
    #[arg(long)]
    pub sweep: bool,
    /// Token rows of x per matmul: 1 times the decode GEMV; more times the
    /// prefill form (the fused linear layer over a prompt chunk of that many
    /// tokens, as a model's projections run it) and reports multiply-adds
    /// per second (GMAC/s); up to 8 also the form of a verifying pass
    /// (each row summed as decode sums it).
    #[arg(long, default_value_t = 1)]
    pub tokens: usize,
    /// Instead of the formats, time a plain GEMV of the first shape (F32
    /// weights, and 4-bit ones where the columns are whole 32-weight
    /// blocks) with its weights in a storage buffer or a texture and x in a
    /// storage or a uniform buffer: which binding kinds this adapter loads
    /// cheaply.
    #[arg(long, conflicts_with = "sweep")]
    pub load_paths: bool,
    #[arg(long)]
    pub json: bool,
}

fn parse_shapes(args: &BenchKernelsArgs) -> Result<Vec<(usize, usize)>, String> {
    if let (Some(r), Some(c)) = (args.rows, args.cols) {
        return check_shape(r, c).map(|s| vec![s]);
    }
    args.shapes
        .split(',')
        .map(|s| {
            let (r, c) = s
                .trim()
                .split_once('x')
                .ok_or_else(|| format!("--shapes: '{s}' is not ROWSxCOLS"))?;
            let parse = |v: &str| {
                v.parse::<usize>()
                    .map_err(|_| format!("--shapes: '{v}' in '{s}' is not a number"))
            };
            check_shape(parse(r)?, parse(c)?)
        })
        .collect()
}

/// The formats `--dtypes` names, in its order, or every GPU format.
fn parse_dtypes(dtypes: Option<&str>) -> Result<Vec<GgmlType>, String> {
    let Some(list) = dtypes else {
        return Ok(GPU_DTYPES.to_vec());
    };
    list.split(',')
        .map(|name| {
            let name = name.trim();
            GPU_DTYPES
                .into_iter()
                .find(|d| d.name().eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    let known: Vec<_> = GPU_DTYPES.iter().map(|d| d.name()).collect();
                    format!("--dtypes: '{name}' is not one of {}", known.join(", "))
                })
        })
        .collect()
}

fn check_shape(rows: usize, cols: usize) -> Result<(usize, usize), String> {
    if rows == 0 || cols == 0 {
        return Err(format!("shape {rows}x{cols}: rows and cols must be >= 1"));
    }
    Ok((rows, cols))
}

/// GEMVs per measurement: about 1 GB of weights, between 2 and `most`.
fn iters_for(bytes: usize, most: usize) -> usize {
    (1usize << 30).div_ceil(bytes.max(1)).clamp(2, most.max(2))
}

fn row_json(b: &GemvBench, copy_gbps: f64) -> Value {
    json!({
        "dtype": b.dtype.name(),
        "rows": b.rows,
        "cols": b.cols,
        "tokens": b.tokens,
        "weight_bytes": b.weight_bytes,
        "us_per_gemv": b.seconds * 1e6,
        "gemv_gbps": b.gbps,
        "ratio": b.gbps / copy_gbps,
        "gmac_s": b.gmacs(),
        "x": "f32",
    })
}

pub fn run(args: BenchKernelsArgs) -> CliResult {
    if args.iters == 0 {
        return Err("--iters must be >= 1".into());
    }
    if args.tokens == 0 {
        return Err("--tokens must be >= 1".into());
    }
    if args.tokens > 1 && args.sweep {
        return Err("--sweep times the decode GEMV's shapes: it takes no --tokens".into());
    }
    if args.tokens > 1 && args.load_paths {
        return Err("--load-paths times one-token GEMVs: it takes no --tokens".into());
    }
    let shapes = parse_shapes(&args)?;
    let dtypes = parse_dtypes(args.dtypes.as_deref())?;
    let ctx = pollster::block_on(GpuContext::new())?;
    // 256 MiB copies: larger than any cache, like the GEMV's rotating weights.
    let copy_gbps = pollster::block_on(copy_bandwidth(&ctx, 256 << 20, 16))?;
    if args.load_paths {
        return load_paths(&ctx, shapes[0], args.iters, copy_gbps, args.json);
    }
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    for &(rows, cols) in &shapes {
        for &dtype in &dtypes {
            if cols % dtype.block_elements() != 0 {
                skipped.push(json!({
                    "dtype": dtype.name(), "rows": rows, "cols": cols,
                    "reason": format!("{cols} columns are not whole {}-element blocks", dtype.block_elements()),
                }));
                continue;
            }
            let bytes = dtype.row_bytes(cols as u64).unwrap_or(0) as usize * rows;
            if args.tokens > 1 {
                // About as much work per measurement as the GEMVs': the
                // weights once per token.
                let iters = iters_for(bytes * args.tokens, args.iters);
                let shape = (rows, cols);
                let b = matmul_throughput(&ctx, dtype, shape, args.tokens, iters);
                let mut r = row_json(&pollster::block_on(b)?, copy_gbps);
                r["form"] = json!("prefill");
                results.push(r);
                if args.tokens <= AS_DECODE_TOKENS {
                    // The pass's form with f32 x, and with 8-bit x the way
                    // this adapter's decode takes it.
                    let mut xs = vec![("as decode", PassX::F32)];
                    if cols % Q8_BLOCK == 0 && dtype.block_elements() > 1 {
                        let dot4 = q8_dot4(&ctx, dtype);
                        let name = if dot4 {
                            "as decode, x q8 dot4"
                        } else {
                            "as decode, x q8"
                        };
                        xs.push((name, PassX::Q8 { dot4 }));
                    }
                    for (name, x) in xs {
                        let b = pass_throughput(&ctx, dtype, shape, args.tokens, iters, x);
                        let mut r = row_json(&pollster::block_on(b)?, copy_gbps);
                        r["form"] = json!(name);
                        results.push(r);
                    }
                }
                continue;
            }
            let iters = iters_for(bytes, args.iters);
            let b = pollster::block_on(gemv_bandwidth(&ctx, dtype, rows, cols, iters))?;
            results.push(row_json(&b, copy_gbps));
            if cols % Q8_BLOCK == 0 && dtype.block_elements() > 1 {
                // 8-bit x turned to f32 in registers, then (where the
                // adapter has them and the format takes them) in integer
                // dot products, side by side.
                let dot4 = q8_dot4_fits(&ctx.features, dtype);
                for on in [false, true].into_iter().filter(|&on| !on || dot4) {
                    let b =
                        pollster::block_on(gemv_bandwidth_q8(&ctx, dtype, rows, cols, iters, on))?;
                    let mut r = row_json(&b, copy_gbps);
                    r["x"] = json!(if on { "q8_dot4" } else { "q8" });
                    results.push(r);
                }
            }
        }
    }
    let sweep = if args.sweep {
        sweep_vec_core(&ctx, shapes[0], args.iters, copy_gbps)?
    } else {
        Vec::new()
    };
    if args.json {
        let body = json!({ "gemv": results, "skipped": skipped, "vec_core_sweep": sweep });
        return print_report(&ctx, copy_gbps, body);
    }
    print_adapter(&ctx, copy_gbps);
    if args.tokens > 1 {
        println!("matmuls of {} token rows", args.tokens);
        println!(
            "{:<14} {:>14} {:>12} {:>12} {:>10}  form",
            "type", "shape", "bytes", "us/matmul", "GMAC/s"
        );
        for r in &results {
            println!(
                "{:<14} {:>14} {:>12} {:>12.1} {:>10.2}  {}",
                r["dtype"].as_str().unwrap_or(""),
                format!("{}x{}", r["rows"], r["cols"]),
                r["weight_bytes"],
                r["us_per_gemv"].as_f64().unwrap_or(0.0),
                r["gmac_s"].as_f64().unwrap_or(0.0),
                r["form"].as_str().unwrap_or("")
            );
        }
        print_skipped(&skipped);
        return Ok(());
    }
    println!(
        "{:<14} {:>14} {:>12} {:>12} {:>10} {:>7}",
        "type", "shape", "bytes", "us/GEMV", "GB/s", "ratio"
    );
    for r in results.iter().chain(&sweep) {
        print_row(r);
    }
    print_skipped(&skipped);
    Ok(())
}

/// `--load-paths`: `load_probe` on `shape` in each format whose blocks
/// divide its columns (the others reported as skipped), as a table or JSON.
fn load_paths(
    ctx: &GpuContext,
    (rows, cols): (usize, usize),
    most_iters: usize,
    copy_gbps: f64,
    json: bool,
) -> CliResult {
    let mut rows_json = Vec::new();
    let mut skipped = Vec::new();
    for format in ProbeFormat::ALL {
        if cols % format.block() != 0 {
            skipped.push(json!({
                "format": format.name(), "rows": rows, "cols": cols,
                "reason": format!("{cols} columns are not whole {}-weight blocks", format.block()),
            }));
            continue;
        }
        let bytes = rows * format.row_bytes(cols);
        if bytes as u64 > ctx.max_binding_bytes() {
            skipped.push(json!({
                "format": format.name(), "rows": rows, "cols": cols,
                "reason": format!("{bytes} bytes of weights are over one storage binding ({})", ctx.max_binding_bytes()),
            }));
            continue;
        }
        let iters = iters_for(bytes, most_iters);
        let probes = pollster::block_on(probe_load_paths(ctx, format, rows, cols, iters))?;
        rows_json.extend(probes.iter().map(|p| {
            json!({
                "format": p.format.name(),
                "path": p.path.name(),
                "rows": p.rows,
                "cols": p.cols,
                "us_per_gemv": p.seconds * 1e6,
                "gemv_gbps": p.gbps,
                "ratio": p.gbps / copy_gbps,
            })
        }));
    }
    if rows_json.is_empty() {
        let reasons: Vec<String> = skipped
            .iter()
            .map(|s| {
                let text = |key: &str| s[key].as_str().unwrap_or("").to_string();
                format!("{}: {}", text("format"), text("reason"))
            })
            .collect();
        return Err(format!(
            "--load-paths: no probe format fits {rows}x{cols} ({})",
            reasons.join("; ")
        )
        .into());
    }
    if json {
        let body = json!({ "load_paths": rows_json, "skipped": skipped });
        return print_report(ctx, copy_gbps, body);
    }
    print_adapter(ctx, copy_gbps);
    println!("GEMV {rows}x{cols}, each way of binding its weights (w) and x");
    println!(
        "{:<30} {:>12} {:>10} {:>7}",
        "binding", "us/GEMV", "GB/s", "ratio"
    );
    for r in &rows_json {
        println!(
            "{:<30} {:>12.1} {:>10.2} {:>7.3}",
            format!(
                "{} {}",
                r["format"].as_str().unwrap_or(""),
                r["path"].as_str().unwrap_or("")
            ),
            r["us_per_gemv"].as_f64().unwrap_or(0.0),
            r["gemv_gbps"].as_f64().unwrap_or(0.0),
            r["ratio"].as_f64().unwrap_or(0.0)
        );
    }
    for s in &skipped {
        println!(
            "{:<30} skipped: {}",
            s["format"].as_str().unwrap_or(""),
            s["reason"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

/// The JSON report: the adapter and its copy bandwidth, then `body`'s fields.
fn print_report(ctx: &GpuContext, copy_gbps: f64, body: Value) -> CliResult {
    let mut report = json!({
        "adapter": ctx.adapter.name,
        "software_adapter": ctx.tuning.class.is_cpu(),
        "weight_store": ctx.weight_store.name(),
        "copy_gbps": copy_gbps,
    });
    if let (Some(report), Value::Object(body)) = (report.as_object_mut(), body) {
        report.extend(body);
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// The table's first line: the adapter and its copy bandwidth.
fn print_adapter(ctx: &GpuContext, copy_gbps: f64) {
    println!(
        "adapter {}  weights in {}  copy bandwidth {copy_gbps:.2} GB/s",
        ctx.adapter.name,
        ctx.weight_store.name()
    );
}

fn print_skipped(skipped: &[Value]) {
    for s in skipped {
        println!(
            "{:<14} {:>14} skipped: {}",
            s["dtype"].as_str().unwrap_or(""),
            format!("{}x{}", s["rows"], s["cols"]),
            s["reason"].as_str().unwrap_or("")
        );
    }
}

fn print_row(r: &Value) {
    let dtype = r["dtype"].as_str().unwrap_or("");
    let label = match r.get("lanes") {
        Some(l) => format!(
            "{dtype} l{l}r{}{}{}",
            r["group_rows"],
            if r["chunked"] == true { "c" } else { "i" },
            match r["reduce"].as_str() {
                Some("tree") => "t",
                Some("subgroup") => "s",
                _ => "",
            }
        ),
        None if r["x"] == "q8" => format!("{dtype} x q8"),
        None if r["x"] == "q8_dot4" => format!("{dtype} x q8 dot4"),
        None => dtype.to_string(),
    };
    println!(
        "{:<14} {:>14} {:>12} {:>12.1} {:>10.2} {:>7.3}",
        label,
        format!("{}x{}", r["rows"], r["cols"]),
        r["weight_bytes"],
        r["us_per_gemv"].as_f64().unwrap_or(0.0),
        r["gemv_gbps"].as_f64().unwrap_or(0.0),
        r["ratio"].as_f64().unwrap_or(0.0)
    );
}

/// The vec4 core with one lane a row group (rows across lanes, no lane
/// sums; workgroups of 8 lanes), lane groups of 6, one SIMD batch (8) or
/// the whole workgroup (64), 2 to 16 rows a group, lanes over contiguous
/// runs of steps or interleaved, each reduction, for every format whose
/// blocks and steps divide `shape`'s columns.
fn sweep_vec_core(
    ctx: &GpuContext,
    (rows, cols): (usize, usize),
    most_iters: usize,
    copy_gbps: f64,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    // Each lane order with each way of summing a row's lanes the adapter has.
    let mut reductions = vec![Reduce::Serial, Reduce::Tree];
    if ctx.features.subgroups {
        reductions.push(Reduce::Subgroup);
    }
    for dtype in GPU_DTYPES {
        match vec_core_step(dtype) {
            Some(step) if cols % step == 0 && cols % dtype.block_elements() == 0 => {}
            _ => continue,
        }
        let bytes = dtype.row_bytes(cols as u64).unwrap_or(0) as usize * rows;
        let iters = iters_for(bytes, most_iters);
        for chunked in [true, false] {
            for lanes in [1u32, 6, 8, 64] {
                // Groups of 6 come 8 to a workgroup, as CPU adapters take
                // groups that are not a power of two (`cpu_group_lanes`);
                // one lane a group in a workgroup of one llvmpipe batch, as
                // llvmpipe takes it for matrices with rows to spare.
                let workgroup = match lanes {
                    6 => 48,
                    1 => 8,
                    _ => VEC_WORKGROUP,
                };
                for group_rows in [2, 4, 8, 16] {
                    for &reduce in &reductions {
                        let shape = VecShape {
                            lanes,
                            group_rows,
                            chunked,
                            reduce,
                            workgroup,
                        };
                        // Only the serial sum takes any lane count.
                        if shape.check().is_err() {
                            continue;
                        }
                        let b = pollster::block_on(gemv_bandwidth_vec(
                            ctx, dtype, rows, cols, iters, shape,
                        ))?;
                        let mut r = row_json(&b, copy_gbps);
                        r["lanes"] = json!(lanes);
                        r["group_rows"] = json!(group_rows);
                        r["chunked"] = json!(chunked);
                        r["reduce"] = json!(reduce.name());
                        out.push(r);
                    }
                }
            }
        }
    }
    Ok(out)
}
