// Split ("flash-decoding") attention for decode steps: the visible keys of a
// row are cut into spans of up to SPAN positions, and each workgroup scores
// one span for up to HG query heads of one GQA group at once, so those heads
// share each read of their KV head, and a long context runs on many
// workgroups instead of one per head. Each workgroup leaves, per query head,
// its span's max score m, sum of weights l = sum exp(s - m) and unnormalised
// output acc = sum exp(s - m) v in `part`; attention_merge.wgsl then
// combines the spans (out = sum e^(m_s - M) acc_s / sum e^(m_s - M) l_s, M
// the largest m_s). With one split the workgroup writes out directly.
//
// Masking and softcap as attention.wgsl: row r at pos = pos0 + r sees keys
// lo ..= pos (lo = 0, or pos - W + 1 with a sliding window W), cut by its
// own plan (split_of_row: span and splits, as a decode step at pos is cut);
// split s covers lo + s * span .. min(lo + (s + 1) * span, pos + 1). A
// row with fewer splits than the dispatch's p.splits leaves the rest at
// once; with one split it writes out directly.
//
// Per workgroup: four barriers, none inside a loop (the span is scored in
// one pass): q in, scores and local maxima out, per-head max, weights and
// local sums out. The 4 heads' dot products are accumulated together so that
// each vec4 of K is loaded once for all of them.
// part: [rows][q_heads][p.splits][head_dim] accumulators, then
// [rows][q_heads][p.splits][2] (m, l); a row uses its first splits.
// Sources: attention_common.wgsl, this file.
// Dispatch: [kv_heads * ceil(group / HG), splits, rows].

const WG: u32 = 64u;      // invocations per workgroup
const SPAN: u32 = 256u;   // most keys per split (kernels::attention::SPLIT_SPAN)
const HG: u32 = 4u;       // most query heads per workgroup (SPLIT_HEADS)
const D4_MAX: u32 = 64u;  // head_dim <= 256

@group(0) @binding(5) var<storage, read_write> part: array<f32>;

var<workgroup> sh_q: array<vec4<f32>, HG * D4_MAX>;  // [head][d4]: q times scale
var<workgroup> sh_s: array<f32, HG * SPAN>;           // [head][key]: scores, then weights
var<workgroup> sh_r: array<f32, HG * WG>;             // [head][lane]: local maxima, then sums
var<workgroup> sh_m: array<f32, HG>;                  // per-head max of the span

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let chunks = (p.group + HG - 1u) / HG;
    let kvh = wid.x / chunks;
    let h0 = kvh * p.group + (wid.x % chunks) * HG;   // first query head here
    let nh = min(HG, (kvh + 1u) * p.group - h0);      // query heads here
    let split = wid.y;
    let row = wid.z;
    let plan = split_of_row(row);
    if (split >= plan.y) {
        return; // the row's splits end here: uniform (workgroup ids)
    }
    let pos = p.pos0 + row;
    var lo = 0u;
    if (p.window != 0u && pos + 1u > p.window) {
        lo = pos + 1u - p.window;
    }
    let k0 = lo + split * plan.x;
    var n = 0u;                                       // keys in this split
    if (k0 <= pos) {
        n = min(plan.x, pos + 1u - k0);
    }
    let d4 = p.head_dim / 4u;
    let kv_stride = p.kv_heads * d4;
    let kv_base = p.kv_offset / 4u + kvh * d4 + k0 * kv_stride;

    // Heads past nh keep zeros (workgroup memory starts zeroed): their
    // scores are computed and never read.
    for (var i = lid; i < nh * d4; i += WG) {
        let qb = p.q_offset + (row * p.q_heads + h0) * p.head_dim + i * 4u;
        sh_q[(i / d4) * D4_MAX + i % d4] = vec4(q[qb], q[qb + 1u], q[qb + 2u], q[qb + 3u]) * p.scale;
    }
    workgroupBarrier();

    var mx = vec4(NEG_BIG);
    for (var j = lid; j < n; j += WG) {
        let kb = kv_base + j * kv_stride;
        var d0 = vec4(0.0);
        var d1 = vec4(0.0);
        var d2 = vec4(0.0);
        var d3 = vec4(0.0);
        for (var i = 0u; i < d4; i++) {
            let k = load_k(kb + i);
            d0 += sh_q[i] * k;
            d1 += sh_q[D4_MAX + i] * k;
            d2 += sh_q[2u * D4_MAX + i] * k;
            d3 += sh_q[3u * D4_MAX + i] * k;
        }
        var s = vec4(
            d0.x + d0.y + d0.z + d0.w,
            d1.x + d1.y + d1.z + d1.w,
            d2.x + d2.y + d2.z + d2.w,
            d3.x + d3.y + d3.z + d3.w,
        );
        if (p.use_softcap != 0u) {
            s = p.softcap * tanh(clamp(s / p.softcap, vec4(-15.0), vec4(15.0)));
        }
        for (var g = 0u; g < nh; g++) {
            sh_s[g * SPAN + j] = s[g];
        }
        mx = max(mx, s);
    }
    for (var g = 0u; g < nh; g++) {
        sh_r[g * WG + lid] = mx[g];
    }
    workgroupBarrier();

    if (lid < nh) {
        var m = NEG_BIG;
        for (var i = 0u; i < WG; i++) {
            m = max(m, sh_r[lid * WG + i]);
        }
        sh_m[lid] = m;
    }
    workgroupBarrier();

    var sums = vec4(0.0);
    for (var j = lid; j < n; j += WG) {
        for (var g = 0u; g < nh; g++) {
            let w = exp(sh_s[g * SPAN + j] - sh_m[g]);
            sh_s[g * SPAN + j] = w;
            sums[g] += w;
        }
    }
    for (var g = 0u; g < nh; g++) {
        sh_r[g * WG + lid] = sums[g];
    }
    workgroupBarrier();

    for (var o = lid; o < nh * d4; o += WG) {
        let g = o / d4;
        let c = o % d4;
        var acc = vec4(0.0);
        for (var j = 0u; j < n; j++) {
            acc += sh_s[g * SPAN + j] * load_v(kv_base + j * kv_stride + c);
        }
        var l = 0.0;
        for (var i = 0u; i < WG; i++) {
            l += sh_r[g * WG + i];
        }
        let rh = row * p.q_heads + h0 + g;
        if (plan.y == 1u) {
            // One split holds every visible key, the query's own among them:
            // l >= 1 (the max weighs exp(0)).
            let ob = p.out_offset + rh * p.head_dim + c * 4u;
            let y = acc / l;
            out[ob] = y.x;
            out[ob + 1u] = y.y;
            out[ob + 2u] = y.z;
            out[ob + 3u] = y.w;
        } else {
            let slot = rh * p.splits + split;
            let pb = slot * p.head_dim + c * 4u;
            part[pb] = acc.x;
            part[pb + 1u] = acc.y;
            part[pb + 2u] = acc.z;
            part[pb + 3u] = acc.w;
            if (c == 0u) {
                let mb = p.rows * p.q_heads * p.splits * p.head_dim + slot * 2u;
                part[mb] = sh_m[g];
                part[mb + 1u] = l;
            }
        }
    }
}
