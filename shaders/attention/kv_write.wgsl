// KV cache write: copies `rows` token rows of K (or V) into one layer's slice
// of the cache at absolute positions pos0 .. pos0 + rows.
//
// Cache layout (see kernels/kv.rs): [layers][ctx_len][kv_heads][head_dim] of
// f32, or of f16 packed two to a u32 word (WORD u32, one invocation a word), so a layer's position p starts at layer_offset + p * row_elems and the
// `rows` rows land contiguously. pos0 comes in the uniform (not baked into a
// copy command) so a decode step only rewrites its parameters.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;          // [src_offset + rows * row_elems]
@group(0) @binding(2) var<storage, read_write> cache: array<{{WORD}}>;  // [layers][ctx_len][kv_heads][head_dim]

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.n) {
        return;
    }
    {{WRITE}}
}
