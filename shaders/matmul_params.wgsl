// The parameter block of every matmul kernel (unit, vec4 and tiled cores,
// matrices and expert stacks), field for field kernels::matmul::Params.
// Concatenated in front of matmul_common.wgsl and matvec.wgsl.

struct Params {
    m: u32,          // token rows
    k: u32,          // input features: x row length, weight row elements
    rows: u32,       // output features (weight rows) in this part
    row_bytes: u32,  // bytes of one stored weight row
    x_offset: u32,   // element of x where token row 0 starts
    out_offset: u32, // element of out for token 0, this part's first row
    out_stride: u32, // elements between token rows of out (the whole matrix's rows)
    full_units: u32, // k / 16: units with all 16 elements inside the row
    units: u32,      // ceil(k / 16); more than full_units only for F32/F16
    // Expert stacks only (moe_gemv.wgsl, moe_tiled.wgsl); 0 for a plain matrix.
    x_div: u32,        // slots per x row: x row = slot / x_div
    first_expert: u32, // first expert held by this part
    part_experts: u32, // experts held by this part; `rows` is per expert
    // Fused linear layers only (linear_*.wgsl); 0 otherwise.
    eps: f32,          // RMSNorm epsilon of the norm prologue
    bias_offset: u32,  // element of bias for this part's row 0
    // The part's layout (quant.wgsl).
    blocks: u32,   // blocks per row
    aux_base: u32, // word where the aux region starts
    d16_base: u32, // word where the d16 region starts
    // The prefill vec4 core only (matmul_tiled_vec.wgsl); 0 otherwise.
    first_chunk: u32, // x's rows are a range of the weight rows from this chunk on (kernels::x_ranges)
}

@group(0) @binding(0) var<uniform> p: Params;
