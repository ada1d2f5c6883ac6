//! Elementwise kernels: gated activations (SwiGLU, GeGLU), residual adds,
//! biases, GELU.

pub mod activation;
pub mod add;
pub mod bias;
pub mod gelu;
