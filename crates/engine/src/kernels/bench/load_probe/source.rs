//! The load probe's WGSL: load_probe.wgsl, then its format's body, with
//! the binding declarations and loads of the path it times.

use std::borrow::Cow;

use super::{LoadPath, ProbeFormat, WeightsIn, XIn, LANE_ROWS, WORKGROUP};
use crate::gpu::wgsl::{assemble, Define, WgslAssemblyError};

/// load_probe.wgsl and `format`'s body for `path`, the row steps written
/// out (a run-time index into the accumulators would put them in memory on
/// CPU adapters).
pub(super) fn probe_source(
    format: ProbeFormat,
    path: LoadPath,
    rows: usize,
    cols: usize,
    width: u32,
) -> Result<String, WgslAssemblyError> {
    // Each body's own defines: the f32 one's row length in vec4s, the Q4
    // one's in blocks and its word reader.
    let (texel_type, body, step, own) = match format {
        ProbeFormat::F32 => (
            "f32",
            include_str!("../../../../../../shaders/bench/load_probe_f32.wgsl"),
            "acc[J] += w_at(min(row0 + Ju, ROWS - 1u) * K4 + i) * xv;",
            [("K4", (cols / 4).to_string())].to_vec(),
        ),
        ProbeFormat::Q4 => (
            "u32",
            include_str!("../../../../../../shaders/bench/load_probe_q4.wgsl"),
            "acc[J] += block_dot(min(row0 + Ju, ROWS - 1u), b, xs, xsum);",
            [("NB", (cols / 32).to_string())].to_vec(),
        ),
    };
    let (w_decl, w_vec4, w_word) = match path.weights {
        WeightsIn::StorageBuffer => (
            format!("@group(0) @binding(0) var<storage, read> w: array<vec4<{texel_type}>>;"),
            "w[i]",
            "w[i >> 2u][i & 3u]",
        ),
        WeightsIn::Texture => (
            format!("@group(0) @binding(0) var w: texture_2d<{texel_type}>;"),
            "textureLoad(w, texel(i), 0)",
            "w4_at(i >> 2u)[i & 3u]",
        ),
    };
    let x_decl = match path.x {
        XIn::StorageBuffer => {
            "@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;".to_string()
        }
        XIn::Uniform => format!(
            "@group(0) @binding(1) var<uniform> x: array<vec4<f32>, {}>;",
            cols / 4
        ),
    };
    let steps: String = (0..LANE_ROWS)
        .map(|j| format!("        {}\n", step.replace('J', &j.to_string())))
        .collect();
    let mut defines = own;
    defines.extend([
        ("ROWS", rows.to_string()),
        ("WIDTH_SHIFT", width.trailing_zeros().to_string()),
        ("LANE_ROWS", LANE_ROWS.to_string()),
        ("WG", WORKGROUP.to_string()),
        ("W_DECL", w_decl),
        ("X_DECL", x_decl),
        ("W_VEC4", w_vec4.to_string()),
        ("ROW_STEPS", steps.trim_end().to_string()),
    ]);
    if format == ProbeFormat::Q4 {
        defines.push(("W_WORD", w_word.to_string()));
    }
    let defines: Vec<Define> = defines
        .into_iter()
        .map(|(name, value)| (name, Cow::Owned(value)))
        .collect();
    let text = [
        include_str!("../../../../../../shaders/bench/load_probe.wgsl"),
        body,
    ]
    .join("\n");
    assemble(&text, &[], &defines)
}
