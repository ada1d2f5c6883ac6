//! llama.cpp's split GGUF (`gguf-split`): one model published as several
//! files, each a complete GGUF. The first shard (`split.no` 0) carries all the
//! model's metadata and some tensors; the others carry only the split keys
//! and their own tensors. Files are named `PREFIX-00001-of-00003.gguf`
//! (1-based, five digits each).
//!
//! Here: the checks that a list of shard headers is one model, the model's
//! header over all its shards ([`merge`]), shard names, and [`SplitWriter`],
//! which cuts one GGUF's byte stream into shards as `gguf-split
//! --split-max-size` does (whole tensors, in file order, metadata in the first).

use std::collections::HashMap;
use std::ops::Range;

use crate::format::gguf::{GgufError, GgufFile, MetaValue, TensorInfo};
use crate::format::gguf_write::{GgufWriteError, GgufWriter};

/// This shard's number, from 0 (u16).
pub const SPLIT_NO: &str = "split.no";
/// How many shards the model has (u16).
pub const SPLIT_COUNT: &str = "split.count";
/// Tensors over all the shards (i32).
pub const SPLIT_TENSORS_COUNT: &str = "split.tensors.count";
const SPLIT_KEYS: [&str; 3] = [SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS_COUNT];
const ALIGNMENT_KEY: &str = "general.alignment";

/// What is wrong with a split model's shards. `shard` is the 0-based place
/// in the list given; messages count from 1, as the file names do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("a split model needs at least one shard; none was given")]
    NoShards,
    #[error("shard {n} is not a split GGUF shard: it has no `{key}`", n = shard + 1)]
    NotAShard { shard: usize, key: &'static str },
    #[error("shard {n}: `{key}` {reason}", n = shard + 1)]
    BadKey {
        shard: usize,
        key: &'static str,
        reason: String,
    },
    #[error("shard {n}: split.no {no} appears twice (shard {m} has it too)", n = shard + 1, m = first + 1)]
    Repeated { shard: usize, no: u64, first: usize },
    #[error("shard {n}: split.count is {found}, but the first shard's is {first}", n = shard + 1)]
    CountDiffers {
        shard: usize,
        found: u64,
        first: u64,
    },
    #[error("shard {n} of {count} (split.no {no}) is missing", n = no + 1)]
    Missing { no: u64, count: u64 },
    #[error("shard {n}: split.no is {no}, expected {shard}: the shards are out of order", n = shard + 1)]
    OutOfOrder { shard: usize, no: u64 },
    #[error("tensor `{tensor}` is in shard {a} and in shard {b}", a = first + 1, b = second + 1)]
    TensorInTwoShards {
        tensor: String,
        first: usize,
        second: usize,
    },
    #[error("split.tensors.count is {declared}, but the shards hold {found} tensors")]
    TensorCount { declared: u64, found: usize },
    #[error("shard {n}: metadata `{key}` contradicts the first shard's", n = shard + 1)]
    MetadataConflict { shard: usize, key: String },
    #[error(
        "this file is shard {n} of {count} of a split model: load it with its other shards \
         (by the first shard's name, or all of them in order)", n = no + 1
    )]
    ShardAlone { no: u64, count: u64 },
    #[error("shard {n}: its bytes came before every shard's header was known", n = shard + 1)]
    HeadersFirst { shard: usize },
    #[error("shard {n} does not exist: the model has {count} shards", n = shard + 1)]
    NoSuchShard { shard: usize, count: usize },
    #[error("shard {n}: {detail}", n = shard + 1)]
    Header { shard: usize, detail: GgufError },
    #[error("the split needs {0} shards: split.no and split.count are u16, at most 65535")]
    TooManyShards(usize),
    #[error("the largest shard size must be at least 1 byte")]
    ZeroSize,
    #[error("the input ended after {received} bytes; tensor `{tensor}` needs bytes up to {end}")]
    Truncated {
        received: u64,
        tensor: String,
        end: u64,
    },
    #[error("writing a shard's header: {0}")]
    Write(#[from] GgufWriteError),
}

/// A header's `(split.no, split.count)`, or `None` for a file without
/// `split.count` (an ordinary GGUF).
pub fn split_of(file: &GgufFile, shard: usize) -> Result<Option<(u64, u64)>, SplitError> {
    let Some(count) = key(file, shard, SPLIT_COUNT)? else {
        return Ok(None);
    };
    if count == 0 {
        return Err(SplitError::BadKey {
            shard,
            key: SPLIT_COUNT,
            reason: "is 0".into(),
        });
    }
    let no = key(file, shard, SPLIT_NO)?.ok_or(SplitError::NotAShard {
        shard,
        key: SPLIT_NO,
    })?;
    if no >= count {
        return Err(SplitError::BadKey {
            shard,
            key: SPLIT_NO,
            reason: format!("is {no}, past split.count {count}"),
        });
    }
    Ok(Some((no, count)))
}

/// A single file given alone: an ordinary GGUF, or a split of one shard.
/// A shard of a larger split is refused rather than loaded short of tensors.
pub fn check_alone(file: &GgufFile) -> Result<(), SplitError> {
    match split_of(file, 0)? {
        Some((no, count)) if count > 1 => Err(SplitError::ShardAlone { no, count }),
        _ => Ok(()),
    }
}

fn key(file: &GgufFile, shard: usize, key: &'static str) -> Result<Option<u64>, SplitError> {
    file.meta_u64_opt(key).map_err(|e| SplitError::BadKey {
        shard,
        key,
        reason: e.to_string(),
    })
}

/// One model over its shards' headers, given in order.
#[derive(Clone, Debug)]
pub struct Merged {
    /// The first shard's metadata over every shard's tensors (their offsets
    /// relative to their own shard's data section).
    pub file: GgufFile,
    /// Each tensor's shard and its byte range in that shard, by name.
    pub location: HashMap<String, (usize, Range<u64>)>,
}

/// Checks that `headers` are the shards of one model, in order, each once,
/// and gathers them: metadata from the first shard only (a later shard may
/// repeat a key, never contradict it), tensors from all.
pub fn merge(headers: &[GgufFile]) -> Result<Merged, SplitError> {
    let first = headers.first().ok_or(SplitError::NoShards)?;
    let given = headers.len();
    let mut split = Vec::with_capacity(given);
    for (i, h) in headers.iter().enumerate() {
        let (no, count) = split_of(h, i)?.ok_or(SplitError::NotAShard {
            shard: i,
            key: SPLIT_COUNT,
        })?;
        if let Some(&(_, first)) = split.first() {
            if count != first {
                return Err(SplitError::CountDiffers {
                    shard: i,
                    found: count,
                    first,
                });
            }
        }
        split.push((no, count));
    }
    check_order(&split)?;
    let mut tensors: Vec<TensorInfo> = Vec::new();
    let mut location: HashMap<String, (usize, Range<u64>)> = HashMap::new();
    for (i, h) in headers.iter().enumerate() {
        for t in &h.tensors {
            if let Some((j, _)) = location.get(&t.name) {
                return Err(SplitError::TensorInTwoShards {
                    tensor: t.name.clone(),
                    first: *j,
                    second: i,
                });
            }
            location.insert(t.name.clone(), (i, h.tensor_range(t)));
            tensors.push(t.clone());
        }
        if i > 0 {
            check_metadata(first, h, i)?;
        }
    }
    // Required in the first shard; checked wherever a shard carries it.
    key(first, 0, SPLIT_TENSORS_COUNT)?.ok_or(SplitError::NotAShard {
        shard: 0,
        key: SPLIT_TENSORS_COUNT,
    })?;
    for (i, h) in headers.iter().enumerate() {
        if let Some(d) = key(h, i, SPLIT_TENSORS_COUNT)? {
            if d != tensors.len() as u64 {
                return Err(SplitError::TensorCount {
                    declared: d,
                    found: tensors.len(),
                });
            }
        }
    }
    let file = first
        .with_tensors(tensors)
        .map_err(|detail| SplitError::Header { shard: 0, detail })?;
    Ok(Merged { file, location })
}

/// `split.no` of each shard given must be its place: a repeat, a missing
/// shard (fewer shards given than `split.count`) and a swap each get their
/// own error.
fn check_order(split: &[(u64, u64)]) -> Result<(), SplitError> {
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for (i, &(no, _)) in split.iter().enumerate() {
        if let Some(&first) = seen.get(&no) {
            return Err(SplitError::Repeated {
                shard: i,
                no,
                first,
            });
        }
        seen.insert(no, i);
    }
    // The values are distinct and below the count: fewer shards given than
    // the count leaves a gap (more would have repeated one above).
    let count = split[0].1;
    if let Some(no) = (0..count).find(|no| !seen.contains_key(no)) {
        return Err(SplitError::Missing { no, count });
    }
    for (i, &(no, _)) in split.iter().enumerate() {
        if no != i as u64 {
            return Err(SplitError::OutOfOrder { shard: i, no });
        }
    }
    Ok(())
}

/// A later shard's metadata may repeat the first's (and carries its own
/// split keys and alignment); a value that differs is refused.
fn check_metadata(first: &GgufFile, other: &GgufFile, shard: usize) -> Result<(), SplitError> {
    for (k, v) in &other.metadata {
        if SPLIT_KEYS.contains(&k.as_str()) || k == ALIGNMENT_KEY {
            continue;
        }
        if first.meta(k).is_some_and(|f| f != v) {
            return Err(SplitError::MetadataConflict {
                shard,
                key: k.clone(),
            });
        }
    }
    Ok(())
}

/// `PREFIX-00002-of-00003.gguf` for shard `no` (0-based) of `count`.
pub fn shard_name(prefix: &str, no: usize, count: usize) -> String {
    format!("{prefix}-{:05}-of-{:05}.gguf", no + 1, count)
}

/// A shard's file name split into `(prefix, no, count)`, `no` 0-based; `None`
/// for a name not of the form `PREFIX-NNNNN-of-MMMMM.gguf`.
pub fn parse_shard_name(name: &str) -> Option<(&str, usize, usize)> {
    let stem = name.strip_suffix(".gguf")?;
    // "-NNNNN-of-MMMMM": 15 bytes.
    let cut = stem.len().checked_sub(15)?;
    let (prefix, tail) = (stem.get(..cut)?, stem.get(cut..)?);
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    let (no, count) = (tail.get(1..6)?, tail.get(10..15)?);
    if !tail.starts_with('-') || tail.get(6..10)? != "-of-" || !digits(no) || !digits(count) {
        return None;
    }
    let (no, count): (usize, usize) = (no.parse().ok()?, count.parse().ok()?);
    (no >= 1 && no <= count).then_some((prefix, no - 1, count))
}

/// Cuts one GGUF's bytes, fed in order, into shards of at most `max_bytes`
/// of tensor data each (a tensor larger than that alone in its shard):
/// whole tensors in file order, all the metadata in the first shard, each
/// shard a complete GGUF. Only the shards' headers are held; tensor bytes
/// pass straight through.
pub struct SplitWriter {
    headers: Vec<Vec<u8>>,
    /// Each tensor's range in the input and its shard, in input order.
    queue: Vec<(String, Range<u64>, usize)>,
    alignment: u64,
    next: usize,
    received: u64,
    /// Shards whose header went out.
    started: usize,
    /// Bytes of `queue[next]` already sent.
    sent: u64,
}

impl SplitWriter {
    pub fn new(file: &GgufFile, max_bytes: u64) -> Result<SplitWriter, SplitError> {
        check_alone(file)?;
        if max_bytes == 0 {
            return Err(SplitError::ZeroSize);
        }
        let alignment = file.alignment;
        let mut order: Vec<&TensorInfo> = file.tensors.iter().collect();
        order.sort_by_key(|t| t.offset);
        // Greedy as gguf-split: a new shard when the next tensor would pass
        // the size and the current one already holds something.
        let mut groups: Vec<Vec<&TensorInfo>> = vec![Vec::new()];
        let mut size = 0u64;
        for t in order {
            let padded = t.n_bytes.next_multiple_of(alignment);
            let current = groups.last_mut().expect("one group at least");
            if !current.is_empty() && size + padded > max_bytes {
                groups.push(vec![t]);
                size = padded;
            } else {
                current.push(t);
                size += padded;
            }
        }
        let count = groups.len();
        let count16 = u16::try_from(count).map_err(|_| SplitError::TooManyShards(count))?;
        let n_tensors = i32::try_from(file.tensors.len()).map_err(|_| SplitError::BadKey {
            shard: 0,
            key: SPLIT_TENSORS_COUNT,
            reason: format!("{} tensors do not fit in i32", file.tensors.len()),
        })?;
        let mut headers = Vec::with_capacity(count);
        let mut queue = Vec::new();
        for (i, group) in groups.iter().enumerate() {
            let mut w = GgufWriter::new().version(file.version);
            for (k, v) in &file.metadata {
                let keep = if i == 0 {
                    !SPLIT_KEYS.contains(&k.as_str())
                } else {
                    k == ALIGNMENT_KEY
                };
                if keep {
                    w = w.meta(k, v.clone());
                }
            }
            w = w
                .meta(SPLIT_NO, MetaValue::U16(i as u16))
                .meta(SPLIT_COUNT, MetaValue::U16(count16))
                .meta(SPLIT_TENSORS_COUNT, MetaValue::I32(n_tensors));
            for t in group {
                w = w.declare_tensor(&t.name, &t.dims, t.dtype);
                queue.push((t.name.clone(), file.tensor_range(t), i));
            }
            headers.push(w.try_header()?);
        }
        Ok(SplitWriter {
            headers,
            queue,
            alignment,
            next: 0,
            received: 0,
            started: 0,
            sent: 0,
        })
    }

    /// How many shards the input makes.
    pub fn count(&self) -> usize {
        self.headers.len()
    }

    /// Takes the next bytes of the input and sends what they complete to
    /// `out(shard, bytes)`: a shard's header before its first tensor, each
    /// tensor's bytes, then its padding.
    pub fn push<E>(
        &mut self,
        chunk: &[u8],
        out: &mut impl FnMut(usize, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let offset = self.received;
        let end = offset + chunk.len() as u64;
        self.received = end;
        if self.started == 0 {
            out(0, &self.headers[0])?;
            self.started = 1;
        }
        while let Some((_, range, shard)) = self.queue.get(self.next) {
            let (range, shard) = (range.clone(), *shard);
            if range.start + self.sent >= end {
                break;
            }
            while self.started <= shard {
                out(self.started, &self.headers[self.started])?;
                self.started += 1;
            }
            let from = (range.start + self.sent).max(offset);
            let to = range.end.min(end);
            if to > from {
                out(
                    shard,
                    &chunk[(from - offset) as usize..(to - offset) as usize],
                )?;
                self.sent += to - from;
            }
            if range.start + self.sent < range.end {
                break;
            }
            let len = range.end - range.start;
            let pad = len.next_multiple_of(self.alignment) - len;
            out(shard, &vec![0u8; pad as usize])?;
            self.next += 1;
            self.sent = 0;
        }
        Ok(())
    }

    /// Checks the input held every tensor.
    pub fn finish(&self) -> Result<(), SplitError> {
        match self.queue.get(self.next) {
            Some((name, range, _)) => Err(SplitError::Truncated {
                received: self.received,
                tensor: name.clone(),
                end: range.end,
            }),
            None => Ok(()),
        }
    }
}
