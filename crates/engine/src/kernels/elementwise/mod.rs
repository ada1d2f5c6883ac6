//! Elementwise kernels: gated activations (SwiGLU, GeGLU), residual adds,
//! biases, GELU, soft-capping.

pub mod activation;
pub mod add;
pub mod bias;
pub mod gelu;
pub mod softcap;
