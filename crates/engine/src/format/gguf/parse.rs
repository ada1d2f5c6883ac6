//! Reading the header (metadata, then the tensor table) from bytes.
//!
//! Layout (all little-endian): "GGUF", version: u32, tensor count: u64,
//! metadata count: u64; each metadata entry is key: string, type: u32, value;
//! each tensor is name: string, n_dims: u32, dims: [u64; n_dims] (ne0 first),
//! type: u32, offset: u64 (from the data section start). A string is a u64
//! byte length then UTF-8 bytes; an array is element type: u32, count: u64,
//! elements. The data section starts at the header end rounded up to the
//! alignment.
//!
//! Two modes: for a whole file, running out of bytes is `Truncated`; for a
//! prefix (the browser fetches the header by ranges), it is `NeedMoreHeader`
//! with the least length worth fetching. Counts are checked against the bytes
//! that could hold them before anything is allocated for them.

use std::collections::HashMap;

use super::value::type_id;
use super::{GgufError, GgufFile, MetaValue, TensorInfo};
use crate::format::quant::GgmlType;

/// No real header comes near this (a 262k-token vocabulary is ~10 MB); a
/// prefix parse treats counts that would need more as corrupt.
const MAX_HEADER_BYTES: u64 = 1 << 30;
/// Most metadata array elements accepted in one file, all arrays together:
/// ~5x what the largest vocabularies use (262k tokens with scores and types).
/// Each costs 32 bytes parsed, even a one-byte one, so this bounds memory.
const MAX_ARRAY_ELEMENTS: u64 = 1 << 22;
/// Arrays of arrays (of arrays ...) deeper than this are refused, so corrupt
/// input cannot recurse the stack away.
const MAX_NESTING: usize = 4;
/// Vectors sized by a count from the file start at most this big and grow as
/// entries actually parse, so memory follows the bytes read, not the count.
const MAX_PREALLOC: u64 = 4096;
/// ggml tensors have at most this many dimensions.
const MAX_DIMS: u32 = 4;
const DEFAULT_ALIGNMENT: u64 = 32;

type Result<T> = std::result::Result<T, GgufError>;
type What<'w> = &'w dyn Fn() -> String;

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    whole: bool,
    /// Array elements still allowed (see [`MAX_ARRAY_ELEMENTS`]).
    array_budget: u64,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn short(&self, n: u64, what: What) -> GgufError {
        if self.whole {
            GgufError::Truncated {
                what: what(),
                offset: self.offset(),
                needed: n,
                available: self.remaining(),
            }
        } else {
            GgufError::NeedMoreHeader {
                needed_at_least: self.offset().saturating_add(n),
            }
        }
    }

    fn take(&mut self, n: u64, what: What) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.short(n, what));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn bytes<const N: usize>(&mut self, what: What) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N as u64, what)?);
        Ok(a)
    }

    fn u32(&mut self, what: What) -> Result<u32> {
        self.bytes(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: What) -> Result<u64> {
        self.bytes(what).map(u64::from_le_bytes)
    }

    /// Checks that `count` items of at least `min_size` bytes each can follow
    /// before anything is sized by `count`. `at` is where the count was read.
    fn check_count(&self, count: u64, min_size: u64, at: u64, what: What) -> Result<()> {
        let limit = if self.whole {
            self.remaining()
        } else {
            MAX_HEADER_BYTES.saturating_sub(self.offset())
        };
        match count.checked_mul(min_size) {
            Some(need) if need <= limit => match need > self.remaining() {
                true => Err(self.short(need, what)),
                false => Ok(()),
            },
            _ => Err(GgufError::ImplausibleCount {
                what: what(),
                count,
                offset: at,
            }),
        }
    }

    fn string(&mut self, what: What) -> Result<String> {
        let at = self.offset();
        let len_of = || format!("length of {}", what());
        let len = self.u64(&len_of)?;
        self.check_count(len, 1, at, &len_of)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::BadUtf8 {
            what: what(),
            offset: at + 8,
        })
    }

    fn value(&mut self, ty: u32, key: &str, depth: usize) -> Result<MetaValue> {
        let what = || format!("value of `{key}`");
        Ok(match ty {
            type_id::U8 => MetaValue::U8(self.bytes::<1>(&what)?[0]),
            type_id::I8 => MetaValue::I8(i8::from_le_bytes(self.bytes(&what)?)),
            type_id::U16 => MetaValue::U16(u16::from_le_bytes(self.bytes(&what)?)),
            type_id::I16 => MetaValue::I16(i16::from_le_bytes(self.bytes(&what)?)),
            type_id::U32 => MetaValue::U32(u32::from_le_bytes(self.bytes(&what)?)),
            type_id::I32 => MetaValue::I32(i32::from_le_bytes(self.bytes(&what)?)),
            type_id::U64 => MetaValue::U64(u64::from_le_bytes(self.bytes(&what)?)),
            type_id::I64 => MetaValue::I64(i64::from_le_bytes(self.bytes(&what)?)),
            type_id::F32 => MetaValue::F32(f32::from_le_bytes(self.bytes(&what)?)),
            type_id::F64 => MetaValue::F64(f64::from_le_bytes(self.bytes(&what)?)),
            type_id::BOOL => match self.bytes::<1>(&what)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                value => {
                    return Err(GgufError::BadBool {
                        key: key.to_owned(),
                        value,
                    })
                }
            },
            type_id::STRING => MetaValue::String(self.string(&what)?),
            type_id::ARRAY => self.array(key, depth)?,
            id => {
                return Err(GgufError::UnknownValueType {
                    key: key.to_owned(),
                    id,
                })
            }
        })
    }

    fn array(&mut self, key: &str, depth: usize) -> Result<MetaValue> {
        if depth >= MAX_NESTING {
            return Err(GgufError::NestingTooDeep {
                key: key.to_owned(),
                max: MAX_NESTING,
            });
        }
        let elem = self.u32(&|| format!("array type of `{key}`"))?;
        let Some(min_size) = min_value_size(elem) else {
            return Err(GgufError::UnknownValueType {
                key: key.to_owned(),
                id: elem,
            });
        };
        let at = self.offset();
        let what = || format!("array length of `{key}`");
        let count = self.u64(&what)?;
        if count > self.array_budget {
            return Err(GgufError::ImplausibleCount {
                what: what(),
                count,
                offset: at,
            });
        }
        self.array_budget -= count;
        self.check_count(count, min_size, at, &what)?;
        let mut items = Vec::with_capacity(prealloc(count));
        for _ in 0..count {
            items.push(self.value(elem, key, depth + 1)?);
        }
        Ok(MetaValue::Array(items))
    }
}

fn prealloc(count: u64) -> usize {
    count.min(MAX_PREALLOC) as usize
}

/// Fewest bytes a value of this type takes; `None` for an unknown type.
fn min_value_size(ty: u32) -> Option<u64> {
    Some(match ty {
        type_id::U8 | type_id::I8 | type_id::BOOL => 1,
        type_id::U16 | type_id::I16 => 2,
        type_id::U32 | type_id::I32 | type_id::F32 => 4,
        type_id::U64 | type_id::I64 | type_id::F64 | type_id::STRING => 8,
        type_id::ARRAY => 12,
        _ => return None,
    })
}

pub(super) fn parse(buf: &[u8], whole: bool) -> Result<GgufFile> {
    let mut c = Cursor {
        buf,
        pos: 0,
        whole,
        array_budget: MAX_ARRAY_ELEMENTS,
    };
    // Judge the magic on whatever part of it is present, so a non-GGUF
    // prefix fails at once instead of asking for more bytes.
    let head = &buf[..buf.len().min(4)];
    if head != &b"GGUF"[..head.len()] {
        let mut found = [0u8; 4];
        found[..head.len()].copy_from_slice(head);
        return Err(GgufError::BadMagic { found });
    }
    c.take(4, &|| "magic".into())?;
    let version = c.u32(&|| "version".into())?;
    match version {
        2 | 3 => {}
        v if matches!(v.swap_bytes(), 2 | 3) => {
            return Err(GgufError::BigEndian {
                version: v.swap_bytes(),
            })
        }
        v => return Err(GgufError::UnsupportedVersion(v)),
    }
    let tensors_at = c.offset();
    let n_tensors = c.u64(&|| "tensor count".into())?;
    let kv_at = c.offset();
    let n_kv = c.u64(&|| "metadata count".into())?;

    // Smallest entry: empty key (8) + type (4) + one-byte value.
    c.check_count(n_kv, 13, kv_at, &|| "metadata count".into())?;
    let mut metadata = Vec::with_capacity(prealloc(n_kv));
    let mut meta_index = HashMap::with_capacity(prealloc(n_kv));
    for i in 0..n_kv {
        let key = c.string(&|| format!("key of metadata entry {i}"))?;
        let ty = c.u32(&|| format!("value type of `{key}`"))?;
        let value = c.value(ty, &key, 0)?;
        if meta_index.insert(key.clone(), metadata.len()).is_some() {
            return Err(GgufError::DuplicateKey(key));
        }
        metadata.push((key, value));
    }
    let alignment = alignment(&metadata, &meta_index)?;

    // Smallest tensor entry: empty name (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
    c.check_count(n_tensors, 32, tensors_at, &|| "tensor count".into())?;
    let mut tensors = Vec::with_capacity(prealloc(n_tensors));
    let mut tensor_index = HashMap::with_capacity(prealloc(n_tensors));
    for i in 0..n_tensors {
        let t = tensor_info(&mut c, i, alignment)?;
        if tensor_index.insert(t.name.clone(), tensors.len()).is_some() {
            return Err(GgufError::DuplicateTensor(t.name));
        }
        tensors.push(t);
    }

    let header_len = c.offset();
    let data_offset = header_len
        .checked_next_multiple_of(alignment)
        .ok_or(GgufError::BadAlignment(alignment))?;
    check_layout(&tensors, data_offset)?;
    Ok(GgufFile {
        version,
        alignment,
        metadata,
        tensors,
        header_len,
        data_offset,
        meta_index,
        tensor_index,
    })
}

fn alignment(metadata: &[(String, MetaValue)], index: &HashMap<String, usize>) -> Result<u64> {
    const KEY: &str = "general.alignment";
    let Some(&i) = index.get(KEY) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let v = &metadata[i].1;
    let a = v.as_u64().ok_or_else(|| GgufError::WrongType {
        key: KEY.into(),
        expected: "non-negative integer",
        found: v.type_name(),
    })?;
    if !a.is_power_of_two() {
        return Err(GgufError::BadAlignment(a));
    }
    Ok(a)
}

fn tensor_info(c: &mut Cursor, i: u64, alignment: u64) -> Result<TensorInfo> {
    let name = c.string(&|| format!("name of tensor {i}"))?;
    let what = || format!("entry of tensor `{name}`");
    let n_dims = c.u32(&what)?;
    let bad = |reason: String| GgufError::BadTensorShape {
        tensor: name.clone(),
        reason,
    };
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(bad(format!(
            "{n_dims} dimensions, expected 1 to {MAX_DIMS}"
        )));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(c.u64(&what)?);
    }
    let type_id = c.u32(&what)?;
    let offset = c.u64(&what)?;
    let Some(dtype) = GgmlType::from_id(type_id) else {
        return Err(GgufError::UnknownTensorType {
            tensor: name,
            id: type_id,
        });
    };
    if dims.contains(&0) {
        return Err(bad(format!("dimensions {dims:?} include 0")));
    }
    // ggml counts elements in i64.
    let n_elements = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(|| bad(format!("dimensions {dims:?} overflow the element count")))?;
    // Blocks never straddle rows, so each row must be whole blocks.
    let row = dtype.row_bytes(dims[0]).ok_or_else(|| {
        bad(format!(
            "row of {} elements is not a whole number of {dtype} blocks of {}",
            dims[0],
            dtype.block_elements()
        ))
    })?;
    let n_bytes = row
        .checked_mul(n_elements / dims[0])
        .ok_or_else(|| bad(format!("dimensions {dims:?} overflow the byte size")))?;
    if offset % alignment != 0 {
        return Err(GgufError::Misaligned {
            tensor: name,
            offset,
            alignment,
        });
    }
    Ok(TensorInfo {
        name,
        dims,
        dtype,
        offset,
        n_elements,
        n_bytes,
    })
}

/// Every tensor's absolute end must fit in u64, and no two may share bytes.
fn check_layout(tensors: &[TensorInfo], data_offset: u64) -> Result<()> {
    for t in tensors {
        if data_offset
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.n_bytes))
            .is_none()
        {
            return Err(GgufError::TensorOutOfBounds {
                tensor: t.name.clone(),
                start: data_offset.saturating_add(t.offset),
                end: u64::MAX,
                file_len: u64::MAX,
            });
        }
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for w in order.windows(2) {
        if w[0].offset + w[0].n_bytes > w[1].offset {
            return Err(GgufError::OverlappingTensors {
                first: w[0].name.clone(),
                second: w[1].name.clone(),
            });
        }
    }
    Ok(())
}
