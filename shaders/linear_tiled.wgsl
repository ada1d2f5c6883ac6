// Entry point of the fused linear layer, many-token form (prefill): the
// register-blocked matmul over p.m consecutive token rows with the store and
// add epilogues of linear_gemv.wgsl (bias included). The norm prologue and
// the glu epilogue are separate dispatches in this form (kernels::linear):
// a tile's invocation sees only part of a row, so it cannot normalise it.
// Sources: quant.wgsl, matmul_common.wgsl, matmul_tiled.wgsl, this file.
{{BIAS}}@group(0) @binding({{BIAS_BINDING}}) var<storage, read> bias: array<f32>; // [bias_offset + rows]
// Dispatch: [ceil(rows / (64 / TT * TN)), ceil(m / (TT * TM)), 1].

fn x_base(tok: u32) -> u32 {
    return p.x_offset + tok * p.k;
}

fn out_base(tok: u32) -> u32 {
    return p.out_offset + tok * p.out_stride;
}

fn emit(i: u32, row: u32, v: f32) {
    var s = v;
{{BIAS}}    s += bias[p.bias_offset + row];
{{ADD}}    s += out[i];
    out[i] = s;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    tiled(lid, wid.x, wid.y, p.m, 0u);
}
