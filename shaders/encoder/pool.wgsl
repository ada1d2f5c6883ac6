// Pooling of a batch of padded sequences' final hidden rows into one vector
// each (sentence-transformers' Pooling module): the mean over the sequence's
// unpadded tokens, its first token (CLS) or its last unpadded token. One
// invocation per (sequence, column). Normalisation, if the model asks for
// it, happens after the read-back (embedding/pooling.rs).

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [seqs * seq_len][dim]
@group(0) @binding(2) var<storage, read> lens: array<u32>;       // [seqs], each in 1 ..= seq_len
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // [seqs][dim]

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 64u;
    if (i >= p.seqs * p.dim) {
        return;
    }
    let s = i / p.dim;
    let c = i % p.dim;
    let len = clamp(lens[s], 1u, p.seq_len);
    let first = s * p.seq_len;
    var v = 0.0;
    switch p.mode {
        case 0u: {
            for (var t = 0u; t < len; t++) {
                v += x[(first + t) * p.dim + c];
            }
            v /= f32(len);
        }
        case 1u: {
            v = x[first * p.dim + c];
        }
        default: {
            v = x[(first + len - 1u) * p.dim + c];
        }
    }
    out[i] = v;
}
