// Constants of the vec4 cores (matvec.wgsl, matmul_tiled_vec.wgsl) and
// their step functions (quant_vec*.wgsl): the format's block geometry and
// its steps and chunks in vec4s. Concatenated in front of each core.

const QK: u32 = {{QK}};
const BLOCK_BYTES: u32 = {{BLOCK_BYTES}};
const UNITS: u32 = {{UNITS}};
const STEP: u32 = {{STEP}}u;       // elements of a step
const XV: u32 = STEP / 4u;         // x vec4s of a step
const XG: u32 = max(1u, XV / 8u);  // 32-element x sums of a step
const CV: u32 = min(XV, 8u);       // vec4s of a chunk (matmul_tiled_vec.wgsl)
