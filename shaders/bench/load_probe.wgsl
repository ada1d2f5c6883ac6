// A plain GEMV, y = W x, that reads its weights and x through the binding
// kinds kernels::load_probe names: weights from a storage buffer or a 2-D
// texture (vec4 i of the stored matrix at texel (i mod 2^WIDTH_SHIFT,
// i >> WIDTH_SHIFT)), x from a storage or a uniform buffer. Everything else
// is the same on every path, so their times compare the loads alone. Each
// invocation takes LANE_ROWS rows and loads x once for all of them. Then
// the format's body: load_probe_f32.wgsl or load_probe_q4.wgsl.

const ROWS: u32 = {{ROWS}}u;
const WIDTH_SHIFT: u32 = {{WIDTH_SHIFT}}u;
const LANE_ROWS: u32 = {{LANE_ROWS}}u;

{{W_DECL}}
{{X_DECL}}
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

fn texel(i: u32) -> vec2<u32> {
    return vec2<u32>(i & ((1u << WIDTH_SHIFT) - 1u), i >> WIDTH_SHIFT);
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.x * LANE_ROWS;
    if (row0 >= ROWS) {
        return;
    }
    // Rows past the matrix repeat its last; their sums are not stored.
    let acc = row_sums(row0);
    for (var j = 0u; j < LANE_ROWS; j++) {
        if (row0 + j < ROWS) {
            y[row0 + j] = acc[j];
        }
    }
}
