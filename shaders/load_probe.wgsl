// A plain F32 GEMV, y = W x, that reads its weights and x through the
// binding kinds kernels::load_probe names: weights from a storage buffer or
// from an rgba32float texture (vec4 i of the row-major matrix at texel
// (i mod 2^WIDTH_SHIFT, i >> WIDTH_SHIFT)), x from a storage or a uniform
// buffer. Everything else is the same in all four, so their times compare
// the loads alone. Each invocation takes LANE_ROWS rows and loads each
// vec4 of x once for all of them.

const K4: u32 = {{K4}}u;    // vec4s a row
const ROWS: u32 = {{ROWS}}u;
const WIDTH_SHIFT: u32 = {{WIDTH_SHIFT}}u;
const LANE_ROWS: u32 = {{LANE_ROWS}}u;

{{W_DECL}}
{{X_DECL}}
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

fn w_at(i: u32) -> vec4<f32> {
    return {{W_LOAD}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.x * LANE_ROWS;
    if (row0 >= ROWS) {
        return;
    }
    // Rows past the matrix repeat its last; their sums are not stored.
    var acc: array<vec4<f32>, LANE_ROWS>;
    for (var i = 0u; i < K4; i++) {
        let xv = x[i];
{{ROW_STEPS}}
    }
    for (var j = 0u; j < LANE_ROWS; j++) {
        if (row0 + j < ROWS) {
            y[row0 + j] = dot(acc[j], vec4<f32>(1.0));
        }
    }
}
