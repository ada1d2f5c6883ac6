// Entry point of the many-token matmul over a plain matrix: p.m consecutive
// token rows.
// Dispatch: [ceil(rows / (WG / TT * TN)), ceil(m / (TT * TM)), 1].

fn x_base(tok: u32) -> u32 {
    return p.x_offset + tok * p.k;
}

fn out_base(tok: u32) -> u32 {
    return p.out_offset + tok * p.out_stride;
}

// A result is stored as it is.
fn emit(i: u32, row: u32, v: f32) {
    out[i] = v;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    tiled(lid, wid.x, wid.y, p.m, 0u);
}
