// Embedding gather: out[t, e] = scale * table[ids[t], e] for one part of the
// table (rows first_row .. first_row + rows). Each invocation decodes one
// 16-weight unit of one token's row (quant.wgsl) and writes its elements.
// A part writes only the tokens whose id it holds; the last part also writes
// zeros for ids past the table (zero_beyond = 1), so every row of out is
// written exactly once and no id reads outside the weights.
// Sources: quant.wgsl, this file.
// Dispatch: [ceil(units / 64), m, 1].

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
{{WEIGHT_WORDS}} // part, in the GPU layout (quant.wgsl) + zero padding
@group(0) @binding(2) var<storage, read> ids: array<u32>;       // [ids_offset + m]
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // [out_offset + m * k]

const QK: u32 = {{QK}};
const BLOCK_BYTES: u32 = {{BLOCK_BYTES}};
const UNITS: u32 = {{UNITS}};

// Writes a run of 8 values starting at row element e (only those inside the row).
fn write8(base: u32, e: u32, lo: vec4<f32>, hi: vec4<f32>) {
    for (var i = 0u; i < 4u; i++) {
        if (e + i < p.k) {
            out[base + e + i] = lo[i];
        }
        if (e + 4u + i < p.k) {
            out[base + e + 4u + i] = hi[i];
        }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let U = gid.x;
    let t = gid.y;
    if (U >= p.units || t >= p.m) {
        return;
    }
    let id = ids[p.ids_offset + t];
    if (id < p.first_row) {
        return; // an earlier part's row
    }
    let local = id - p.first_row;
    var v = Unit(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    if (local < p.rows) {
        let d = decode_{{FMT}}(local, U);
        v = Unit(p.scale * d.a0, p.scale * d.a1, p.scale * d.b0, p.scale * d.b1);
    } else if (p.zero_beyond == 0u) {
        return; // a later part's row
    }
    let e = (U / UNITS) * QK + runs_{{FMT}}(U % UNITS);
    let base = p.out_offset + t * p.k;
    write8(base, e.x, v.a0, v.a1);
    write8(base, e.y, v.b0, v.b1);
}
