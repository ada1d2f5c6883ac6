//! Weight matrices times activations. `linear` is the op the models call:
//! a projection with an optional norm before it and an epilogue after it
//! (bias, residual, gated activation), recorded as the matrix-vector core
//! for decode rows or the tiled core (`tiled`) for prefill. The rest is how
//! those cores are shaped and generated: `vec_shape` and `matvec_tile` for
//! the vec4 matrix-vector core, `tile_shape` for the tiles, `variants` for
//! the WGSL each shape assembles, `x_ranges` and `x_window` for the ways x
//! reaches a tile.

pub mod linear;
pub(crate) mod matvec_tile;
pub(crate) mod sources;
pub(crate) mod tile_shape;
pub mod tiled;
pub(crate) mod variants;
pub(crate) mod vec_shape;
pub(crate) mod x_ranges;
pub(crate) mod x_window;
