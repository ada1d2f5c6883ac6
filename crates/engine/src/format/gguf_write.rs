//! A small GGUF writer, so tests everywhere can build model files in memory.
//!
//! Output follows what llama.cpp writes and accepts: little-endian, version 3,
//! tensors laid out in insertion order, each starting at a multiple of the
//! alignment and padded with zeros to the next one (the last tensor too, since
//! llama.cpp reads the padded size of the data section).
//!
//! ```
//! use wick::format::{gguf_write::GgufWriter, GgmlType, GgufFile, MetaValue};
//! let bytes = GgufWriter::new()
//!     .meta("general.architecture", MetaValue::String("llama".into()))
//!     .tensor_f32("output_norm.weight", &[4], &[1.0, 1.0, 1.0, 1.0])
//!     .to_bytes();
//! let file = GgufFile::parse(&bytes).unwrap();
//! assert_eq!(file.tensor("output_norm.weight").unwrap().dtype, GgmlType::F32);
//! ```
//!
//! A file too large to hold twice (a synthetic 8B model) is streamed instead:
//! [`declare_tensor`](GgufWriter::declare_tensor) adds a tensor without its
//! data, [`try_header`](GgufWriter::try_header) writes everything before the
//! data section, and the caller sends each tensor's bytes after it, in
//! insertion order, each padded with zeros to [`ALIGNMENT`] (or the
//! `general.alignment` it set).

use std::collections::HashSet;

use crate::format::gguf::{type_id, MetaValue};
use crate::format::quant::GgmlType;

const ALIGNMENT_KEY: &str = "general.alignment";
/// Where each tensor's data starts, unless `general.alignment` says otherwise.
pub const ALIGNMENT: u64 = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufWriteError {
    #[error("metadata key `{0}` set twice")]
    DuplicateKey(String),
    #[error("tensor `{0}` added twice")]
    DuplicateTensor(String),
    #[error("metadata `{key}` is an array mixing {first} and {other} elements")]
    MixedArray {
        key: String,
        first: &'static str,
        other: &'static str,
    },
    #[error("tensor `{tensor}`: {reason}")]
    BadTensor { tensor: String, reason: String },
    #[error("general.alignment must be a power of two (stored as an integer), got {0}")]
    BadAlignment(String),
    #[error("tensor `{0}` was declared without data, so only the header can be written")]
    NoData(String),
}

#[derive(Clone, Debug)]
struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    dtype: GgmlType,
    /// `None`: declared only; its bytes are streamed by the caller.
    data: Option<Vec<u8>>,
}

/// Builds a GGUF file in memory. Problems (a duplicate key, data of the
/// wrong length for its shape ...) are reported when the bytes are made.
#[derive(Clone, Debug)]
pub struct GgufWriter {
    version: u32,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// The version number written (default 3). Versions 2 and 3 share one
    /// layout; any other number makes a file readers should refuse.
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Adds a metadata entry (written in insertion order).
    pub fn meta(mut self, key: impl Into<String>, value: MetaValue) -> Self {
        self.metadata.push((key.into(), value));
        self
    }

    /// Sets `general.alignment` (as u32, as llama.cpp requires), replacing any earlier value.
    pub fn alignment(mut self, alignment: u32) -> Self {
        self.metadata.retain(|(k, _)| k != ALIGNMENT_KEY);
        self.meta(ALIGNMENT_KEY, MetaValue::U32(alignment))
    }

    /// Adds a tensor; `dims` are in ggml order (ne0, the contiguous one, first)
    /// and `data` must be exactly its bytes in `dtype`.
    pub fn tensor(
        mut self,
        name: impl Into<String>,
        dims: &[u64],
        dtype: GgmlType,
        data: impl Into<Vec<u8>>,
    ) -> Self {
        self.tensors.push(PendingTensor {
            name: name.into(),
            dims: dims.to_vec(),
            dtype,
            data: Some(data.into()),
        });
        self
    }

    /// Adds a tensor's entry in the tensor table without its data, for
    /// [`try_header`](Self::try_header): the caller streams the data.
    pub fn declare_tensor(
        mut self,
        name: impl Into<String>,
        dims: &[u64],
        dtype: GgmlType,
    ) -> Self {
        self.tensors.push(PendingTensor {
            name: name.into(),
            dims: dims.to_vec(),
            dtype,
            data: None,
        });
        self
    }

    /// Adds an F32 tensor from values.
    pub fn tensor_f32(self, name: impl Into<String>, dims: &[u64], values: &[f32]) -> Self {
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, dims, GgmlType::F32, data)
    }

    /// The file's bytes.
    ///
    /// # Panics
    /// On anything [`try_to_bytes`](Self::try_to_bytes) reports: the writer
    /// builds test inputs, where a mistake is the test's bug.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self.try_to_bytes() {
            Ok(bytes) => bytes,
            Err(e) => panic!("GgufWriter: {e}"),
        }
    }

    /// The file's bytes, or what is wrong with the contents.
    pub fn try_to_bytes(&self) -> Result<Vec<u8>, GgufWriteError> {
        let alignment = self.checked_alignment()?;
        let mut out = self.try_header()?;
        for t in &self.tensors {
            let data = t
                .data
                .as_ref()
                .ok_or_else(|| GgufWriteError::NoData(t.name.clone()))?;
            out.extend_from_slice(data);
            pad(&mut out, alignment);
        }
        Ok(out)
    }

    /// Everything before the data section: magic, metadata, the tensor table
    /// and the padding after it. Tensors may be declared without data.
    pub fn try_header(&self) -> Result<Vec<u8>, GgufWriteError> {
        let alignment = self.checked_alignment()?;
        let mut keys = HashSet::new();
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        put_u32(&mut out, self.version);
        put_u64(&mut out, self.tensors.len() as u64);
        put_u64(&mut out, self.metadata.len() as u64);
        for (key, value) in &self.metadata {
            if !keys.insert(key.as_str()) {
                return Err(GgufWriteError::DuplicateKey(key.clone()));
            }
            put_str(&mut out, key);
            put_u32(&mut out, value.type_id());
            put_value(&mut out, key, value)?;
        }
        let mut names = HashSet::new();
        let mut offset = 0u64;
        for t in &self.tensors {
            if !names.insert(t.name.as_str()) {
                return Err(GgufWriteError::DuplicateTensor(t.name.clone()));
            }
            let len = check_tensor(t)?;
            put_str(&mut out, &t.name);
            put_u32(&mut out, t.dims.len() as u32);
            t.dims.iter().for_each(|&d| put_u64(&mut out, d));
            put_u32(&mut out, t.dtype.id());
            put_u64(&mut out, offset);
            offset = (offset + len).next_multiple_of(alignment);
        }
        pad(&mut out, alignment);
        Ok(out)
    }

    fn checked_alignment(&self) -> Result<u64, GgufWriteError> {
        let Some((_, v)) = self.metadata.iter().find(|(k, _)| k == ALIGNMENT_KEY) else {
            return Ok(ALIGNMENT);
        };
        match v.as_u64() {
            Some(a) if a.is_power_of_two() => Ok(a),
            _ => Err(GgufWriteError::BadAlignment(format!("{v:?}"))),
        }
    }
}

/// The tensor's data length from its shape, checked against the data it has.
fn check_tensor(t: &PendingTensor) -> Result<u64, GgufWriteError> {
    let bad = |reason: String| GgufWriteError::BadTensor {
        tensor: t.name.clone(),
        reason,
    };
    if t.dims.is_empty() || t.dims.len() > 4 || t.dims.contains(&0) {
        return Err(bad(format!("dimensions {:?}: need 1 to 4, none 0", t.dims)));
    }
    let n = t.dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    let rows = n.map(|n| n / t.dims[0]);
    let bytes = t
        .dtype
        .row_bytes(t.dims[0])
        .zip(rows)
        .and_then(|(r, n)| r.checked_mul(n));
    match (bytes, &t.data) {
        (Some(b), None) => Ok(b),
        (Some(b), Some(data)) if b == data.len() as u64 => Ok(b),
        (Some(b), Some(data)) => Err(bad(format!(
            "{:?} {} needs {b} bytes, got {}",
            t.dims,
            t.dtype,
            data.len()
        ))),
        (None, _) => Err(bad(format!(
            "{:?} is not whole {} blocks or overflows",
            t.dims, t.dtype
        ))),
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn pad(out: &mut Vec<u8>, alignment: u64) {
    let len = (out.len() as u64).next_multiple_of(alignment);
    out.resize(len as usize, 0);
}

fn put_value(out: &mut Vec<u8>, key: &str, v: &MetaValue) -> Result<(), GgufWriteError> {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(u8::from(*x)),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::Array(items) => {
            // An empty array has no element type to take; u8 is as good as any.
            let elem = items.first().map_or(type_id::U8, MetaValue::type_id);
            if let Some(other) = items.iter().find(|v| v.type_id() != elem) {
                let first = items[0].type_name();
                return Err(GgufWriteError::MixedArray {
                    key: key.into(),
                    first,
                    other: other.type_name(),
                });
            }
            put_u32(out, elem);
            put_u64(out, items.len() as u64);
            for item in items {
                put_value(out, key, item)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::gguf::GgufFile;

    #[test]
    fn a_declared_tensor_streams_after_the_header_as_to_bytes_writes_it() {
        let data: Vec<u8> = (0..12u8).collect(); // 3 F32, padded to 32
        let meta = |w: GgufWriter| w.meta("general.architecture", MetaValue::String("x".into()));
        let whole = meta(GgufWriter::new())
            .tensor("a", &[3], GgmlType::F32, data.clone())
            .tensor("b", &[3], GgmlType::F32, data.clone())
            .to_bytes();
        let declared = meta(GgufWriter::new())
            .declare_tensor("a", &[3], GgmlType::F32)
            .declare_tensor("b", &[3], GgmlType::F32);
        let mut streamed = declared.try_header().unwrap();
        for _ in 0..2 {
            streamed.extend_from_slice(&data);
            streamed.resize(streamed.len().next_multiple_of(ALIGNMENT as usize), 0);
        }
        assert_eq!(streamed, whole);
        GgufFile::parse(&streamed).unwrap();
        let e = declared.try_to_bytes().unwrap_err();
        assert_eq!(e, GgufWriteError::NoData("a".into()));
        let bad = GgufWriter::new().declare_tensor("c", &[33], GgmlType::Q8_0);
        assert!(matches!(
            bad.try_header(),
            Err(GgufWriteError::BadTensor { .. })
        ));
    }
}
