//! The vec4 core's one-lane tile reader (shaders/matmul/matvec_tile.wgsl): when a
//! lane takes a whole scale tile of rows (llvmpipe's decode shape over the
//! 32-element formats), each step loads the tile's scales of the step's
//! block at once and dots x with the 16 rows. The rows are written out
//! here, one line each, since llvmpipe keeps an array indexed by a loop
//! variable in memory, and the row's scale words are then named fields.

use std::borrow::Cow;
use std::fmt::Write;

use crate::kernels::matmul::vec_shape::VecShape;
use crate::kernels::weights::GpuFormat;

/// Whether the vec4 core in `shape` reads `fmt` a tile at a time: one lane
/// a group over whole scale tiles of rows, in a format with tiles.
pub(crate) fn tiles(fmt: GpuFormat, shape: VecShape) -> bool {
    fmt.scale_tile > 1 && shape.lanes == 1 && shape.group_rows % fmt.scale_tile == 0
}

/// The defines of matvec_tile.wgsl for `tokens` token rows: TILE_CORE and
/// TILE_BODY (the x readers' `dot_x_scaled` is the TILE flag's,
/// `vec_core_flags`).
pub(crate) fn defines(
    fmt: GpuFormat,
    shape: VecShape,
    tokens: u32,
) -> Vec<(&'static str, Cow<'static, str>)> {
    let on = tiles(fmt, shape);
    vec![
        ("TILE_CORE", if on { "true" } else { "false" }.into()),
        (
            "TILE_BODY",
            if on {
                body(fmt, shape.group_rows, tokens).into()
            } else {
                "".into()
            },
        ),
    ]
}

const LANES4: [&str; 4] = ["x", "y", "z", "w"];

/// `tile_partials`' body for `fmt`, `rows` rows a lane (whole tiles of
/// `fmt.scale_tile` rows) and `tokens` token rows: a sum a (row, token),
/// each tile's d16 words (two f16 a word, four words a vec4) and aux
/// words (four a vec4) loaded once a step, then for each token row (of
/// the first `p.m`) its x and a line a row. Token t's sum of row r is
/// `a{r}_{t}`, added to in the same order whatever `tokens` is.
fn body(fmt: GpuFormat, rows: u32, tokens: u32) -> String {
    let (rows, tile, tokens) = (rows as usize, fmt.scale_tile as usize, tokens as usize);
    let aux = fmt.aux_words == 1;
    let mut b = String::new();
    for r in 0..rows {
        for t in 0..tokens {
            let _ = writeln!(b, "    var a{r}_{t} = 0.0;");
        }
    }
    // Rows past the part read the last tile's scales.
    for k in 0..rows / tile {
        let _ = writeln!(
            b,
            "    let tile{k} = min(group_row0 + {}u, p.rows - 1u) / SCALE_TILE;",
            k * tile
        );
    }
    let _ = writeln!(b, "    for (var s = first; s < end; s++) {{");
    for k in 0..rows / tile {
        let _ = writeln!(
            b,
            "        let slot{k} = (tile{k} * p.blocks + s) * SCALE_TILE;"
        );
        if fmt.has_d16 {
            for v in 0..tile / 8 {
                let _ = writeln!(
                    b,
                    "        let d{k}_{v} = w_vec4((p.d16_base + slot{k} / 2u) / 4u + {v}u);"
                );
            }
        }
        if aux {
            for v in 0..tile / 4 {
                let _ = writeln!(
                    b,
                    "        let aux{k}_{v} = w_vec4((p.aux_base + slot{k}) / 4u + {v}u);"
                );
            }
        }
    }
    // Each row's stored scales, as the x reader's dot_x_scaled takes them.
    let scales: Vec<(String, String)> = (0..rows)
        .map(|r| {
            let (k, i) = (r / tile, r % tile);
            let d = if fmt.has_d16 {
                // Row i's f16 is half i % 2 of word i / 2 of the tile's d16.
                let word = i / 2;
                format!(
                    "unpack2x16float(d{k}_{}.{}).{}",
                    word / 4,
                    LANES4[word % 4],
                    LANES4[i % 2]
                )
            } else {
                "0.0".into()
            };
            let a = if aux {
                format!("aux{k}_{}.{}", i / 4, LANES4[i % 4])
            } else {
                "0u".into()
            };
            (d, a)
        })
        .collect();
    for t in 0..tokens {
        // One token row (decode) needs no test; a slice of fewer rows than
        // the pipeline's skips the rest (p.m is uniform).
        let indent = if tokens > 1 {
            let _ = writeln!(b, "        if ({t}u < p.m) {{");
            "            "
        } else {
            "        "
        };
        let _ = writeln!(b, "{indent}x_token = {t}u;");
        let _ = writeln!(
            b,
            "{indent}let x{t} = step_x(base4 + {t}u * (p.k / 4u), s);"
        );
        for (r, (d, a)) in scales.iter().enumerate() {
            let _ = writeln!(
                b,
                "{indent}a{r}_{t} += dot_x_scaled(min(group_row0 + {r}u, p.rows - 1u), s, x{t}, {d}, {a});"
            );
        }
        if tokens > 1 {
            let _ = writeln!(b, "        }}");
        }
    }
    let _ = writeln!(b, "    }}");
    let _ = writeln!(b, "    let first_row = (lid / LANES) * GROUP_ROWS;");
    for r in 0..rows {
        for t in 0..tokens {
            let _ = writeln!(
                b,
                "    partial[((first_row + {r}u) * TOKENS + {t}u) * LANES] = a{r}_{t};"
            );
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::quant::GgmlType;
    use crate::kernels::matmul::vec_shape::Reduce;

    fn shape(lanes: u32, group_rows: u32) -> VecShape {
        VecShape {
            lanes,
            group_rows,
            chunked: true,
            reduce: Reduce::Serial,
            workgroup: 8,
        }
    }

    #[test]
    fn only_one_lane_over_whole_tiles_of_a_tiled_format_reads_tiles() {
        for dtype in crate::kernels::weights::GPU_DTYPES {
            let fmt = GpuFormat::of(dtype).unwrap();
            let tiled = matches!(
                dtype,
                GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0
            );
            assert_eq!(tiles(fmt, shape(1, 16)), tiled, "{dtype}: two tiles");
            assert_eq!(tiles(fmt, shape(1, 8)), tiled, "{dtype}: one tile");
            assert!(!tiles(fmt, shape(8, 16)), "{dtype}: lane groups");
            assert!(!tiles(fmt, shape(1, 12)), "{dtype}: a tile and a half");
        }
    }

    #[test]
    fn the_body_reads_each_rows_own_scale_words() {
        // Q5_0 has both. Row 13 is row 5 of the second tile: its f16 is the
        // high half of that tile's d16 word 2 (z), its aux word the second
        // vec4's second (y).
        let fmt = GpuFormat::of(GgmlType::Q5_0).unwrap();
        assert_eq!(fmt.scale_tile, 8, "the names below are for tiles of 8");
        let q5 = body(fmt, 16, 1);
        assert!(
            q5.contains("let tile1 = min(group_row0 + 8u, p.rows - 1u) / SCALE_TILE;"),
            "{q5}"
        );
        assert!(
            q5.contains(
                "a13_0 += dot_x_scaled(min(group_row0 + 13u, p.rows - 1u), s, x0, \
                 unpack2x16float(d1_0.z).y, aux1_1.y);"
            ),
            "{q5}"
        );
        assert_eq!(q5.matches("dot_x_scaled").count(), 16);
        assert_eq!(q5.matches("partial[").count(), 16);
        assert_eq!(body(fmt, 8, 1).matches("dot_x_scaled").count(), 8);
        // Three token rows: each (row, token) its own sum, each token's x
        // loaded once a step.
        let three = body(fmt, 8, 3);
        assert_eq!(three.matches("dot_x_scaled").count(), 24);
        assert_eq!(three.matches("step_x(").count(), 3);
        assert!(
            three.contains("a7_2 += dot_x_scaled(min(group_row0 + 7u, p.rows - 1u), s, x2,"),
            "{three}"
        );
        assert!(
            three.contains("partial[((first_row + 7u) * TOKENS + 2u) * LANES] = a7_2;"),
            "{three}"
        );
        // Q4_1 has no d16, Q8_0 no aux: neither loads what it lacks.
        let q41 = body(GpuFormat::of(GgmlType::Q4_1).unwrap(), 16, 1);
        assert!(
            !q41.contains("d16_base") && q41.contains("aux1_1.w"),
            "{q41}"
        );
        let q8 = body(GpuFormat::of(GgmlType::Q8_0).unwrap(), 16, 1);
        assert!(
            !q8.contains("aux_base") && q8.contains("(d1_0.w).y, 0u"),
            "{q8}"
        );
    }
}
