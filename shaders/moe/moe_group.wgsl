// Groups routed slots by expert for the grouped expert matmul: counts per
// expert, a prefix sum, a stable scatter of slot indices into `sorted`, and a
// tile list cutting each expert's run into tiles of at most `tile` slots.
//   tiles[3 * i ..]: (expert, first index into sorted, slot count); tiles
//   from the real count up to max_tiles get count 0.
// One workgroup: slot counts are small (prefill chunk x top_k), and thread
// e's loops over all slots keep the scatter ordered without atomics.
// Dispatch: 1 workgroup.

const N_EXPERTS: u32 = {{N_EXPERTS}}u;
const WG: u32 = 256u;

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> expert_of: array<u32>;   // [slots]
@group(0) @binding(2) var<storage, read_write> tiles: array<u32>;  // [3 * max_tiles]
@group(0) @binding(3) var<storage, read_write> sorted: array<u32>; // [slots]

var<workgroup> count: array<u32, N_EXPERTS>;
var<workgroup> start: array<u32, N_EXPERTS>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    for (var e = lid; e < N_EXPERTS; e += WG) {
        var c = 0u;
        for (var s = 0u; s < p.slots; s++) {
            c += select(0u, 1u, expert_of[s] == e);
        }
        count[e] = c;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var first = 0u;
        var tile = 0u;
        for (var e = 0u; e < N_EXPERTS; e++) {
            start[e] = first;
            for (var o = 0u; o < count[e]; o += p.tile) {
                tiles[3u * tile] = e;
                tiles[3u * tile + 1u] = first + o;
                tiles[3u * tile + 2u] = min(p.tile, count[e] - o);
                tile++;
            }
            first += count[e];
        }
        for (; tile < p.max_tiles; tile++) {
            tiles[3u * tile] = 0u;
            tiles[3u * tile + 1u] = 0u;
            tiles[3u * tile + 2u] = 0u;
        }
    }
    workgroupBarrier();
    for (var e = lid; e < N_EXPERTS; e += WG) {
        var j = start[e];
        for (var s = 0u; s < p.slots; s++) {
            if (expert_of[s] == e) {
                sorted[j] = s;
                j++;
            }
        }
    }
}
