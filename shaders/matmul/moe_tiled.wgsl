// Entry point of the many-token matmul over an expert stack (grouped form of
// mixture-of-experts, for prefill): moe_group.wgsl has sorted the routed
// slots by expert and cut each expert's run into tiles of at most TT * TM
// slots; one workgroup row per tile runs that tile's expert over its slots.
// Slot rows are gathered, not consecutive:
//   x row of slot s:   s / x_div;  out row of slot s: s.
// Tiles past the real count (count 0) and tiles of experts outside this part
// of the stack leave at once.
// Dispatch: [ceil(rows / (WG / TT * TN)), max_tiles, 1].

@group(0) @binding(4) var<storage, read> tiles: array<u32>;  // (expert, first, count) per tile
@group(0) @binding(5) var<storage, read> sorted: array<u32>; // slots, grouped by expert

var<private> tile_first: u32;

fn x_base(tok: u32) -> u32 {
    return p.x_offset + sorted[tile_first + tok] / p.x_div * p.k;
}

fn out_base(tok: u32) -> u32 {
    return p.out_offset + sorted[tile_first + tok] * p.out_stride;
}

// A result is stored as it is.
fn emit(i: u32, row: u32, v: f32) {
    out[i] = v;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let tile = wid.y;
    let local = tiles[3u * tile] - p.first_expert; // wraps past part_experts when below
    let count = tiles[3u * tile + 2u];
    if (count == 0u || local >= p.part_experts) {
        return;
    }
    tile_first = tiles[3u * tile + 1u];
    tiled(lid, wid.x, 0u, count, local * p.rows);
}
