// load_probe.wgsl's body for 4-bit weights (kernels::load_probe::
// ProbeFormat::Q4): block b of row r is vec4 r * NB + b (byte i's low
// nibble weight i, its high nibble weight i + 16), its f32 scale d word
// SCALES + r * NB + b; a weight is d * (q - 8).

const NB: u32 = {{NB}}u; // blocks a row
const SCALES: u32 = 4u * ROWS * NB; // first scale word

fn w4_at(i: u32) -> vec4<u32> {
    return {{W_VEC4}};
}

fn word_at(i: u32) -> u32 {
    return {{W_WORD}};
}

fn nib_lo(w: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(w, w >> 8u, w >> 16u, w >> 24u) & vec4<u32>(15u));
}

fn nib_hi(w: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(w >> 4u, w >> 12u, w >> 20u, w >> 28u) & vec4<u32>(15u));
}

// Block b of row r dotted with its 32 x values xs; xsum their sum.
fn block_dot(r: u32, b: u32, xs: array<vec4<f32>, 8>, xsum: f32) -> f32 {
    let q = w4_at(r * NB + b);
    let d = bitcast<f32>(word_at(SCALES + r * NB + b));
    let s = dot(nib_lo(q.x), xs[0]) + dot(nib_lo(q.y), xs[1]) + dot(nib_lo(q.z), xs[2]) + dot(nib_lo(q.w), xs[3])
        + dot(nib_hi(q.x), xs[4]) + dot(nib_hi(q.y), xs[5]) + dot(nib_hi(q.z), xs[6]) + dot(nib_hi(q.w), xs[7]);
    return d * (s - 8.0 * xsum);
}

fn row_sums(row0: u32) -> array<f32, LANE_ROWS> {
    var acc: array<f32, LANE_ROWS>;
    for (var b = 0u; b < NB; b++) {
        let at = 8u * b;
        let xs = array<vec4<f32>, 8>(x[at], x[at + 1u], x[at + 2u], x[at + 3u], x[at + 4u], x[at + 5u], x[at + 6u], x[at + 7u]);
        let total = xs[0] + xs[1] + xs[2] + xs[3] + xs[4] + xs[5] + xs[6] + xs[7];
        let xsum = dot(total, vec4<f32>(1.0));
{{ROW_STEPS}}
    }
    return acc;
}
