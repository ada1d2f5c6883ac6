//! The WGSL a `TileShape` writes into the chunked tiled core
//! (matmul_tiled_vec.wgsl): each row's decode and dot products, x's loads
//! (an invocation's own, or shared through the subgroup) and the scale
//! tiles' loads.

use std::borrow::Cow;

use super::{RowForm, CHUNK_VEC4S};
use crate::kernels::weights::GpuFormat;

/// The chunked tiled core's (matmul_tiled_vec.wgsl) per-chunk code for
/// `tn` rows of `fmt`: X_LOADS reads the chunk's x for the TM tokens (and,
/// for quantized formats, their sums over each run), ROW_SUMS declares the
/// sums, ROW_STEPS decodes each row's chunk and adds its dot products with
/// the tokens' x, ROW_STORES leaves the sums in the array `acc` that
/// `emit_tile` reads (see `RowForm`). A quantized chunk's dot products are
/// taken with its quants and scaled after (chunk_ab_FMT), which saves a
/// multiply and an add per weight. `x_share`: X_LOADS takes x through the
/// subgroup (`TileShape::x_share`; not in the flat form).
pub(super) fn row_code(
    fmt: GpuFormat,
    tn: u32,
    tm: u32,
    form: RowForm,
    x_share: bool,
) -> [(&'static str, Cow<'static, str>); 6] {
    let scaled = fmt.is_quantized();
    let chunk = |part: &str, r: &str| {
        format!(
            "chunk_{part}_{}(w_row0 + min(row0 + {r}, p.rows - 1u), wc)",
            fmt.fmt
        )
    };
    // x: the chunk's two runs of CV / 2 vec4s from xc.x and xc.y.
    let mut loop_loads = String::from("        var xs: array<array<vec4<f32>, CV>, TM>;\n        for (var t = 0u; t < TM; t++) {\n            // Tokens and rows past the end repeat the last; never written.\n            let base = x_base(min(tok0 + t, n_tok - 1u)) / 4u;\n            for (var i = 0u; i < CV / 2u; i++) {\n                xs[t][i] = x[base + xc.x + i];\n                xs[t][i + CV / 2u] = x[base + xc.y + i];\n            }\n        }\n");
    // vec_consts.wgsl's CV: the chunk's vec4s.
    let cv = (fmt.vec_step() / 4).min(CHUNK_VEC4S);
    if x_share {
        loop_loads = shared_x_loads(tm, cv);
    }
    if form == RowForm::Loop {
        let step = if scaled {
            format!(
                "acc[t * TN + r] += dot_chunk_scaled(ws, {}, &xs, t);",
                chunk("ab", "r")
            )
        } else {
            "acc[t * TN + r] += dot_chunk(ws, &xs, t);".to_string()
        };
        let steps = format!(
            "        for (var r = 0u; r < TN; r++) {{\n            let ws = {};\n            for (var t = 0u; t < TM; t++) {{\n                {step}\n            }}\n        }}\n",
            chunk("q", "r")
        );
        return [
            ("X_LOADS", loop_loads.into()),
            ("ROW_SUMS", "    var acc: array<f32, TM * TN>;".into()),
            ("ROW_STEPS", steps.into()),
            ("ROW_STORES", "".into()),
            ("CHUNK_LOOP", CHUNK_LOOP.into()),
            ("CHUNK_LOOP_END", "    }".into()),
        ];
    }
    // Each row's token sums are vec4s, one per group of four tokens.
    assert!(
        tm % 4 == 0,
        "the written-out forms take tokens in fours, not {tm}"
    );
    let groups = tm / 4;
    let mut loads = String::new();
    if form == RowForm::Flat {
        for t in 0..tm {
            // Tokens and rows past the end repeat the last; never written.
            loads += &format!("        let xb{t} = x_base(min(tok0 + {t}u, n_tok - 1u)) / 4u;\n");
            for i in 0..cv {
                let (run, at) = if i < cv / 2 {
                    ("x", i)
                } else {
                    ("y", i - cv / 2)
                };
                loads += &format!("        let x{t}_{i} = x[xb{t} + xc.{run} + {at}u];\n");
            }
        }
        if scaled {
            // Each group's tokens' x sums over each run.
            loads += "        let one = vec4<f32>(1.0);\n";
            for g in 0..groups {
                for (run, vecs) in [(0, 0..cv / 2), (1, cv / 2..cv)] {
                    let token_sums = (4 * g..4 * g + 4)
                        .map(|t| {
                            let terms = vecs.clone().map(|i| format!("x{t}_{i}"));
                            format!("dot({}, one)", terms.collect::<Vec<_>>().join(" + "))
                        })
                        .collect::<Vec<_>>();
                    loads += &format!(
                        "        let sums{run}_{g} = vec4<f32>({});\n",
                        token_sums.join(", ")
                    );
                }
            }
        }
    } else {
        if scaled {
            for g in 0..groups {
                let t0 = 4 * g;
                loop_loads += &format!(
                    "        let sums0_{g} = run_sums(&xs, 0u, {t0}u);\n        let sums1_{g} = run_sums(&xs, CV / 2u, {t0}u);\n"
                );
            }
        }
        loads += &loop_loads;
    }
    let mut sums = String::new();
    let mut steps = String::new();
    let mut stores = String::from("    var acc: array<f32, TM * TN>;\n");
    let unrolled = form == RowForm::Unrolled;
    let tiles = unrolled.then(|| scale_tiles(fmt, tn)).flatten();
    if let Some((loads, _)) = &tiles {
        steps += loads;
    }
    // K-quant blocks are 8 chunks with one aux4 (and Q6_K one d16): loaded
    // once a block, a loop over its chunks inside.
    let block_scales = unrolled && fmt.qk == 256 && fmt.is_quantized();
    let (mut chunk_loop, mut loop_end) = (String::from(CHUNK_LOOP), String::from("    }"));
    if block_scales {
        chunk_loop = "    for (var c0 = 0u; c0 < chunks; c0 += 8u) {\n".into();
        for r in 0..tn {
            chunk_loop += &format!(
                "        let blk{r} = (w_row0 + min(row0 + {r}u, p.rows - 1u)) * p.blocks + (p.first_chunk + c0) / 8u;\n        let sc{r} = aux4(blk{r});\n"
            );
            if fmt.has_d16 {
                chunk_loop += &format!("        let dd{r} = d16(blk{r});\n");
            }
        }
        chunk_loop += "    for (var c = c0; c < c0 + 8u; c++) {";
        loop_end += "\n    }";
    }
    for r in 0..tn {
        let row = format!("{r}u");
        let at = format!("w_row0 + min(row0 + {r}u, p.rows - 1u), wc");
        match &tiles {
            Some((_, scales)) => {
                let (d, aux) = &scales[r as usize];
                let f = fmt.fmt;
                steps += &format!("        let w{r} = chunk_q_given_{f}({at}, {aux});\n");
                steps += &format!("        let ab{r} = chunk_ab_given_{f}({d}, {aux});\n");
            }
            None if block_scales => {
                let (f, d) = (
                    fmt.fmt,
                    if fmt.has_d16 {
                        format!("dd{r}")
                    } else {
                        "0.0".into()
                    },
                );
                steps += &format!("        let w{r} = {};\n", chunk("q", &row));
                steps += &format!("        let ab{r} = chunk_ab_given_{f}(sc{r}, {d}, wc);\n");
            }
            None => {
                steps += &format!("        let w{r} = {};\n", chunk("q", &row));
                if scaled {
                    steps += &format!("        let ab{r} = {};\n", chunk("ab", &row));
                }
            }
        }
        for g in 0..groups {
            let (acc, t0) = (format!("acc_{r}_{g}"), 4 * g);
            sums += &format!("    var {acc} = vec4<f32>(0.0);\n");
            let step = match (form, scaled) {
                (RowForm::Flat, _) => {
                    // Token t's dot product of row r's chunk over run `vecs`.
                    let dots = |t: u32, vecs: std::ops::Range<u32>| {
                        vecs.map(|i| format!("dot(w{r}[{i}], x{t}_{i})"))
                            .collect::<Vec<_>>()
                            .join(" + ")
                    };
                    let tokens = |vecs: std::ops::Range<u32>| {
                        let per_token = (t0..t0 + 4).map(|t| dots(t, vecs.clone()));
                        format!("vec4<f32>({})", per_token.collect::<Vec<_>>().join(", "))
                    };
                    match scaled {
                        true => format!(
                            "ab{r}.x * {} + ab{r}.y * sums0_{g} + ab{r}.z * {} + ab{r}.w * sums1_{g}",
                            tokens(0..cv / 2),
                            tokens(cv / 2..cv)
                        ),
                        false => tokens(0..cv),
                    }
                }
                (_, true) => {
                    format!("dot_tokens_scaled(w{r}, ab{r}, &xs, sums0_{g}, sums1_{g}, {t0}u)")
                }
                (_, false) => format!("dot_tokens(w{r}, &xs, {t0}u)"),
            };
            steps += &format!("        {acc} += {step};\n");
            for t in 0..4 {
                stores += &format!("    acc[{}u * TN + {r}u] = {acc}[{t}];\n", t0 + t);
            }
        }
    }
    [
        ("X_LOADS", loads.into()),
        ("ROW_SUMS", sums.into()),
        ("ROW_STEPS", steps.into()),
        ("ROW_STORES", stores.into()),
        ("CHUNK_LOOP", chunk_loop.into()),
        ("CHUNK_LOOP_END", loop_end.into()),
    ]
}

/// X_LOADS where the subgroup shares x (`TileShape::x_share`): lane
/// `x_lane` loads vec4 x_lane % CV of the chunk for each of the TM tokens
/// (the first run's CV / 2 vec4s from xc.x, the second's from xc.y), and
/// each of the chunk's `cv` vec4s comes from the lane that loaded it.
fn shared_x_loads(tm: u32, cv: u32) -> String {
    let mut code = String::from(
        "        var xs: array<array<vec4<f32>, CV>, TM>;\n        let own = x_lane % CV;\n        let own_at = select(xc.y + own - CV / 2u, xc.x + own, own < CV / 2u);\n",
    );
    for t in 0..tm {
        // Tokens past the end repeat the last; never written.
        code += &format!(
            "        let xv{t} = x[x_base(min(tok0 + {t}u, n_tok - 1u)) / 4u + own_at];\n"
        );
        for i in 0..cv {
            code += &format!("        xs[{t}][{i}] = subgroupBroadcast(xv{t}, {i}u);\n");
        }
    }
    code
}

/// The chunk loop of matmul_tiled_vec.wgsl's `tiled`, as most formats take it.
const CHUNK_LOOP: &str = "    for (var c = 0u; c < chunks; c++) {";

/// Where `tn` rows are whole scale tiles of `fmt` (the 32-element formats'
/// 8 rows, `kernels::weights::layout`): the loads of each tile's scales for a chunk,
/// a vec4 of its 8 d16 and two of its aux words, and each row's (d, aux)
/// expressions out of them. A row at a time read each word through a load
/// of its own, on llvmpipe a texel fetch a word.
fn scale_tiles(fmt: GpuFormat, tn: u32) -> Option<(String, Vec<(String, String)>)> {
    const LANES: [&str; 4] = ["x", "y", "z", "w"];
    let tile = fmt.scale_tile;
    if tile != 8 || tn % tile != 0 || !fmt.is_quantized() {
        return None;
    }
    let aux = fmt.aux_words == 1;
    let mut loads = String::new();
    for t in 0..tn / tile {
        // Rows past the part read the last tile's scales; their sums are dropped.
        loads += &format!(
            "        let slot{t} = ((w_row0 + min(row0 + {}u, p.rows - 1u)) / SCALE_TILE * p.blocks + wc) * SCALE_TILE;\n",
            t * tile
        );
        if fmt.has_d16 {
            loads += &format!("        let d{t} = w_vec4((p.d16_base + slot{t} / 2u) / 4u);\n");
        }
        if aux {
            for v in 0..2 {
                loads += &format!(
                    "        let aux{t}_{v} = w_vec4((p.aux_base + slot{t}) / 4u + {v}u);\n"
                );
            }
        }
    }
    let scales = (0..tn as usize)
        .map(|r| {
            let (t, i) = (r / tile as usize, r % tile as usize);
            // Row i's f16 is half i % 2 of word i / 2 of the tile's d16.
            let d = match fmt.has_d16 {
                true => format!("unpack2x16float(d{t}.{}).{}", LANES[i / 2], LANES[i % 2]),
                false => "0.0".into(),
            };
            let a = match aux {
                true => format!("aux{t}_{}.{}", i / 4, LANES[i % 4]),
                false => "0u".into(),
            };
            (d, a)
        })
        .collect();
    Some((loads, scales))
}
