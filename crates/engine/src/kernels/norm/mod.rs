//! Normalisation: RMSNorm (and the 8-bit rows it can write for the
//! projections after it), the per-head q/k norms, LayerNorm.

pub mod head;
pub mod layer;
pub mod rms;
pub mod rms_q8;
