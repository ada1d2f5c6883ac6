// The tile of the many-token matmul cores (matmul_tiled.wgsl,
// matmul_tiled_vec.wgsl): each invocation computes TM token rows x TN output
// rows. In a workgroup of WG (64; on a CPU adapter's windowed core one SIMD
// batch, kernels::tile_shape), invocation i takes token tile i % TT and row
// tile i / TT: groups of TT neighbours read the same weight bytes (one fetch
// on a GPU). TT (p.token_tiles: 1, 2, 4 or 8) shrinks for short prompts so
// that no invocation idles for want of token rows; it is a parameter rather
// than a constant so that one pipeline serves every prompt length (a
// pipeline per count tripled the tiled kernels a model compiles at load).
// Concatenated in front of each core; the entry point supplies
// `out_base(tok)` and `emit(i, row, v)`.

const TM: u32 = {{TM}}u; // token rows per invocation
const TN: u32 = {{TN}}u; // output rows per invocation
const WG: u32 = {{WG}}u; // invocations per workgroup

// The first output row and first token of invocation `lid`'s tile, in row
// group `row_group` (64 / TT * TN output rows) and token group `tok_group`
// (TT * TM tokens).
fn tile_origin(lid: u32, row_group: u32, tok_group: u32) -> vec2<u32> {
    let tt = p.token_tiles;
    return vec2<u32>((row_group * (WG / tt) + lid / tt) * TN, (tok_group * tt + lid % tt) * TM);
}

// Emits the tile's sums (acc[t * TN + r]) that fall inside the part and the
// n_tok tokens, each token's in row order (linear_tiled.wgsl's gating pairs
// rows on that; TN is even and a part's rows too). By pointer: the array
// passed by value made the tests' kernels over 20x slower on lavapipe.
fn emit_tile(acc: ptr<function, array<f32, TM * TN>>, row0: u32, tok0: u32, n_tok: u32) {
    for (var t = 0u; t < TM; t++) {
        for (var r = 0u; r < TN; r++) {
            if (tok0 + t < n_tok && row0 + r < p.rows) {
                emit(out_base(tok0 + t) + row0 + r, row0 + r, (*acc)[t * TN + r]);
            }
        }
    }
}
