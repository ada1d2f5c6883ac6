//! Loading a model's tensors onto the GPU, checked first, in file order.
//!
//! An architecture says which tensors it needs (name, kind, shape) from the
//! header alone. Every one is checked (present, shape, a type the kernels
//! decode) before the first byte is uploaded, so a bad file fails fast naming
//! the tensor. Tensors are then uploaded in the order they lie in the file, so
//! a source that arrives as a stream (a `fetch()` body in the browser) is
//! uploaded tensor by tensor and never held whole in memory. The architecture
//! finally takes its uploaded tensors out of the `TensorStore` by name.

use std::collections::HashMap;

use crate::format::gguf::{GgufFile, TensorInfo};
use crate::format::quant::{dequantize, GgmlType};
use crate::gpu::{BufferRef, GpuContext, WeightStore};
use crate::kernels::weights::streamed::MatrixUpload;
use crate::kernels::weights::{ExpertStack, QuantMatrix, GPU_DTYPES};

use super::fusion::{Complete, FusedTail, Fusion, Layout, Pending};
use super::rope_scaling::{ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT, ROPE_FREQS};
use super::ModelError;

/// Progress of a load, in bytes of the file.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadProgress {
    pub loaded: u64,
    pub total: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeedKind {
    /// A weight matrix, kept in its stored format: `rows` outputs by `cols` inputs.
    Matrix { rows: usize, cols: usize },
    /// A norm weight or bias, dequantized to f32 (small, read often).
    Vector { len: usize },
    /// A stack of `experts` matrices of `rows` x `cols` (mixture of experts),
    /// kept in its stored format.
    Experts {
        experts: usize,
        rows: usize,
        cols: usize,
    },
}

/// A tensor an architecture needs.
#[derive(Clone, Debug)]
pub struct Need {
    pub name: String,
    pub kind: NeedKind,
}

impl Need {
    pub fn matrix(name: impl Into<String>, rows: usize, cols: usize) -> Need {
        Need {
            name: name.into(),
            kind: NeedKind::Matrix { rows, cols },
        }
    }
    pub fn vector(name: impl Into<String>, len: usize) -> Need {
        Need {
            name: name.into(),
            kind: NeedKind::Vector { len },
        }
    }
    pub fn experts(name: impl Into<String>, experts: usize, rows: usize, cols: usize) -> Need {
        Need {
            name: name.into(),
            kind: NeedKind::Experts {
                experts,
                rows,
                cols,
            },
        }
    }
    /// GGUF dims (contiguous first) the tensor must have.
    fn dims(&self) -> Vec<u64> {
        match self.kind {
            NeedKind::Matrix { rows, cols } => vec![cols as u64, rows as u64],
            NeedKind::Vector { len } => vec![len as u64],
            NeedKind::Experts {
                experts,
                rows,
                cols,
            } => vec![cols as u64, rows as u64, experts as u64],
        }
    }
}

/// Dims without trailing 1s: GGUF writers drop them (a 1 x 64 matrix such as
/// qwen2moe's shared-expert gate is stored as [64]), so [64, 1] and [64] are
/// one shape.
fn trimmed(dims: &[u64]) -> &[u64] {
    let len = dims.iter().rposition(|&d| d != 1).map_or(0, |i| i + 1);
    &dims[..len]
}

/// Checks every needed tensor against the header; returns them in file order.
pub fn check_needs<'f>(
    file: &'f GgufFile,
    needs: &[Need],
) -> Result<Vec<(&'f TensorInfo, Need)>, ModelError> {
    let mut found = Vec::with_capacity(needs.len());
    for need in needs {
        let info = file
            .tensor(&need.name)
            .ok_or_else(|| ModelError::MissingTensor(need.name.clone()))?;
        if trimmed(&info.dims) != trimmed(&need.dims()) {
            return Err(ModelError::TensorShape {
                name: need.name.clone(),
                expected: need.dims(),
                found: info.dims.clone(),
            });
        }
        let usable = match need.kind {
            NeedKind::Matrix { .. } | NeedKind::Experts { .. } => GPU_DTYPES.contains(&info.dtype),
            NeedKind::Vector { .. } => info.dtype.can_dequantize(),
        };
        if !usable {
            return Err(ModelError::UnsupportedQuant {
                tensor: need.name.clone(),
                dtype: info.dtype.name().to_string(),
            });
        }
        found.push((info, need.clone()));
    }
    found.sort_by_key(|(info, _)| info.offset);
    Ok(found)
}

/// Elements of a vector of `len` as uploaded: zero-padded to whole vec4s,
/// since kernels may read vectors as vec4 (the memory preflight counts so).
pub fn padded_vector_len(len: usize) -> usize {
    len.next_multiple_of(4)
}

/// A tensor as the store holds it once uploaded: a fused group's members
/// joined under the group's name.
#[derive(Clone, Debug)]
pub struct StoredTensor {
    pub name: String,
    pub dtype: GgmlType,
    pub kind: StoredKind,
}

#[derive(Clone, Copy, Debug)]
pub enum StoredKind {
    /// Parts hold whole `row_group`-row groups (an interleaved pair's rows).
    Matrix {
        rows: usize,
        cols: usize,
        row_group: usize,
    },
    Vector {
        len: usize,
    },
    Experts {
        experts: usize,
        rows: usize,
        cols: usize,
    },
}

/// What the store will hold after uploading `needs` (each with its type in
/// the file), from the header alone: each tensor of its own, then each
/// fused group with a member among them (rows, or a vector's length,
/// summed over its members). The memory preflight sizes these, and a model
/// built before its weights arrive takes stand-ins of them.
pub fn stored_tensors(fusions: &[Fusion], needs: &[(GgmlType, &Need)]) -> Vec<StoredTensor> {
    let member_of: HashMap<&str, usize> = fusions
        .iter()
        .enumerate()
        .flat_map(|(f, fusion)| fusion.members.iter().map(move |m| (m.as_str(), f)))
        .collect();
    let mut groups: Vec<Option<StoredTensor>> = vec![None; fusions.len()];
    let mut out = Vec::new();
    for &(dtype, need) in needs {
        let fused = member_of.get(need.name.as_str()).copied();
        let kind = match need.kind {
            NeedKind::Matrix { rows, cols } => StoredKind::Matrix {
                rows,
                cols,
                row_group: 1,
            },
            NeedKind::Vector { len } => StoredKind::Vector { len },
            NeedKind::Experts {
                experts,
                rows,
                cols,
            } => StoredKind::Experts {
                experts,
                rows,
                cols,
            },
        };
        let Some(f) = fused.filter(|_| !matches!(kind, StoredKind::Experts { .. })) else {
            out.push(StoredTensor {
                name: need.name.clone(),
                dtype,
                kind,
            });
            continue;
        };
        let fusion = &fusions[f];
        let group = groups[f].get_or_insert_with(|| StoredTensor {
            name: fusion.name.clone(),
            dtype,
            kind: match kind {
                StoredKind::Matrix { cols, .. } => StoredKind::Matrix {
                    rows: 0,
                    cols,
                    row_group: if fusion.layout == Layout::Interleave {
                        2
                    } else {
                        1
                    },
                },
                _ => StoredKind::Vector { len: 0 },
            },
        });
        match (&mut group.kind, kind) {
            (StoredKind::Matrix { rows: sum, .. }, StoredKind::Matrix { rows, .. }) => *sum += rows,
            (StoredKind::Vector { len: sum }, StoredKind::Vector { len }) => *sum += len,
            _ => {}
        }
    }
    out.extend(groups.into_iter().flatten());
    out
}

/// A tensor being uploaded as its bytes arrive (`TensorStore::begin_stream`).
pub enum Streaming {
    /// A matrix or expert stack of its own.
    Matrix(MatrixUpload),
    /// The last member of a fused group.
    Fused(FusedTail),
}

impl Streaming {
    /// Bytes of the tensor received so far.
    pub fn received(&self) -> u64 {
        match self {
            Streaming::Matrix(up) => up.received(),
            Streaming::Fused(tail) => tail.received(),
        }
    }

    /// Takes the tensor's next bytes.
    pub fn push(&mut self, ctx: &GpuContext, bytes: &[u8]) -> Result<(), ModelError> {
        match self {
            Streaming::Matrix(up) => Ok(up.push(ctx, bytes)?),
            Streaming::Fused(tail) => tail.push(ctx, bytes),
        }
    }
}

/// Uploaded tensors, taken out by name as the architecture builds itself.
/// Members of a fusion (`fusion.rs`) are found under the fusion's name.
#[derive(Default)]
pub struct TensorStore {
    matrices: HashMap<String, QuantMatrix>,
    vectors: HashMap<String, BufferRef>,
    stacks: HashMap<String, ExpertStack>,
    pending: Pending,
}

impl TensorStore {
    pub fn new(fusions: Vec<Fusion>) -> TensorStore {
        TensorStore {
            pending: Pending::new(fusions),
            ..Default::default()
        }
    }

    /// A store of stand-ins for what uploading `needs` will hold
    /// (`stored_tensors`): matrices planned in parts as their uploads will
    /// be, every part bound to one small buffer and every vector to another
    /// (as long as the longest), which hold none of their bytes. A model
    /// built from it records the steps the real one will (and refuses what
    /// the real one would), so its kernels are known before the weights
    /// arrive; it is never run.
    pub fn stand_ins(
        ctx: &GpuContext,
        fusions: &[Fusion],
        needs: &[(GgmlType, &Need)],
    ) -> Result<TensorStore, ModelError> {
        let stored = stored_tensors(fusions, needs);
        // Steps check that a vector's buffer holds what they read: the one
        // buffer holds the longest.
        let longest = stored
            .iter()
            .map(|t| match t.kind {
                StoredKind::Vector { len } => padded_vector_len(len),
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let vector = ctx.create_storage("stand-in vectors", 4 * longest.max(4) as u64)?;
        // Recording checks no part's size; a part is a buffer or a texture
        // as the context keeps weights.
        const PART_BYTES: u64 = 256;
        let part = match ctx.weight_store {
            WeightStore::Buffers => ctx.create_storage("stand-in weights", PART_BYTES)?,
            WeightStore::Textures => ctx.upload_weight_texture(
                "stand-in weights",
                &[0; PART_BYTES as usize],
                PART_BYTES,
            )?,
        };
        let mut store = TensorStore::default();
        for t in stored {
            match t.kind {
                StoredKind::Matrix {
                    rows,
                    cols,
                    row_group,
                } => {
                    let m = QuantMatrix::stand_in(
                        ctx,
                        &t.name,
                        t.dtype,
                        (rows, cols),
                        row_group,
                        &part,
                    )?;
                    store.matrices.insert(t.name, m);
                }
                StoredKind::Vector { .. } => {
                    store.vectors.insert(t.name, vector.clone());
                }
                StoredKind::Experts {
                    experts,
                    rows,
                    cols,
                } => {
                    let matrix = QuantMatrix::stand_in(
                        ctx,
                        &t.name,
                        t.dtype,
                        (experts * rows, cols),
                        rows,
                        &part,
                    )?;
                    let stack = ExpertStack {
                        matrix,
                        experts,
                        rows,
                    };
                    store.stacks.insert(t.name, stack);
                }
            }
        }
        Ok(store)
    }

    /// As [`upload`](Self::upload), taking the bytes: a fused group's
    /// member keeps them without a copy until its group is whole.
    pub fn upload_vec(
        &mut self,
        ctx: &GpuContext,
        info: &TensorInfo,
        need: &Need,
        bytes: Vec<u8>,
    ) -> Result<(), ModelError> {
        match need.kind {
            NeedKind::Matrix { rows, cols } if self.pending.is_member(&need.name) => {
                let done = self
                    .pending
                    .matrix(ctx, &need.name, info.dtype, rows, cols, bytes)?;
                if let Some(Complete::Matrix(name, m)) = done {
                    self.matrices.insert(name, m);
                }
                Ok(())
            }
            _ => self.upload(ctx, info, need, &bytes),
        }
    }

    /// Uploads one tensor from its complete bytes.
    pub fn upload(
        &mut self,
        ctx: &GpuContext,
        info: &TensorInfo,
        need: &Need,
        bytes: &[u8],
    ) -> Result<(), ModelError> {
        match need.kind {
            NeedKind::Matrix { rows, cols } if self.pending.is_member(&need.name) => {
                let done =
                    self.pending
                        .matrix(ctx, &need.name, info.dtype, rows, cols, bytes.to_vec())?;
                if let Some(Complete::Matrix(name, m)) = done {
                    self.matrices.insert(name, m);
                }
            }
            NeedKind::Matrix { rows, cols } => {
                let m = QuantMatrix::upload(ctx, &need.name, info.dtype, rows, cols, bytes)?;
                self.matrices.insert(need.name.clone(), m);
            }
            NeedKind::Vector { len } => {
                let values = dequantize(info.dtype, bytes, len)?;
                // Divisors of the RoPE frequencies: a zero or a NaN would
                // turn every angle of its pair into NaN without a word.
                let divisors = [ROPE_FREQS, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT];
                if divisors.contains(&&*need.name)
                    && values.iter().any(|v| !(v.is_finite() && *v > 0.0))
                {
                    return Err(ModelError::Config(format!(
                        "{} holds a value that is not finite and > 0",
                        need.name
                    )));
                }
                let ready = if self.pending.is_member(&need.name) {
                    match self.pending.vector(&need.name, &values) {
                        Some(Complete::Vector(name, joined)) => Some((name, joined)),
                        _ => None,
                    }
                } else {
                    Some((need.name.clone(), values))
                };
                if let Some((name, mut values)) = ready {
                    values.resize(padded_vector_len(values.len()), 0.0);
                    self.vectors
                        .insert(name.clone(), ctx.upload_f32(&name, &values)?);
                }
            }
            NeedKind::Experts {
                experts,
                rows,
                cols,
            } => {
                let stack =
                    ExpertStack::upload(ctx, &need.name, info.dtype, experts, rows, cols, bytes)?;
                self.stacks.insert(need.name.clone(), stack);
            }
        }
        Ok(())
    }

    /// Whether `need` may be uploaded as its bytes arrive
    /// ([`begin_stream`](Self::begin_stream)): a matrix or an expert stack
    /// of its own, or the member of a fused group whose other members are
    /// in (`FusedTail`). Other members are gathered, and joined once their
    /// group is whole (`fusion.rs`).
    pub fn streams(&self, need: &Need) -> bool {
        match need.kind {
            NeedKind::Matrix { .. } | NeedKind::Experts { .. }
                if !self.pending.is_member(&need.name) =>
            {
                true
            }
            NeedKind::Matrix { .. } => self.pending.streams_tail(&need.name),
            _ => false,
        }
    }

    /// Starts the upload of a tensor that [`streams`](Self::streams): its
    /// buffers made, its bytes taken with `Streaming::push`, then
    /// [`finish_stream`](Self::finish_stream).
    pub fn begin_stream(
        &mut self,
        ctx: &GpuContext,
        info: &TensorInfo,
        need: &Need,
    ) -> Result<Streaming, ModelError> {
        let (rows, cols, group) = match need.kind {
            NeedKind::Matrix { rows, cols } if self.pending.is_member(&need.name) => {
                let tail = self
                    .pending
                    .begin_tail(ctx, &need.name, info.dtype, rows, cols)?;
                return Ok(Streaming::Fused(tail));
            }
            NeedKind::Matrix { rows, cols } => (rows, cols, 1),
            NeedKind::Experts {
                experts,
                rows,
                cols,
            } => (experts * rows, cols, rows),
            NeedKind::Vector { .. } => {
                return Err(ModelError::Config(format!(
                    "'{}' is a vector: it is uploaded whole",
                    need.name
                )))
            }
        };
        let max_part = ctx.max_weight_part_bytes();
        Ok(Streaming::Matrix(MatrixUpload::begin(
            ctx, &need.name, info.dtype, rows, cols, max_part, group,
        )?))
    }

    /// Keeps the tensor `up` uploaded (or its fused group), once all its
    /// bytes were pushed.
    pub fn finish_stream(
        &mut self,
        ctx: &GpuContext,
        need: &Need,
        up: Streaming,
    ) -> Result<(), ModelError> {
        let matrix = match up {
            Streaming::Fused(tail) => {
                let (name, m) = tail.finish(ctx)?;
                self.matrices.insert(name, m);
                return Ok(());
            }
            Streaming::Matrix(up) => up.finish(ctx)?,
        };
        match need.kind {
            NeedKind::Experts { experts, rows, .. } => {
                let stack = ExpertStack {
                    matrix,
                    experts,
                    rows,
                };
                self.stacks.insert(need.name.clone(), stack);
            }
            _ => {
                self.matrices.insert(need.name.clone(), matrix);
            }
        }
        Ok(())
    }

    pub fn matrix(&mut self, name: &str) -> Result<QuantMatrix, ModelError> {
        self.matrices
            .remove(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
    }

    pub fn vector(&mut self, name: &str) -> Result<BufferRef, ModelError> {
        self.vectors
            .remove(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
    }

    pub fn experts(&mut self, name: &str) -> Result<ExpertStack, ModelError> {
        self.stacks
            .remove(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
    }

    pub fn optional_vector(&mut self, name: &str) -> Option<BufferRef> {
        self.vectors.remove(name)
    }

    pub fn optional_matrix(&mut self, name: &str) -> Option<QuantMatrix> {
        self.matrices.remove(name)
    }
}
