// Rotary position embedding for an encoder's padded batch, in place on the
// q and k columns of one projection's rows (attention_bidir reads q, k and v
// from the same rows, so rotating there saves a copy). Row t is token
// t % seq_len of its sequence: positions restart with every sequence.
// `heads` counts the rotated heads of a row (q's then k's, contiguous from
// column `col`). Pair i of a head turns by pos * base^(-2i / n_rot); the
// angle reduction and the pair layouts are rope.wgsl's.
//
// One invocation per pair: it reads and writes only its own two elements.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;

const TWO_PI_HI: f32 = 6.28125;
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let half = p.n_rot / 2u;
    let idx = gid.x + gid.y * groups.x * 256u;
    if (idx >= p.rows * p.heads * half) {
        return;
    }
    let i = idx % half;
    let head = idx / half; // row * heads + head
    let row = head / p.heads;
    let base = row * p.row_stride + p.col + (head % p.heads) * p.head_dim;
    var a = base + 2u * i;
    var b = a + 1u;
    if (p.neox != 0u) {
        a = base + i;
        b = a + half;
    }
    let freq = exp2(-f32(i) * p.log2_base_step);
    let angle = f32(row % p.seq_len) * freq;
    let k = round(angle * INV_TWO_PI);
    let r = (angle - k * TWO_PI_HI) - k * TWO_PI_LO;
    let c = cos(r);
    let s = sin(r);
    let x0 = x[a];
    let x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}
