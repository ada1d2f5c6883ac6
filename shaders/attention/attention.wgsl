// Causal grouped-query attention over the KV cache, for a prefill chunk
// (rows > 1) and a decode step (rows = 1) alike: only the shapes differ.
//
// One workgroup of WG = 64 invocations per (query head h, query row r). The
// row's absolute position is pos = pos0 + r; it attends to the cache's keys
// lo ..= pos, where lo = 0, or with a sliding window W, lo = max(0, pos-W+1):
// the last W positions including its own (llama.cpp's LLAMA_SWA_TYPE_STANDARD:
// key k is masked when pos - k >= W). Keys past pos (later rows of this chunk,
// slots not yet written) are never read, so garbage there cannot leak.
//
// Softmax is online (flash-style) over tiles of up to TILE keys, all of a
// tile's scores kept in workgroup memory. Per tile:
//   1. invocation i scores keys i, i + WG, ... of the tile (whole dot products:
//      keys are split across invocations, so a long context runs in parallel
//      within the group) and publishes the largest of them;
//   2. barrier; everyone takes the new running max from the 64 published
//      maxima (the same value in every invocation) and turns its own scores
//      into weights exp(s - max), adding them to its own partial sum;
//   3. barrier; the group splits into G = WG / (head_dim / 4) key groups of
//      head_dim / 4 invocations; each invocation accumulates one vec4 of the
//      output over every G-th key of the tile (after rescaling its partial
//      sums by exp(old max - new max)).
// At the end the G partial accumulators and the 64 partial sums are added
// through workgroup memory. Two barriers per tile of up to 512 keys: the
// scores are double-buffered, so step 1 of the next tile cannot overwrite the
// weights a slow invocation still reads in step 3 of this one (the maxima need
// no second buffer: their last reads end before the step-2 barrier).
// Barriers are expensive on CPU implementations: on lavapipe, an earlier
// version with two barriers per 64 keys spent about half its time in them,
// hence tiles of 512.
// Sources: attention_common.wgsl, this file.

const WG: u32 = 64u;      // invocations per workgroup
const TILE: u32 = 512u;   // keys per tile

var<workgroup> sh_q: array<vec4<f32>, WG>;    // the query row times scale
var<workgroup> sh_s: array<f32, 2u * TILE>;   // a tile's scores, then weights; double-buffered
var<workgroup> sh_m: array<f32, WG>;          // each invocation's largest score in the tile
var<workgroup> sh_acc: array<vec4<f32>, WG>;  // final merge of the partial accumulators
var<workgroup> sh_l: array<f32, WG>;          // final merge of the partial sums

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let row = wid.y;
    let pos = p.pos0 + row;
    var lo = 0u;
    if (p.window != 0u && pos + 1u > p.window) {
        lo = pos + 1u - p.window;
    }
    let d4 = p.head_dim / 4u;           // vec4s per head row
    let groups = WG / d4;               // key groups in step 3
    let dv = lid % d4;                  // this invocation's output vec4 in step 3
    let kg = lid / d4;                  // and its key group (idle if >= groups)
    let kv_stride = p.kv_heads * d4;    // vec4s from one position to the next
    let kv_base = p.kv_offset / 4u + (h / p.group) * d4;
    let head_base = (row * p.q_heads + h) * p.head_dim;

    if (lid < d4) {
        let qb = p.q_offset + head_base + lid * 4u;
        sh_q[lid] = vec4(q[qb], q[qb + 1u], q[qb + 2u], q[qb + 3u]) * p.scale;
    }
    workgroupBarrier();

    var m = NEG_BIG;          // running max of the scores (same in every invocation)
    var l = 0.0;              // partial sum of this invocation's weights
    var acc = vec4(0.0);      // partial sum of weight * v for (dv, key group kg)
    var buf = 0u;
    // Loop bounds depend only on the uniform and the workgroup id, so every
    // barrier below is reached by the whole group.
    for (var k0 = lo; k0 <= pos; k0 += TILE) {
        let n = min(TILE, pos + 1u - k0); // keys in this tile
        let sb = buf * TILE;
        var my_max = NEG_BIG;
        for (var j = lid; j < n; j += WG) {
            let kb = kv_base + (k0 + j) * kv_stride;
            var dot4 = vec4(0.0);
            for (var i = 0u; i < d4; i++) {
                dot4 += sh_q[i] * load_k(kb + i);
            }
            var s = dot4.x + dot4.y + dot4.z + dot4.w;
            if (p.use_softcap != 0u) {
                // tanh saturates to +-1 in f32 well before |x| = 15; the clamp
                // keeps exp-based tanh implementations away from inf / inf.
                s = p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0));
            }
            sh_s[sb + j] = s;
            my_max = max(my_max, s);
        }
        sh_m[lid] = my_max;
        workgroupBarrier();

        var m_new = m;
        for (var i = 0u; i < WG; i++) {
            m_new = max(m_new, sh_m[i]);
        }
        // On the first tile m is NEG_BIG and l, acc are 0: the clamp keeps the
        // exp argument in range (alpha is then ~1e-35 times zero).
        let alpha = exp(max(m - m_new, -80.0));
        m = m_new;
        l *= alpha;
        for (var j = lid; j < n; j += WG) {
            let w = exp(sh_s[sb + j] - m);
            sh_s[sb + j] = w;
            l += w;
        }
        workgroupBarrier();

        acc *= alpha;
        if (kg < groups) {
            for (var j = kg; j < n; j += groups) {
                acc += sh_s[sb + j] * load_v(kv_base + (k0 + j) * kv_stride + dv);
            }
        }
        buf ^= 1u;
    }

    sh_acc[lid] = acc;
    sh_l[lid] = l;
    workgroupBarrier();
    if (lid < d4) {
        var total = vec4(0.0);
        for (var g = 0u; g < groups; g++) {
            total += sh_acc[g * d4 + lid];
        }
        // The sum is >= 1: the key holding the max contributes exp(0).
        var sum = 0.0;
        for (var i = 0u; i < WG; i++) {
            sum += sh_l[i];
        }
        let o = total / sum;
        let ob = p.out_offset + head_base + lid * 4u;
        out[ob] = o.x;
        out[ob + 1u] = o.y;
        out[ob + 2u] = o.z;
        out[ob + 3u] = o.w;
    }
}
