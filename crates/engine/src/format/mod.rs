//! File formats: GGUF reading and writing, Hugging Face safetensors reading,
//! and ggml's quantized block layouts with CPU (de)quantizers, which are also
//! the reference for GPU kernels.

pub mod gguf;
pub mod gguf_split;
pub mod gguf_write;
pub mod quant;
pub mod safetensors;
pub mod safetensors_index;

pub use gguf::{GgufError, GgufFile, MetaValue, TensorInfo};
pub use gguf_split::SplitError;
pub use gguf_write::{GgufWriteError, GgufWriter};
pub use quant::{dequantize, dequantize_into, quantize, GgmlType, QuantError};
pub use safetensors::{SafetensorsError, SafetensorsHeader};
pub use safetensors_index::ShardIndex;
