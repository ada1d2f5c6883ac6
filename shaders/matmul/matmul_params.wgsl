// The binding of the parameter block of every matmul kernel (unit, vec4 and
// tiled cores, matrices and expert stacks): kernels::matmul::tiled::Params,
// declared once in Rust (kernel_params!) and put in front of the sources by
// the pipeline. Concatenated in front of matmul_common.wgsl and matvec.wgsl.

@group(0) @binding(0) var<uniform> p: Params;
