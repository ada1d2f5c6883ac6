// Bidirectional (encoder) attention over a batch of padded sequences: every
// query row of sequence s sees every key of s that is not padding, before and
// after it (no causal mask), and nothing of other sequences. BERT-style
// embedding models read a whole input at once, so there is no KV cache: q, k
// and v are columns of one projection's output rows. With grouped queries q
// head h reads k/v head h / (heads / kv_heads); with a window w > 0 query i
// sees only keys j with |i - j| < w (EmbeddingGemma's local layers).
//
// Layout: token t = s * seq_len + i (i < seq_len; rows i >= lens[s] are
// padding). Row t of qkv holds q, k and v at columns q_col, k_col, v_col,
// q [heads][head_dim], k and v [kv_heads][head_dim]. One invocation per (token, head), keys in turn
// with an online softmax (running max, rescaled sum and accumulator) in
// registers: no workgroup memory and no barriers, which suits short inputs
// (an embedding input is at most a few hundred tokens) and CPU adapters.
// Padded query rows are written as zeros so that nothing downstream reads
// uninitialised values. The statements per vec4 of a head (LOAD_Q, DOT_K,
// ADD_V, STORE) are written out HD4 times by kernels::attention_bidir rather
// than looped: llvmpipe ends a shader's loops after 65535 iterations in all,
// and loops over a 256-wide head inside the loop over ~500 keys reached
// that, silently dropping the last keys. Only the key loop stays a loop.

const WG: u32 = 64u;
const NEG_BIG: f32 = -3.0e38; // finite stand-in for -infinity

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;     // [seqs * seq_len * row_stride / 4]
@group(0) @binding(2) var<storage, read> lens: array<u32>;          // [seqs]: unpadded lengths, each in 1 ..= seq_len
@group(0) @binding(3) var<storage, read_write> out: array<f32>;     // [out_offset + seqs * seq_len * heads * head_dim]

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let idx = gid.x + gid.y * groups.x * WG;
    let tokens = p.seqs * p.seq_len;
    if (idx >= tokens * p.heads) {
        return;
    }
    let t = idx / p.heads;
    let h = idx % p.heads;
    let s = t / p.seq_len;
    let len = min(lens[s], p.seq_len);
    let ob = p.out_offset + (t * p.heads + h) * p.head_dim;
    if (t - s * p.seq_len >= len) {
        for (var d = 0u; d < p.head_dim; d++) {
            out[ob + d] = 0.0;
        }
        return;
    }
    let stride4 = p.row_stride / 4u;
    let head4 = h * {{HD4}}u;
    let kv_head4 = (h / (p.heads / p.kv_heads)) * {{HD4}}u;
    var q: array<vec4<f32>, {{HD4}}>;
    let qb = t * stride4 + p.q_col / 4u + head4;
    {{LOAD_Q}}
    var acc: array<vec4<f32>, {{HD4}}>;
    var m = NEG_BIG;
    var l = 0.0;
    let first = s * p.seq_len;
    // Keys j0 .. j1 (exclusive): all of the sequence, or those less than
    // `window` positions from the query on either side.
    let i = t - first;
    var j0 = 0u;
    var j1 = len;
    if (p.window > 0u) {
        j0 = select(0u, i + 1u - p.window, i + 1u > p.window);
        j1 = min(len, i + p.window);
    }
    for (var j = j0; j < j1; j++) {
        let kb = (first + j) * stride4 + p.k_col / 4u + kv_head4;
        var dot4 = vec4(0.0);
        {{DOT_K}}
        let score = dot4.x + dot4.y + dot4.z + dot4.w;
        let m_new = max(m, score);
        // On the first key m is NEG_BIG and l, acc are 0: the clamp keeps
        // exp's argument in range.
        let alpha = exp(max(m - m_new, -80.0));
        let wgt = exp(score - m_new);
        m = m_new;
        l = l * alpha + wgt;
        let vb = (first + j) * stride4 + p.v_col / 4u + kv_head4;
        {{ADD_V}}
    }
    // l >= 1: the key holding the max contributes exp(0).
    {{STORE}}
}
