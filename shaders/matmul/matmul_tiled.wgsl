// Many-token core of matmul (prefill), register blocked and barrier free:
// each invocation computes a TM x TN tile (matmul_tile.wgsl), so every
// decoded weight unit serves TM tokens and every x unit TN weight rows.
// Sources: quant.wgsl, matmul_common.wgsl, matmul_tile.wgsl, this file, then an entry point
// (matmul_tiled_main.wgsl, moe_tiled.wgsl) that defines where token `tok`'s
// rows are: `x_base(tok)` and `out_base(tok)`, element indices of its x row
// and of its out row's column 0, and how a result is stored: `emit(i, row,
// v)` for out element i, the part's output row `row`.

// The workgroup's share of row group `row_group` (64 / TT * TN output rows)
// and token group `tok_group` (TT * TM of the n_tok tokens); output row r
// reads weight row w_row0 + r.
fn tiled(lid: u32, row_group: u32, tok_group: u32, n_tok: u32, w_row0: u32) {
    let origin = tile_origin(lid, row_group, tok_group);
    let row0 = origin.x;
    let tok0 = origin.y;
    if (row0 >= p.rows || tok0 >= n_tok) {
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
            xs[t] = load_x(x_base(min(tok0 + t, n_tok - 1u)), e, masked);
        }
        for (var r = 0u; r < TN; r++) {
            let wu = weight_unit(w_row0 + min(row0 + r, p.rows - 1u), U, e, masked);
            for (var t = 0u; t < TM; t++) {
                acc[t * TN + r] += dot_unit(wu, xs[t]);
            }
        }
    }
    emit_tile(&acc, row0, tok0, n_tok);
}
