// Many-token form of matmul (prefill), register blocked and barrier free:
// each invocation computes a TM x TN tile (token rows x output rows), so every
// decoded weight unit serves TM tokens and every x unit TN weight rows.
// In a workgroup of 64, invocation i takes token tile i % TT and row tile
// i / TT: groups of TT neighbours read the same weight bytes (one fetch on a
// GPU). TT (1, 2, 4 or 8) shrinks for short prompts so that no invocation
// idles for want of token rows.
// Sources: quant.wgsl, matmul_common.wgsl, this file.
// Dispatch: [ceil(rows / (64 / TT * TN)), ceil(m / (TT * TM)), 1].

const TM: u32 = {{TM}}u; // token rows per invocation
const TN: u32 = {{TN}}u; // output rows per invocation
const TT: u32 = {{TT}}u; // token tiles per workgroup

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let row0 = (wid.x * (64u / TT) + lid / TT) * TN;
    let tok0 = (wid.y * TT + lid % TT) * TM;
    if (row0 >= p.rows || tok0 >= p.m) {
        return;
    }
    var acc: array<f32, TM * TN>;
    var xs: array<Unit, TM>;
    for (var U = 0u; U < p.units; U++) {
        let e = unit_elems(U);
        let masked = U >= p.full_units;
        // x first: TM units stay live while each weight unit is decoded,
        // used TM times and dropped (fewer live registers than holding TN
        // decoded units).
        for (var t = 0u; t < TM; t++) {
            // Tokens and rows past the end repeat the last; never written.
            xs[t] = load_x(p.x_offset + min(tok0 + t, p.m - 1u) * p.k, e, masked);
        }
        for (var r = 0u; r < TN; r++) {
            let wu = weight_unit(min(row0 + r, p.rows - 1u), U, e, masked);
            for (var t = 0u; t < TM; t++) {
                acc[t * TN + r] += dot_unit(wu, xs[t]);
            }
        }
    }
    for (var t = 0u; t < TM; t++) {
        for (var r = 0u; r < TN; r++) {
            if (tok0 + t < p.m && row0 + r < p.rows) {
                out[p.out_offset + (tok0 + t) * p.out_stride + row0 + r] = acc[t * TN + r];
            }
        }
    }
}
