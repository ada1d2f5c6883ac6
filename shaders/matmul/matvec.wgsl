// Matrix-vector core over whole-vec4 loads, for a few token rows (decode,
// and a verifying pass's rows: kernels::matmul::linear's per-row form):
// every quantized format in the GPU layout (quant.wgsl), and F32/F16 rows
// of whole 16-element units. Same contract as matmul_gemv.wgsl's core
// (gemv_partials / row_sum / gemv), so the same entry points run on it.
//
// A row is cut into steps of STEP elements (a block, or a quarter of a
// K-quant block). A step's x values are XV vec4s in two runs of XV / 2
// (runs_vec_FMT: where each starts, in vec4s from the row start); each
// lane loads them once and dots them with the step of all ROWS weight rows
// (the reader's dot_x: dot_step_FMT of quant_vec{16,32,64}.wgsl over f32
// values, or dot_i8_FMT over 8-bit x), whose quants it reads as vec4s.
// Each of the first p.m <= TOKENS token rows (x rows p.k elements apart)
// gets its own sums, accumulated step by step exactly as with TOKENS 1, so
// a row's result is bit for bit the one-row kernel's whatever the token
// count; the sums of rows past p.m are neither computed nor stored.
// Which lane takes which steps: on a GPU adjacent lanes take adjacent steps
// (coalesced reads); on a CPU adapter (CHUNKED) each lane takes one
// contiguous run of steps, since a CPU runs one SIMD batch of lanes through
// the whole loop before the next, and interleaved steps would make each
// batch stride through memory.
// Sources: quant.wgsl, matmul_params.wgsl, vec_consts.wgsl, this file,
// matvec_tile.wgsl, quant_vec{16,32,64}.wgsl, an x reader (step_x, dot_x
// and dot_x_scaled, with the type StepX they share: matvec_step_f32.wgsl
// with matvec_x_f32.wgsl or linear_x_q8.wgsl, or linear_x_q8_dot4.wgsl
// alone), then an entry point.

{{WEIGHT_WORDS}}
// Binding 2, x, is declared by the x reader (matvec_x_f32.wgsl,
// linear_x_q8.wgsl, linear_x_q8_dot4.wgsl).
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
{{WEIGHT_VEC4S}}

const WG: u32 = {{WG}}u; // a multiple of LANES
const LANES: u32 = {{LANES}}u;
const GROUP_ROWS: u32 = {{GROUP_ROWS}}u;
const ROWS: u32 = GROUP_ROWS * (WG / LANES); // rows a workgroup
const TOKENS: u32 = {{TOKENS}}u; // token rows a workgroup
const CHUNKED: bool = {{CHUNKED}};
// One lane over whole scale tiles of rows (matvec_tile.wgsl), for the
// shapes and formats kernels::matvec_tile::tiles names.
const TILE_CORE: bool = {{TILE_CORE}};
// Lanes that between them load each x element once: one group.
const X_LANES: u32 = LANES;

// Lane j's sum of workgroup row r for token t at partial[i * LANES + j],
// i = r * TOKENS + t (the sum's index, as row_sum takes it).
var<workgroup> partial: array<f32, ROWS * TOKENS * LANES>;
// The token row whose x the reader is loading (linear_x_vec.wgsl keeps
// statistics of each token row's x).
var<private> x_token: u32;

// How a row's LANES partial sums become one (kernels::matmul_variants::
// Reduce): 0 the storing lane adds them (row_sum), 1 a tree in workgroup
// memory, 2 subgroups; 1 and 2 leave row i's sum in partial[i * LANES].
const REDUCE: u32 = {{REDUCE}}u;
// The entry point's subgroup builtins when REDUCE is 2: (invocation id in
// the subgroup, subgroup size, subgroup id, subgroups in the workgroup).
var<private> sg: vec4<u32>;

fn gemv_partials(lid: u32, row0: u32, w_row0: u32, x_base: u32) {
    let lane = lid % LANES;
    let group_row0 = row0 + (lid / LANES) * GROUP_ROWS;
    let steps = p.k / STEP;
    let per = (steps + LANES - 1u) / LANES;
    let first = select(lane, lane * per, CHUNKED);
    let end = select(steps, min(first + per, steps), CHUNKED);
    let stride = select(LANES, 1u, CHUNKED);
    let base4 = x_base / 4u;
    if (TILE_CORE) {
        tile_partials(lid, w_row0 + group_row0, first, end, base4);
    } else {
        var acc: array<f32, GROUP_ROWS * TOKENS>;
        for (var s = first; s < end; s += stride) {
            for (var t = 0u; t < TOKENS; t++) {
                if (t >= p.m) {
                    break; // a short slice: uniform
                }
                x_token = t;
                let x = step_x(base4 + t * (p.k / 4u), s);
                for (var r = 0u; r < GROUP_ROWS; r++) {
                    // Rows past the part repeat its last row; their sums are dropped.
                    acc[r * TOKENS + t] += dot_x(w_row0 + min(group_row0 + r, p.rows - 1u), s, x);
                }
            }
        }
        let first_row = (lid / LANES) * GROUP_ROWS;
        for (var i = 0u; i < GROUP_ROWS * TOKENS; i++) {
            partial[(first_row * TOKENS + i) * LANES + lane] = acc[i];
        }
    }
    stash_lane(lid);
    workgroupBarrier();
}

// After gemv_partials: with REDUCE 1 or 2, every row's sum into its first
// slot, then a barrier. Workgroup-uniform control flow: call it from all lanes.
fn reduce_rows(lid: u32) {
    if (REDUCE == 1u) {
        for (var s = LANES / 2u; s > 0u; s >>= 1u) {
            for (var i = lid; i < ROWS * TOKENS * s; i += WG) {
                let at = (i / s) * LANES + i % s;
                partial[at] += partial[at + s];
            }
            workgroupBarrier();
        }
    }
    if (REDUCE == 2u) {
        reduce_rows_subgroups();
        workgroupBarrier();
    }
}

// Subgroup g sums sums g, g + subgroups, ... (of rows and tokens): its invocations each add a
// stride of the row's partials, then subgroupAdd joins them. The loop's
// bounds are the same across a subgroup, so every invocation of it reaches
// each subgroupAdd.
fn reduce_rows_subgroups() {
    #if SG
    for (var i = sg.z; i < ROWS * TOKENS; i += sg.w) {
        var v = 0.0;
        for (var j = sg.x; j < LANES; j += sg.y) {
            v += partial[i * LANES + j];
        }
        let total = subgroupAdd(v);
        if (sg.x == 0u) {
            partial[i * LANES] = total;
        }
    }
    #endif
}

// The whole dot product of workgroup row r for token t, i = r * TOKENS + t.
fn row_sum(i: u32) -> f32 {
    if (REDUCE != 0u) {
        return partial[i * LANES];
    }
    var sum = 0.0;
    for (var j = 0u; j < LANES; j++) {
        sum += partial[i * LANES + j];
    }
    return sum;
}

// gemv_partials, then each sum stored to out[out_base + t * out_stride + row].
fn gemv(lid: u32, row0: u32, w_row0: u32, x_base: u32, out_base: u32) {
    gemv_partials(lid, row0, w_row0, x_base);
    reduce_rows(lid);
    for (var i = lid; i < ROWS * TOKENS; i += WG) {
        let r = i / TOKENS;
        let t = i % TOKENS;
        if (row0 + r < p.rows && t < p.m) {
            out[out_base + t * p.out_stride + row0 + r] = row_sum(i);
        }
    }
}
