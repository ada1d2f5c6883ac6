// load_probe.wgsl's body for f32 weights: vec4 i of the row-major matrix.

const K4: u32 = {{K4}}u; // vec4s a row

fn w_at(i: u32) -> vec4<f32> {
    return {{W_VEC4}};
}

fn row_sums(row0: u32) -> array<f32, LANE_ROWS> {
    var acc: array<vec4<f32>, LANE_ROWS>;
    for (var i = 0u; i < K4; i++) {
        let xv = x[i];
{{ROW_STEPS}}
    }
    var sums: array<f32, LANE_ROWS>;
    for (var j = 0u; j < LANE_ROWS; j++) {
        sums[j] = dot(acc[j], vec4<f32>(1.0));
    }
    return sums;
}
