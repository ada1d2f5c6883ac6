// Gated activation, elementwise over n: out[i] = act(gate[i]) * up[i], with act
// SiLU or GELU (tanh approximation), chosen by the ACT define.
//
// Bindings come in four variants, by which of gate, up and out share a buffer
// (the Rust side picks one). WebGPU rejects a dispatch that binds one buffer
// twice when either binding is writable, so the output's buffer is bound once,
// read_write, as `dst`, and gate/up read from it when they live there. The
// flags SPLIT, GATE_OUT, UP_OUT and ONE (one of them set) keep the chosen
// variant's declarations; GATE and UP name the array each operand is read from.
//   split:    1 gate (read) [gate_offset + n]; 2 up (read) [up_offset + n];
//             3 dst (read_write) [out_offset + n]   (gate and up may share)
//   gate_out: 1 up (read); 2 dst (read_write): gate and out
//   up_out:   1 gate (read); 2 dst (read_write): up and out
//   one:      1 dst (read_write): gate, up and out
// In place is safe: each invocation reads and writes only element i.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
#if SPLIT
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
#endif
#if GATE_OUT
@group(0) @binding(1) var<storage, read> up: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
#endif
#if UP_OUT
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
#endif
#if ONE
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
#endif

// sigmoid, silu and gelu_tanh come from act_fns.wgsl (concatenated after this file).

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.n) {
        return;
    }
    let g = {{GATE}}[p.gate_offset + i];
    let u = {{UP}}[p.up_offset + i];
    dst[p.out_offset + i] = {{ACT}}(g) * u;
}
