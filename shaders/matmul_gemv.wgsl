// Matrix-vector form of matmul, for a few token rows (decode). Memory bound:
// each workgroup streams ROWS consecutive weight rows once, its 64
// invocations striding over the rows' 16-weight units (adjacent invocations
// read adjacent bytes), each dotting the decoded unit with all TOKENS x rows
// it keeps in registers. One shared-memory reduction at the end (a single
// barrier): lavapipe pays dearly per barrier, GPUs do not mind either way.
// Sources: quant.wgsl, matmul_common.wgsl, this file.
// Dispatch: ceil(rows / ROWS) workgroups, folded over x and y past 65535.

const WG: u32 = 64u;
const ROWS: u32 = {{ROWS}}u;     // output rows per workgroup
const TOKENS: u32 = {{TOKENS}}u; // token rows; p.m == TOKENS

var<workgroup> partial: array<f32, ROWS * TOKENS * WG>;

@compute @workgroup_size(64)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let row0 = (wid.x + wid.y * groups.x) * ROWS;
    if (row0 >= p.rows) {
        return; // whole workgroup: uniform
    }
    var acc: array<f32, ROWS * TOKENS>;
    var xs: array<Unit, TOKENS>;
    for (var U = lid; U < p.units; U += WG) {
        let e = unit_elems(U);
        let masked = U >= p.full_units;
        for (var t = 0u; t < TOKENS; t++) {
            xs[t] = load_x(p.x_offset + t * p.k, e, masked);
        }
        for (var r = 0u; r < ROWS; r++) {
            // Rows past the part repeat its last row; their sums are dropped.
            let wu = weight_unit(min(row0 + r, p.rows - 1u), U, e, masked);
            for (var t = 0u; t < TOKENS; t++) {
                acc[r * TOKENS + t] += dot_unit(wu, xs[t]);
            }
        }
    }
    for (var i = 0u; i < ROWS * TOKENS; i++) {
        partial[i * WG + lid] = acc[i];
    }
    workgroupBarrier();
    if (lid < ROWS * TOKENS) {
        var sum = 0.0;
        for (var j = 0u; j < WG; j++) {
            sum += partial[lid * WG + j];
        }
        let r = lid / TOKENS;
        let t = lid % TOKENS;
        if (row0 + r < p.rows) {
            out[p.out_offset + t * p.out_stride + row0 + r] = sum;
        }
    }
}
