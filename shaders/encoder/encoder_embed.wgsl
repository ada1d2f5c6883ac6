// BERT's input embedding for a batch of padded sequences: token t = s *
// seq_len + i gets word[ids[t]] + position[i] + token_type[type_row]
// (absolute, learned positions; one token type for the whole batch:
// sentence-transformers gives every token of a single input type 0). The
// LayerNorm after it is layer_norm.wgsl's. One invocation per element.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;         // [tokens]
@group(0) @binding(2) var<storage, read> word: array<f32>;        // [vocab][dim]
@group(0) @binding(3) var<storage, read> position: array<f32>;    // [>= seq_len][dim]
@group(0) @binding(4) var<storage, read> token_type: array<f32>;  // [> type_row][dim]
@group(0) @binding(5) var<storage, read_write> out: array<f32>;   // [tokens][dim]

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.tokens * p.dim) {
        return;
    }
    let t = i / p.dim;
    let c = i % p.dim;
    var id = ids[t];
    if (id >= p.vocab) {
        id = 0u;
    }
    out[i] = word[id * p.dim + c] + position[(t % p.seq_len) * p.dim + c]
        + token_type[p.type_row * p.dim + c];
}
