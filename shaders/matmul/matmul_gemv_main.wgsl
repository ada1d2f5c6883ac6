// Entry point of the matrix-vector matmul over a plain matrix: TOKENS
// consecutive token rows (p.m == TOKENS).
// Dispatch: ceil(rows / ROWS) workgroups, folded over x and y past 65535.

// x is read as it is.
fn x_unit(base: u32, t: u32, e: vec2<u32>, masked: bool) -> Unit {
    return load_x(base, e, masked);
}

fn stash_lane(lid: u32) {}

@compute @workgroup_size(64)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let row0 = (wid.x + wid.y * groups.x) * ROWS;
    if (row0 >= p.rows) {
        return; // whole workgroup: uniform
    }
    gemv(lid, row0, 0u, p.x_offset, p.out_offset);
}
