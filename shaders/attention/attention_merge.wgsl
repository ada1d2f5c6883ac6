// Merges the splits of attention_split.wgsl: for each (row, query head,
// vec4 of the head), with M the largest of the row's splits' maxima m_s,
// out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s over the row's own
// splits (split_of_row); a row of one split was written by the split
// kernel. Every split holds a key, the last one the row's own, so the
// denominator is >= 1.
// Sources: attention_common.wgsl, this file.
// Dispatch: [ceil(rows * q_heads * head_dim / 4 / 64), 1, 1].

@group(0) @binding(5) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let d4 = p.head_dim / 4u;
    if (gid.x >= p.rows * p.q_heads * d4) {
        return;
    }
    let rh = gid.x / d4;                // row * q_heads + head
    let c = gid.x % d4;
    let splits = split_of_row(rh / p.q_heads).y;
    if (splits == 1u) {
        return;
    }
    let mb = p.rows * p.q_heads * p.splits * p.head_dim + rh * p.splits * 2u;
    var big = NEG_BIG;
    for (var s = 0u; s < splits; s++) {
        big = max(big, part[mb + s * 2u]);
    }
    var l = 0.0;
    var acc = vec4(0.0);
    for (var s = 0u; s < splits; s++) {
        let w = exp(part[mb + s * 2u] - big);
        l += w * part[mb + s * 2u + 1u];
        let pb = (rh * p.splits + s) * p.head_dim + c * 4u;
        acc += w * vec4(part[pb], part[pb + 1u], part[pb + 2u], part[pb + 3u]);
    }
    let y = acc / l;
    let ob = p.out_offset + rh * p.head_dim + c * 4u;
    out[ob] = y.x;
    out[ob + 1u] = y.y;
    out[ob + 2u] = y.z;
    out[ob + 3u] = y.w;
}
