// Matrix-vector core of matmul, for a few token rows (decode). Memory bound:
// each workgroup streams ROWS consecutive weight rows once, its 64
// invocations striding over the rows' 16-weight units (adjacent invocations
// read adjacent bytes), each dotting the decoded unit with all TOKENS x rows
// it keeps in registers. One shared-memory reduction at the end (a single
// barrier): lavapipe pays dearly per barrier, GPUs do not mind either way.
// Sources: quant.wgsl, matmul_common.wgsl, this file, then an entry point
// (matmul_gemv_main.wgsl for a matrix, moe_gemv.wgsl for an expert stack).

const WG: u32 = 64u;
// Lanes that between them load each x element once (all of them here).
const X_LANES: u32 = WG;
const ROWS: u32 = {{ROWS}}u;     // output rows per workgroup
const TOKENS: u32 = {{TOKENS}}u; // token rows per workgroup

var<workgroup> partial: array<f32, ROWS * TOKENS * WG>;

// Weight rows row0 .. row0 + ROWS (row0 < p.rows) for TOKENS token rows:
// token t reads x from x_base + t * k (through the entry point's x_unit, which
// may weight it and keep statistics of it, stored by its stash_lane), and weight row r is row w_row0 + r of the binding (an
// expert's slab in a stack). Leaves lane j's partial sum of (row r, token t)
// in partial[(r * TOKENS + t) * WG + j] and ends with a barrier, so callers may
// only return early workgroup-uniformly; row_sum() finishes a sum.
fn gemv_partials(lid: u32, row0: u32, w_row0: u32, x_base: u32) {
    var acc: array<f32, ROWS * TOKENS>;
    var xs: array<Unit, TOKENS>;
    for (var U = lid; U < p.units; U += WG) {
        let e = unit_elems(U);
        let masked = U >= p.full_units;
        // Token rows past p.m (a short slice of the fused linear layer's
        // rows) are skipped: uniform.
        for (var t = 0u; t < min(TOKENS, p.m); t++) {
            xs[t] = x_unit(x_base + t * p.k, t, e, masked);
        }
        for (var r = 0u; r < ROWS; r++) {
            // Rows past the part repeat its last row; their sums are dropped.
            let wu = weight_unit(w_row0 + min(row0 + r, p.rows - 1u), U, e, masked);
            for (var t = 0u; t < min(TOKENS, p.m); t++) {
                acc[r * TOKENS + t] += dot_unit(wu, xs[t]);
            }
        }
    }
    for (var i = 0u; i < ROWS * TOKENS; i++) {
        partial[i * WG + lid] = acc[i];
    }
    stash_lane(lid);
    workgroupBarrier();
}

// The unit core's rows are summed by row_sum alone (the fused linear
// layer's entry point calls this for either core).
const REDUCE: u32 = 0u;
fn reduce_rows(lid: u32) {}

// The whole dot product of (row r, token t), i = r * TOKENS + t.
fn row_sum(i: u32) -> f32 {
    var sum = 0.0;
    for (var j = 0u; j < WG; j++) {
        sum += partial[i * WG + j];
    }
    return sum;
}

// gemv_partials, then each sum stored to out[out_base + t * out_stride + row].
fn gemv(lid: u32, row0: u32, w_row0: u32, x_base: u32, out_base: u32) {
    gemv_partials(lid, row0, w_row0, x_base);
    if (lid < ROWS * TOKENS) {
        let r = lid / TOKENS;
        let t = lid % TOKENS;
        if (row0 + r < p.rows && t < p.m) {
            out[out_base + t * p.out_stride + row0 + r] = row_sum(lid);
        }
    }
}
