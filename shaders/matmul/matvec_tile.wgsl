// One lane over whole scale tiles of rows, every step (matvec.wgsl with
// TILE_CORE: llvmpipe's decode shape, one lane a group over one or two
// tiles of SCALE_TILE rows, for the 32-element formats). The layout keeps
// a tile's 8 scales of a block side by side (kernels::layout), so a step
// loads them for 8 rows in one vec4 (d16) and two (aux words) where a row
// at a time took 8 loads of each; on llvmpipe each of those is a load per
// lane, and they were a third of the kernel's loads. The rows and their
// scale words are written out in TILE_BODY (kernels::matvec_tile) rather
// than looped over: llvmpipe keeps an array indexed by a loop variable in
// memory. Rows past the part repeat its last row and read its tile; their
// sums are dropped. The x reader's dot_x_scaled dots a step given its
// block's stored scales.

fn tile_partials(lid: u32, group_row0: u32, first: u32, end: u32, base4: u32) {
{{TILE_BODY}}
}
