//! Hugging Face safetensors files: the header (a tensor table) and where each
//! tensor's bytes lie. Sharded checkpoints list their files in
//! `model.safetensors.index.json` (see `safetensors_index.rs`).
//!
//! Layout: a little-endian u64 header length N, N bytes of JSON
//! `{"__metadata__": {..}, "name": {"dtype": "F32", "shape": [..],
//! "data_offsets": [begin, end]}, ..}`, then the data; offsets are relative
//! to the data's start, shapes row-major (the last dimension contiguous).
//!
//! Like the GGUF header, this one can be parsed from a prefix of the file
//! (the browser fetches it by ranges): a prefix that ends inside it is
//! `NeedMoreHeader`. Each entry is read by the `safetensors` crate's own
//! types (dtype names, the entry's fields); the checks are made here so each
//! problem names its tensor: byte lengths equal shape x dtype size, no two
//! tensors overlap, every tensor inside the file. Gaps between tensors are
//! allowed: their bytes are never read.

use std::fmt;

use ::safetensors::tensor::TensorInfo as EntryInfo;
pub use ::safetensors::Dtype;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// The safetensors crate refuses larger headers; so does this reader.
const MAX_HEADER_BYTES: u64 = 100_000_000;
/// Bytes of the header-length prefix.
const LEN_BYTES: u64 = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SafetensorsError {
    /// Only from a prefix: fetch at least this many bytes from the start and retry.
    #[error(
        "safetensors header continues past the bytes given: need at least {needed_at_least} bytes"
    )]
    NeedMoreHeader { needed_at_least: u64 },
    #[error("safetensors header of {0} bytes: more than the {MAX_HEADER_BYTES} allowed")]
    HeaderTooLarge(u64),
    #[error("safetensors header is not a JSON object of tensors: {0}")]
    BadHeader(String),
    #[error("tensor `{0}` appears twice in the safetensors header")]
    DuplicateTensor(String),
    #[error("tensor `{tensor}` has a bad header entry: {reason}")]
    BadTensor { tensor: String, reason: String },
    #[error(
        "tensor `{tensor}` of {dtype:?} {shape:?} needs {expected} bytes, its offsets span {found}"
    )]
    SizeMismatch {
        tensor: String,
        dtype: Dtype,
        shape: Vec<u64>,
        expected: u64,
        found: u64,
    },
    #[error("tensors `{first}` and `{second}` overlap in the data")]
    Overlap { first: String, second: String },
    #[error("tensor `{tensor}` occupies bytes {start}..{end} but the file has {file_len}")]
    OutOfBounds {
        tensor: String,
        start: u64,
        end: u64,
        file_len: u64,
    },
    #[error("model.safetensors.index.json: {0}")]
    BadIndex(String),
}

/// One tensor of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafeTensor {
    pub name: String,
    pub dtype: Dtype,
    /// Row-major: the last dimension is contiguous (the reverse of ggml's order).
    pub shape: Vec<u64>,
    /// Absolute byte range in the file (the header included before it).
    pub start: u64,
    pub end: u64,
}

impl SafeTensor {
    pub fn n_elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// A parsed, checked safetensors header.
#[derive(Clone, Debug)]
pub struct SafetensorsHeader {
    /// The header-length prefix plus the JSON: where the data starts.
    pub data_offset: u64,
    /// In file order (by start offset).
    pub tensors: Vec<SafeTensor>,
}

type Result<T> = std::result::Result<T, SafetensorsError>;

impl SafetensorsHeader {
    /// Parses the header from the start of a file; `bytes` may be a prefix.
    pub fn parse(bytes: &[u8]) -> Result<SafetensorsHeader> {
        let need = |n: u64| SafetensorsError::NeedMoreHeader { needed_at_least: n };
        let len_bytes = bytes.get(..LEN_BYTES as usize).ok_or(need(LEN_BYTES))?;
        let json_len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
        if json_len > MAX_HEADER_BYTES {
            return Err(SafetensorsError::HeaderTooLarge(json_len));
        }
        let data_offset = LEN_BYTES + json_len;
        let json = bytes
            .get(LEN_BYTES as usize..data_offset as usize)
            .ok_or(need(data_offset))?;
        let entries: Entries =
            serde_json::from_slice(json).map_err(|e| SafetensorsError::BadHeader(e.to_string()))?;
        let mut tensors = Vec::with_capacity(entries.0.len());
        let mut seen = std::collections::HashSet::new();
        for (name, value) in entries.0 {
            if !seen.insert(name.clone()) {
                return Err(SafetensorsError::DuplicateTensor(name));
            }
            if name == "__metadata__" {
                continue;
            }
            tensors.push(tensor(name, value, data_offset)?);
        }
        tensors.sort_by_key(|t| (t.start, t.end));
        for pair in tensors.windows(2) {
            if pair[1].start < pair[0].end {
                return Err(SafetensorsError::Overlap {
                    first: pair[0].name.clone(),
                    second: pair[1].name.clone(),
                });
            }
        }
        Ok(SafetensorsHeader {
            data_offset,
            tensors,
        })
    }

    /// Checks every tensor lies inside a file of `file_len` bytes.
    pub fn check_file_len(&self, file_len: u64) -> Result<()> {
        match self.tensors.iter().find(|t| t.end > file_len) {
            Some(t) => Err(SafetensorsError::OutOfBounds {
                tensor: t.name.clone(),
                start: t.start,
                end: t.end,
                file_len,
            }),
            None => Ok(()),
        }
    }

    /// The file's length as the header describes it: its last tensor's end.
    pub fn file_len(&self) -> u64 {
        self.tensors.last().map_or(self.data_offset, |t| t.end)
    }

    pub fn tensor(&self, name: &str) -> Option<&SafeTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// Reads one entry through the safetensors crate's `TensorInfo` and checks it.
fn tensor(name: String, value: Value, data_offset: u64) -> Result<SafeTensor> {
    let bad = |reason: String| SafetensorsError::BadTensor {
        tensor: name.clone(),
        reason,
    };
    let info: EntryInfo = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
    let (begin, end) = (info.data_offsets.0 as u64, info.data_offsets.1 as u64);
    if end < begin {
        return Err(bad(format!(
            "data_offsets [{begin}, {end}] end before they begin"
        )));
    }
    let shape: Vec<u64> = info.shape.iter().map(|&d| d as u64).collect();
    let overflow = || {
        bad(format!(
            "{shape:?} of {:?} overflows a byte count",
            info.dtype
        ))
    };
    let bits = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .and_then(|n| n.checked_mul(info.dtype.bitsize() as u64))
        .ok_or_else(overflow)?;
    if bits % 8 != 0 {
        return Err(bad(format!(
            "{bits} bits of {:?} are not whole bytes",
            info.dtype
        )));
    }
    if bits / 8 != end - begin {
        return Err(SafetensorsError::SizeMismatch {
            tensor: name,
            dtype: info.dtype,
            shape,
            expected: bits / 8,
            found: end - begin,
        });
    }
    let abs = |o: u64| o.checked_add(data_offset).ok_or_else(overflow);
    Ok(SafeTensor {
        start: abs(begin)?,
        end: abs(end)?,
        name,
        dtype: info.dtype,
        shape,
    })
}

/// The header's entries in order, keeping duplicates (a JSON map would keep
/// only the last of two entries of one name, hiding the other).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Entries, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of tensor entries")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Entries, A::Error> {
                let mut out: Vec<(String, Value)> = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(EntriesVisitor)
    }
}
