//! GGUF files: metadata, tensor table, and where each tensor's bytes lie.
//!
//! No filesystem here (the engine also runs in wasm): parsing works on bytes,
//! and the header can be parsed from a prefix of the file so a browser can
//! fetch it by ranges before deciding what else to fetch.

mod error;
mod parse;
mod value;

use std::collections::HashMap;
use std::ops::Range;

pub use error::GgufError;
pub(crate) use value::type_id;
pub use value::MetaValue;

use crate::format::quant::GgmlType;

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` (ne0) is the contiguous dimension, so a 2-D
    /// weight of `dims = [n_in, n_out]` is `n_out` rows of `n_in` elements.
    pub dims: Vec<u64>,
    pub dtype: GgmlType,
    /// Start of the tensor's bytes, relative to the data section.
    pub offset: u64,
    pub n_elements: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Elements in one row (`dims[0]`).
    pub fn row_elements(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }

    /// Number of rows: the product of every dimension after the first.
    pub fn n_rows(&self) -> u64 {
        self.n_elements
            .checked_div(self.row_elements())
            .unwrap_or(0)
    }

    /// Bytes in one row.
    pub fn row_bytes(&self) -> u64 {
        self.n_bytes.checked_div(self.n_rows()).unwrap_or(0)
    }
}

/// A parsed GGUF header. Validated on parse: versions 2-3, known value and
/// tensor types, unique keys and names, shapes of whole blocks, offsets
/// aligned and non-overlapping.
#[derive(Clone, Debug)]
pub struct GgufFile {
    pub version: u32,
    /// `general.alignment`, default 32: tensor offsets and the data section start are multiples of it.
    pub alignment: u64,
    /// In file order.
    pub metadata: Vec<(String, MetaValue)>,
    /// In file order.
    pub tensors: Vec<TensorInfo>,
    /// Bytes from the file start to the end of the tensor table.
    pub header_len: u64,
    /// Absolute offset of the data section: `header_len` rounded up to `alignment`.
    pub data_offset: u64,
    meta_index: HashMap<String, usize>,
    tensor_index: HashMap<String, usize>,
}

type Result<T> = std::result::Result<T, GgufError>;

impl GgufFile {
    /// Parses the header (metadata + tensor table) from the start of a file.
    /// `bytes` may be only a prefix of the file; if it ends inside the header
    /// this returns [`GgufError::NeedMoreHeader`] with a length worth fetching.
    pub fn parse_header(bytes: &[u8]) -> Result<GgufFile> {
        parse::parse(bytes, false)
    }

    /// Parses the header from a reader positioned at the start of a file,
    /// reading only as much as the header needs (a few MB, not the weights).
    pub fn read_header<R: std::io::Read>(mut reader: R) -> Result<GgufFile> {
        use std::io::Read;
        let mut buf = Vec::new();
        let mut want: u64 = 8 << 20;
        loop {
            let have = buf.len() as u64;
            let read = (&mut reader)
                .take(want.saturating_sub(have))
                .read_to_end(&mut buf)
                .map_err(|e| GgufError::Io(e.to_string()))?;
            match Self::parse_header(&buf) {
                Err(GgufError::NeedMoreHeader { needed_at_least }) if read > 0 => {
                    want = needed_at_least.max(want * 2);
                }
                other => return other,
            }
        }
    }

    /// Checks every tensor lies inside a file of `file_len` bytes.
    pub fn check_file_len(&self, file_len: u64) -> Result<()> {
        for t in &self.tensors {
            let r = self.tensor_range(t);
            if r.end > file_len {
                return Err(GgufError::TensorOutOfBounds {
                    tensor: t.name.clone(),
                    start: r.start,
                    end: r.end,
                    file_len,
                });
            }
        }
        Ok(())
    }

    /// [`parse_header`](Self::parse_header) and [`check_file_len`](Self::check_file_len) on a whole file.
    pub fn parse(bytes: &[u8]) -> Result<GgufFile> {
        let file = parse::parse(bytes, true)?;
        file.check_file_len(bytes.len() as u64)?;
        Ok(file)
    }

    /// Absolute byte range of a tensor's data in the file.
    pub fn tensor_range(&self, t: &TensorInfo) -> Range<u64> {
        // Parsing checked these sums cannot overflow.
        let start = self.data_offset.saturating_add(t.offset);
        start..start.saturating_add(t.n_bytes)
    }

    /// The tensor's bytes within `file` (the whole file, from its start).
    pub fn tensor_bytes<'a>(&self, file: &'a [u8], t: &TensorInfo) -> Result<&'a [u8]> {
        let r = self.tensor_range(t);
        let oob = || GgufError::TensorOutOfBounds {
            tensor: t.name.clone(),
            start: r.start,
            end: r.end,
            file_len: file.len() as u64,
        };
        let start = usize::try_from(r.start).map_err(|_| oob())?;
        let end = usize::try_from(r.end).map_err(|_| oob())?;
        file.get(start..end).ok_or_else(oob)
    }

    /// This header with another tensor table (a split model's tensors over
    /// all its shards, under the first shard's metadata). Offsets stay
    /// relative to each tensor's own shard, so [`tensor_range`](Self::tensor_range)
    /// is meaningful only for this file's own tensors.
    pub(crate) fn with_tensors(&self, tensors: Vec<TensorInfo>) -> Result<GgufFile> {
        let mut tensor_index = HashMap::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            if tensor_index.insert(t.name.clone(), i).is_some() {
                return Err(GgufError::DuplicateTensor(t.name.clone()));
            }
        }
        Ok(GgufFile {
            tensors,
            tensor_index,
            ..self.clone()
        })
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    pub fn meta(&self, key: &str) -> Option<&MetaValue> {
        self.meta_index.get(key).map(|&i| &self.metadata[i].1)
    }

    /// `general.architecture` ("llama", "qwen2", "gemma3" ...).
    pub fn architecture(&self) -> Result<&str> {
        self.meta_str("general.architecture")
    }

    /// `Ok(None)` if absent, `WrongType` if `get` rejects the value.
    fn typed<'s, T>(
        &'s self,
        key: &str,
        expected: &'static str,
        get: impl FnOnce(&'s MetaValue) -> Option<T>,
    ) -> Result<Option<T>> {
        let Some(v) = self.meta(key) else {
            return Ok(None);
        };
        let found = v.type_name();
        get(v).map(Some).ok_or_else(|| GgufError::WrongType {
            key: key.into(),
            expected,
            found,
        })
    }

    fn narrow<T: TryFrom<u64>>(&self, key: &str, target: &'static str) -> Result<Option<T>> {
        let Some(v) = self.meta_u64_opt(key)? else {
            return Ok(None);
        };
        T::try_from(v).map(Some).map_err(|_| GgufError::OutOfRange {
            key: key.into(),
            value: v.to_string(),
            target,
        })
    }

    /// Any integer type holding a non-negative value.
    pub fn meta_u64_opt(&self, key: &str) -> Result<Option<u64>> {
        self.typed(key, "non-negative integer", MetaValue::as_u64)
    }

    pub fn meta_u32_opt(&self, key: &str) -> Result<Option<u32>> {
        self.narrow(key, "u32")
    }

    pub fn meta_usize_opt(&self, key: &str) -> Result<Option<usize>> {
        self.narrow(key, "usize")
    }

    pub fn meta_i64_opt(&self, key: &str) -> Result<Option<i64>> {
        self.typed(key, "integer", MetaValue::as_i64)
    }

    /// A float, or an integer converted.
    pub fn meta_f32_opt(&self, key: &str) -> Result<Option<f32>> {
        self.typed(key, "number", MetaValue::as_f32)
    }

    pub fn meta_str_opt(&self, key: &str) -> Result<Option<&str>> {
        self.typed(key, "string", MetaValue::as_str)
    }

    pub fn meta_bool_opt(&self, key: &str) -> Result<Option<bool>> {
        self.typed(key, "bool", MetaValue::as_bool)
    }

    pub fn meta_array_opt(&self, key: &str) -> Result<Option<&[MetaValue]>> {
        self.typed(key, "array", MetaValue::as_array)
    }

    pub fn meta_u64(&self, key: &str) -> Result<u64> {
        required(key, self.meta_u64_opt(key))
    }

    pub fn meta_u32(&self, key: &str) -> Result<u32> {
        required(key, self.meta_u32_opt(key))
    }

    pub fn meta_usize(&self, key: &str) -> Result<usize> {
        required(key, self.meta_usize_opt(key))
    }

    pub fn meta_i64(&self, key: &str) -> Result<i64> {
        required(key, self.meta_i64_opt(key))
    }

    pub fn meta_f32(&self, key: &str) -> Result<f32> {
        required(key, self.meta_f32_opt(key))
    }

    pub fn meta_str(&self, key: &str) -> Result<&str> {
        required(key, self.meta_str_opt(key))
    }

    pub fn meta_bool(&self, key: &str) -> Result<bool> {
        required(key, self.meta_bool_opt(key))
    }

    pub fn meta_array(&self, key: &str) -> Result<&[MetaValue]> {
        required(key, self.meta_array_opt(key))
    }

    /// Each element converted by `get`; the error names the array's actual
    /// element type when one does not convert.
    fn array_of<'s, T>(
        &'s self,
        key: &str,
        expected: &'static str,
        get: impl Fn(&'s MetaValue) -> Option<T>,
    ) -> Result<Option<Vec<T>>> {
        let Some(items) = self.meta_array_opt(key)? else {
            return Ok(None);
        };
        let wrong = |v: &MetaValue| GgufError::WrongType {
            key: key.into(),
            expected,
            found: value::array_of(v.type_id()),
        };
        items
            .iter()
            .map(|v| get(v).ok_or_else(|| wrong(v)))
            .collect::<Result<Vec<T>>>()
            .map(Some)
    }

    /// An array of strings (token texts, merges).
    pub fn meta_str_array_opt(&self, key: &str) -> Result<Option<Vec<&str>>> {
        self.array_of(key, "array of string", MetaValue::as_str)
    }

    /// An array of numbers (token scores).
    pub fn meta_f32_array_opt(&self, key: &str) -> Result<Option<Vec<f32>>> {
        self.array_of(key, "array of number", MetaValue::as_f32)
    }

    /// An array of integers (token types).
    pub fn meta_i64_array_opt(&self, key: &str) -> Result<Option<Vec<i64>>> {
        self.array_of(key, "array of integer", MetaValue::as_i64)
    }

    pub fn meta_str_array(&self, key: &str) -> Result<Vec<&str>> {
        required(key, self.meta_str_array_opt(key))
    }

    pub fn meta_f32_array(&self, key: &str) -> Result<Vec<f32>> {
        required(key, self.meta_f32_array_opt(key))
    }

    pub fn meta_i64_array(&self, key: &str) -> Result<Vec<i64>> {
        required(key, self.meta_i64_array_opt(key))
    }
}

fn required<T>(key: &str, v: Result<Option<T>>) -> Result<T> {
    v?.ok_or_else(|| GgufError::MissingKey(key.into()))
}
