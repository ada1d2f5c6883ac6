//! Uploading a model's tensors from a GGUF file, checked first.
//!
//! Architectures ask for tensors by name and expected shape. Every tensor an
//! architecture needs is checked (present, shape, a type the GPU kernels
//! support) before the first byte is uploaded, so a bad file fails fast with
//! the tensor's name instead of half-way through a long upload.

use crate::format::gguf::{GgufFile, TensorInfo};
use crate::format::quant::{dequantize, GgmlType};
use crate::gpu::{BufferRef, GpuContext};
use crate::kernels::weights::QuantMatrix;

use super::ModelError;

/// Types the matmul and embedding kernels decode.
pub const GPU_TYPES: [GgmlType; 8] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
];

/// Progress of a load, reported as bytes of tensor data uploaded.
#[derive(Clone, Copy, Debug)]
pub struct LoadProgress {
    pub loaded: u64,
    pub total: u64,
}

/// A tensor an architecture needs: name and GGUF dims (contiguous first).
#[derive(Clone, Debug)]
pub struct Need {
    pub name: String,
    pub dims: Vec<u64>,
}

impl Need {
    pub fn matrix(name: impl Into<String>, rows: usize, cols: usize) -> Need {
        Need {
            name: name.into(),
            dims: vec![cols as u64, rows as u64],
        }
    }
    pub fn vector(name: impl Into<String>, len: usize) -> Need {
        Need {
            name: name.into(),
            dims: vec![len as u64],
        }
    }
}

pub struct Loader<'a> {
    pub ctx: &'a GpuContext,
    pub file: &'a GgufFile,
    bytes: &'a [u8],
    progress: &'a mut dyn FnMut(LoadProgress),
    loaded: u64,
    total: u64,
}

impl<'a> Loader<'a> {
    pub fn new(
        ctx: &'a GpuContext,
        file: &'a GgufFile,
        bytes: &'a [u8],
        progress: &'a mut dyn FnMut(LoadProgress),
    ) -> Loader<'a> {
        let total = file.tensors.iter().map(|t| t.n_bytes).sum();
        Loader {
            ctx,
            file,
            bytes,
            progress,
            loaded: 0,
            total,
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.file.tensor(name).is_some()
    }

    /// Checks every needed tensor before anything is uploaded.
    pub fn check_all(&self, needs: &[Need]) -> Result<(), ModelError> {
        for need in needs {
            self.check(need)?;
        }
        Ok(())
    }

    fn check(&self, need: &Need) -> Result<&'a TensorInfo, ModelError> {
        let info = self
            .file
            .tensor(&need.name)
            .ok_or_else(|| ModelError::MissingTensor(need.name.clone()))?;
        if info.dims != need.dims {
            return Err(ModelError::TensorShape {
                name: need.name.clone(),
                expected: need.dims.clone(),
                found: info.dims.clone(),
            });
        }
        if !GPU_TYPES.contains(&info.dtype) {
            return Err(ModelError::UnsupportedQuant {
                tensor: need.name.clone(),
                dtype: info.dtype.name().to_string(),
            });
        }
        Ok(info)
    }

    fn data(&mut self, info: &TensorInfo) -> Result<&'a [u8], ModelError> {
        let data = self.file.tensor_bytes(self.bytes, info)?;
        self.loaded += info.n_bytes;
        (self.progress)(LoadProgress {
            loaded: self.loaded,
            total: self.total,
        });
        Ok(data)
    }

    /// A weight matrix of `rows` outputs by `cols` inputs, in its stored format.
    pub fn matrix(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
    ) -> Result<QuantMatrix, ModelError> {
        let info = self.check(&Need::matrix(name, rows, cols))?;
        let data = self.data(info)?;
        Ok(QuantMatrix::upload(
            self.ctx, name, info.dtype, rows, cols, data,
        )?)
    }

    /// A vector (norm weight, bias) dequantized to f32: small, read often.
    pub fn vector(&mut self, name: &str, len: usize) -> Result<BufferRef, ModelError> {
        let info = self.check(&Need::vector(name, len))?;
        let data = self.data(info)?;
        let values = dequantize(info.dtype, data, len)?;
        Ok(self.ctx.upload_f32(name, &values)?)
    }

    pub fn optional_vector(
        &mut self,
        name: &str,
        len: usize,
    ) -> Result<Option<BufferRef>, ModelError> {
        if self.has(name) {
            self.vector(name, len).map(Some)
        } else {
            Ok(None)
        }
    }
}
