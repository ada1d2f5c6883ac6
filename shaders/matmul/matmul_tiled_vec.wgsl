// Many-token core of matmul (prefill) over whole-vec4 chunks: the contract
// of matmul_tiled.wgsl's `tiled` (same tiles, same entry points), with
// weights read as the vec4 core reads them. A row is cut into chunks of CV
// vec4s (a 32-element block, 32 elements of a K-quant block from one vec4
// of quants, or 16 F32/F16 elements), whose x is two runs of CV / 2 vec4s
// (chunk_x_FMT); an invocation loads a chunk's x for its TM tokens, then
// decodes the chunk of each of its TN weight rows once (chunk_q_FMT,
// quant_vec*.wgsl) and dots it with all TM. x rows start on a vec4
// (x_offset, k multiples of 4) and are whole chunks long.
// Sources: quant.wgsl, matmul_params.wgsl, vec_consts.wgsl, matmul_tile.wgsl, this file,
// quant_vec{16,32,64}.wgsl, then an entry point (matmul_tiled_main.wgsl,
// linear_tiled.wgsl).

{{WEIGHT_WORDS}}
// x: a storage array, or (kernels::linear on llvmpipe) a uniform window
// of it (kernels::x_window).
@group(0) @binding(2) {{X_DECL}} // [(x_offset + m * k) / 4]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
{{WEIGHT_VEC4S}}

// Token t's dot product with one row's chunk of weights (F32, F16).
fn dot_chunk(ws: array<vec4<f32>, CV>, xs: ptr<function, array<array<vec4<f32>, CV>, TM>>, t: u32) -> f32 {
    var d = 0.0;
    for (var i = 0u; i < CV; i++) {
        d += dot(ws[i], (*xs)[t][i]);
    }
    return d;
}

// Four tokens' (from t0) dot products with one row's chunk of weights.
fn dot_tokens(ws: array<vec4<f32>, CV>, xs: ptr<function, array<array<vec4<f32>, CV>, TM>>, t0: u32) -> vec4<f32> {
    var d = vec4<f32>(0.0);
    for (var i = 0u; i < CV; i++) {
        d += vec4<f32>(dot(ws[i], (*xs)[t0][i]), dot(ws[i], (*xs)[t0 + 1u][i]), dot(ws[i], (*xs)[t0 + 2u][i]), dot(ws[i], (*xs)[t0 + 3u][i]));
    }
    return d;
}

// Quantized chunks: quants q and each run's (a, b) (chunk_q_FMT and
// chunk_ab_FMT): a run's dot product with x is a * dot(q, x) + b * sum(x),
// so the weights are never scaled one by one.

// Token t's dot product with one row's quantized chunk.
fn dot_chunk_scaled(q: array<vec4<f32>, CV>, ab: vec4<f32>, xs: ptr<function, array<array<vec4<f32>, CV>, TM>>, t: u32) -> f32 {
    var d = vec4<f32>(0.0); // run 0's dot and x sum, then run 1's
    for (var i = 0u; i < CV / 2u; i++) {
        let x0 = (*xs)[t][i];
        let x1 = (*xs)[t][i + CV / 2u];
        d += vec4<f32>(dot(q[i], x0), dot(x0, vec4<f32>(1.0)), dot(q[i + CV / 2u], x1), dot(x1, vec4<f32>(1.0)));
    }
    return dot(ab, d);
}

// Four tokens' (from t0) sums of x over the chunk's run from vec4 `first`.
fn run_sums(xs: ptr<function, array<array<vec4<f32>, CV>, TM>>, first: u32, t0: u32) -> vec4<f32> {
    let one = vec4<f32>(1.0);
    var s = vec4<f32>(0.0);
    for (var i = first; i < first + CV / 2u; i++) {
        s += vec4<f32>(dot((*xs)[t0][i], one), dot((*xs)[t0 + 1u][i], one), dot((*xs)[t0 + 2u][i], one), dot((*xs)[t0 + 3u][i], one));
    }
    return s;
}

// Four tokens' (from t0) dot products with one row's quantized chunk,
// given their x sums over each run (run_sums).
fn dot_tokens_scaled(q: array<vec4<f32>, CV>, ab: vec4<f32>, xs: ptr<function, array<array<vec4<f32>, CV>, TM>>,
    sums0: vec4<f32>, sums1: vec4<f32>, t0: u32) -> vec4<f32> {
    var d0 = vec4<f32>(0.0);
    var d1 = vec4<f32>(0.0);
    for (var i = 0u; i < CV / 2u; i++) {
        let j = i + CV / 2u;
        d0 += vec4<f32>(dot(q[i], (*xs)[t0][i]), dot(q[i], (*xs)[t0 + 1u][i]), dot(q[i], (*xs)[t0 + 2u][i]), dot(q[i], (*xs)[t0 + 3u][i]));
        d1 += vec4<f32>(dot(q[j], (*xs)[t0][j]), dot(q[j], (*xs)[t0 + 1u][j]), dot(q[j], (*xs)[t0 + 2u][j]), dot(q[j], (*xs)[t0 + 3u][j]));
    }
    return ab.x * d0 + ab.y * sums0 + ab.z * d1 + ab.w * sums1;
}

// The per-chunk code (X_LOADS, ROW_SUMS, ROW_STEPS, ROW_STORES) comes from
// kernels::tile_shape::row_code: loops over the TN rows adding into one
// array; on lavapipe the rows written out, each row's TM sums a vec4 of its
// own; on other CPU adapters (SwiftShader) everything written out, x's vec4s
// named one by one. CPU adapters' shader compilers keep an array indexed by
// a loop variable in memory, most likely read and written a lane at a time.

// The invocation's lane in its subgroup, where the subgroup shares x
// (kernels::tile_shape::TileShape::x_share): set by the entry point.
var<private> x_lane: u32;

fn tiled(lid: u32, row_group: u32, tok_group: u32, n_tok: u32, w_row0: u32) {
    let origin = tile_origin(lid, row_group, tok_group);
    let row0 = origin.x;
    let tok0 = origin.y;
    if ({{ROW_EXIT}}tok0 >= n_tok) {
        return;
    }
{{ROW_SUMS}}
    let chunks = p.k / (4u * CV);
{{CHUNK_LOOP}}
        let xc = chunk_x_{{FMT}}(c);
        // The weights' chunk: x may hold a range of the rows from chunk
        // first_chunk (kernels::x_ranges), whose chunks are whole blocks.
        let wc = p.first_chunk + c;
{{X_LOADS}}
{{ROW_STEPS}}
{{CHUNK_LOOP_END}}
{{ROW_STORES}}
    emit_tile(&acc, row0, tok0, n_tok);
}
