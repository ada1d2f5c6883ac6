// Entry point of the vec4 matrix-vector matmul over a plain matrix: one token
// row. Dispatch: ceil(rows / ROWS) workgroups, folded over x and y past 65535.

// x is read as it is: vec4 j of the row whose first vec4 is base4.
fn x_vec(base4: u32, j: u32) -> vec4<f32> {
    return x[base4 + j];
}

fn stash_lane(lid: u32) {}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    #if SG
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(num_subgroups) sg_count: u32,
    #endif
) {
    #if SG
    sg = vec4<u32>(sg_lane, sg_size, sg_id, sg_count);
    #endif
    let row0 = (wid.x + wid.y * groups.x) * ROWS;
    if (row0 >= p.rows) {
        return; // whole workgroup: uniform
    }
    gemv(lid, row0, 0u, p.x_offset, p.out_offset);
}
