//! Weights joined at load so that one dispatch reads them: a block's q, k and
//! v projections (and their biases) as one matrix, its gate and up
//! projections as one matrix of interleaved row pairs (the gated epilogue of
//! `kernels::matmul::linear` needs a gate row and its up row side by side).
//!
//! Decided from the header: only matrices stored in one type can share a
//! kernel, so q/k/v join in runs of equal type (a Q4_K_M file that keeps v in
//! Q6_K or Q8_0 gets a q+k matrix and a v matrix). Every member is still
//! checked as a need of its own before any upload; a member's bytes wait on
//! the CPU only until the rest of its group has arrived (members lie next to
//! each other in the files seen), then the group is uploaded once: one copy
//! of each weight on the GPU.

use std::collections::HashMap;

use crate::format::gguf::GgufFile;
use crate::format::quant::GgmlType;
use crate::gpu::GpuContext;
use crate::kernels::weights::streamed::MatrixUpload;
use crate::kernels::weights::QuantMatrix;

/// Bytes of joined rows handed to the upload at once.
const JOIN_RUN_BYTES: usize = 1 << 20;

use super::ModelError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Member rows one after another.
    Concat,
    /// Two members of equal shape, rows alternating (a0, b0, a1, b1, ...).
    Interleave,
    /// One member whose first half of rows pairs with its second half,
    /// reordered as Interleave would join the halves (Phi-3's gate and up
    /// projections, stored as one tensor, gate first).
    InterleaveHalves,
}

/// A group of tensors uploaded as one: matrices (raw bytes, one type) or
/// vectors (f32 values, concatenated).
#[derive(Clone, Debug)]
pub struct Fusion {
    pub name: String,
    pub members: Vec<String>,
    pub layout: Layout,
}

impl Fusion {
    fn concat(name: String, members: Vec<String>) -> Fusion {
        Fusion {
            name,
            members,
            layout: Layout::Concat,
        }
    }
}

/// Name of the fused q/k/v matrix of block `l` whose run starts at member `first`.
pub fn qkv_name(l: usize, first: &str) -> String {
    format!("blk.{l}.attn_qkv.{first}")
}

/// The q/k/v runs of block `l`, in order: each a list of member suffixes
/// (`attn_q`, ...) stored in one type.
pub fn qkv_runs(file: &GgufFile, l: usize) -> Vec<Vec<&'static str>> {
    let ty = |s: &str| file.tensor(&format!("blk.{l}.{s}.weight")).map(|t| t.dtype);
    let mut runs: Vec<Vec<&'static str>> = Vec::new();
    let mut last: Option<Option<GgmlType>> = None;
    for s in ["attn_q", "attn_k", "attn_v"] {
        match runs.last_mut() {
            Some(run) if last == Some(ty(s)) => run.push(s),
            _ => runs.push(vec![s]),
        }
        last = Some(ty(s));
    }
    runs
}

/// Whether block `l`'s gate and up projections can be one interleaved matrix.
pub fn gate_up_fusable(file: &GgufFile, l: usize) -> bool {
    let ty = |s: &str| file.tensor(&format!("blk.{l}.{s}.weight")).map(|t| t.dtype);
    ty("ffn_gate").is_some() && ty("ffn_gate") == ty("ffn_up")
}

/// The fusions of a decoder with Llama's tensor names: q/k/v runs of more
/// than one matrix, all three biases when present, dense gate/up pairs.
pub fn decoder_fusions(file: &GgufFile, n_layers: usize, dense_mlp: bool) -> Vec<Fusion> {
    let mut out = Vec::new();
    for l in 0..n_layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        for run in qkv_runs(file, l).into_iter().filter(|r| r.len() > 1) {
            let members = run.iter().map(|s| n(&format!("{s}.weight"))).collect();
            out.push(Fusion::concat(qkv_name(l, run[0]), members));
        }
        let biases: Vec<String> = ["attn_q", "attn_k", "attn_v"]
            .iter()
            .map(|s| n(&format!("{s}.bias")))
            .collect();
        if biases.iter().all(|b| file.tensor(b).is_some()) {
            out.push(Fusion::concat(n("attn_qkv.bias"), biases));
        }
        if dense_mlp && gate_up_fusable(file, l) {
            out.push(Fusion {
                name: n("ffn_gate_up.weight"),
                members: vec![n("ffn_gate.weight"), n("ffn_up.weight")],
                layout: Layout::Interleave,
            });
        }
    }
    out
}

/// A member's bytes and row count.
type Arrived = (Vec<u8>, usize);

/// Member bytes waiting for the rest of their group.
#[derive(Default)]
pub struct Pending {
    /// Member name -> (fusion index, member index).
    member_of: HashMap<String, (usize, usize)>,
    fusions: Vec<Fusion>,
    /// Per fusion, per member: its bytes once arrived, and its row count.
    arrived: Vec<Vec<Option<Arrived>>>,
}

/// A group whose members have all arrived.
pub enum Complete {
    Matrix(String, QuantMatrix),
    Vector(String, Vec<f32>),
}

impl Pending {
    pub fn new(fusions: Vec<Fusion>) -> Pending {
        let mut member_of = HashMap::new();
        for (f, fusion) in fusions.iter().enumerate() {
            for (m, name) in fusion.members.iter().enumerate() {
                member_of.insert(name.clone(), (f, m));
            }
        }
        let arrived = fusions
            .iter()
            .map(|f| vec![None; f.members.len()])
            .collect();
        Pending {
            member_of,
            fusions,
            arrived,
        }
    }

    pub fn is_member(&self, name: &str) -> bool {
        self.member_of.contains_key(name)
    }

    /// Keeps a member matrix's bytes (`rows` rows); uploads its group once
    /// whole, its rows joined run by run into the upload (`MatrixUpload`),
    /// so the joined matrix is never made whole beside its members.
    pub fn matrix(
        &mut self,
        ctx: &GpuContext,
        name: &str,
        dtype: GgmlType,
        rows: usize,
        cols: usize,
        bytes: Vec<u8>,
    ) -> Result<Option<Complete>, ModelError> {
        let row_bytes = bytes.len() / rows.max(1);
        let Some(members) = self.arrive(name, bytes, rows) else {
            return Ok(None);
        };
        let (fusion, total_rows) = members;
        let parts = self.take(&fusion);
        let group = match fusion.layout {
            Layout::Concat => 1,
            Layout::Interleave | Layout::InterleaveHalves => 2,
        };
        if fusion.layout == Layout::InterleaveHalves && total_rows % 2 != 0 {
            return Err(ModelError::Config(format!(
                "'{name}' has {total_rows} rows: gate and up halves need an even count"
            )));
        }
        let max_part = ctx.max_weight_part_bytes();
        let mut up =
            MatrixUpload::begin(ctx, &fusion.name, dtype, total_rows, cols, max_part, group)?;
        match fusion.layout {
            Layout::Concat => {
                for p in &parts {
                    up.push(ctx, p)?;
                }
            }
            Layout::Interleave | Layout::InterleaveHalves => {
                // Row i of the members one after another.
                let row = |mut i: usize| -> &[u8] {
                    for p in &parts {
                        let n = p.len() / row_bytes.max(1);
                        if i < n {
                            return &p[i * row_bytes..(i + 1) * row_bytes];
                        }
                        i -= n;
                    }
                    &[]
                };
                // Interleave pairs the two members' rows; InterleaveHalves
                // the one member's halves.
                let (pairs, second) = match fusion.layout {
                    Layout::Interleave => {
                        let first = parts[0].len() / row_bytes.max(1);
                        (first, first)
                    }
                    _ => (total_rows / 2, total_rows / 2),
                };
                let mut run = Vec::with_capacity(JOIN_RUN_BYTES + 2 * row_bytes);
                for i in 0..pairs {
                    run.extend_from_slice(row(i));
                    run.extend_from_slice(row(second + i));
                    if run.len() >= JOIN_RUN_BYTES {
                        up.push(ctx, &run)?;
                        run.clear();
                    }
                }
                up.push(ctx, &run)?;
            }
        }
        // Short of its rows (members of unequal shape): refused here.
        let m = up.finish(ctx)?;
        Ok(Some(Complete::Matrix(fusion.name, m)))
    }

    /// Whether member `name`'s bytes can go to its group's upload as they
    /// arrive ([`begin_tail`](Self::begin_tail)): every other member is in,
    /// and it is the last of a concatenation or one of an interleaved pair.
    pub fn streams_tail(&self, name: &str) -> bool {
        let Some(&(f, m)) = self.member_of.get(name) else {
            return false;
        };
        let others_in = self.arrived[f]
            .iter()
            .enumerate()
            .all(|(i, a)| i == m || a.is_some());
        let members = self.fusions[f].members.len();
        others_in
            && match self.fusions[f].layout {
                Layout::Concat => m == members - 1,
                Layout::Interleave => members == 2,
                Layout::InterleaveHalves => false,
            }
    }

    /// Starts the upload of member `name`'s group (`rows` x `cols` of
    /// `dtype` still to come), the other members' rows taken now: what
    /// [`streams_tail`](Self::streams_tail) allows.
    pub fn begin_tail(
        &mut self,
        ctx: &GpuContext,
        name: &str,
        dtype: GgmlType,
        rows: usize,
        cols: usize,
    ) -> Result<FusedTail, ModelError> {
        let &(f, m) = self
            .member_of
            .get(name)
            .ok_or_else(|| ModelError::Config(format!("'{name}' is not a fused member")))?;
        let fusion = self.fusions[f].clone();
        let others: usize = self.arrived[f].iter().flatten().map(|(_, r)| r).sum();
        let mut parts = self.take(&fusion);
        let row_bytes = dtype.row_bytes(cols as u64).unwrap_or(0) as usize;
        let group = match fusion.layout {
            Layout::Concat => 1,
            _ => 2,
        };
        let max_part = ctx.max_weight_part_bytes();
        let mut up = MatrixUpload::begin(
            ctx,
            &fusion.name,
            dtype,
            others + rows,
            cols,
            max_part,
            group,
        )?;
        let partner = match fusion.layout {
            Layout::Concat => {
                for p in &parts {
                    up.push(ctx, p)?;
                }
                None
            }
            _ => Some((std::mem::take(&mut parts[1 - m]), m == 1)),
        };
        Ok(FusedTail {
            name: fusion.name,
            up,
            partner,
            row_bytes,
            carry: Vec::with_capacity(row_bytes),
            rows_done: 0,
            received: 0,
            run: Vec::new(),
        })
    }

    /// Keeps a member vector's values; returns its group's once whole.
    pub fn vector(&mut self, name: &str, values: &[f32]) -> Option<Complete> {
        let bytes = bytemuck::cast_slice(values).to_vec();
        let (fusion, _) = self.arrive(name, bytes, values.len())?;
        let joined: Vec<f32> = self
            .take(&fusion)
            .iter()
            .flat_map(|b| bytemuck::pod_collect_to_vec::<u8, f32>(b))
            .collect();
        Some(Complete::Vector(fusion.name, joined))
    }

    /// Records an arrival; when it completes its group, the group and its
    /// total row count.
    fn arrive(&mut self, name: &str, bytes: Vec<u8>, rows: usize) -> Option<(Fusion, usize)> {
        let &(f, m) = self.member_of.get(name)?;
        self.arrived[f][m] = Some((bytes, rows));
        if self.arrived[f].iter().any(Option::is_none) {
            return None;
        }
        let rows = self.arrived[f].iter().flatten().map(|(_, r)| r).sum();
        Some((self.fusions[f].clone(), rows))
    }

    fn take(&mut self, fusion: &Fusion) -> Vec<Vec<u8>> {
        let f = self.member_of[&fusion.members[0]].0;
        self.arrived[f]
            .iter_mut()
            .map(|slot| slot.take().map(|(b, _)| b).unwrap_or_default())
            .collect()
    }
}

/// A fused group's upload fed its last member's bytes as they arrive
/// (`Pending::begin_tail`): the rows of a concatenation go straight on; a
/// pair's rows are joined one by one with the other member's, which was
/// gathered. The page then holds one member of an 8B's gate/up pair
/// (33 MiB in Q4_K), not both.
pub struct FusedTail {
    name: String,
    up: MatrixUpload,
    /// An interleaved pair: the other member's rows, and whether this
    /// member's row comes second in each pair (up after gate).
    partner: Option<(Vec<u8>, bool)>,
    row_bytes: usize,
    /// The start of this member's next row.
    carry: Vec<u8>,
    rows_done: usize,
    received: u64,
    /// Joined rows not yet handed to the upload.
    run: Vec<u8>,
}

impl FusedTail {
    /// Bytes of the member received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    pub fn push(&mut self, ctx: &GpuContext, mut bytes: &[u8]) -> Result<(), ModelError> {
        self.received += bytes.len() as u64;
        let Some((other, second)) = &self.partner else {
            self.up.push(ctx, bytes)?;
            return Ok(());
        };
        let rb = self.row_bytes;
        while !bytes.is_empty() {
            let take = (rb - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.carry.len() < rb {
                break;
            }
            let i = self.rows_done;
            let Some(pair) = other.get(i * rb..(i + 1) * rb) else {
                return Err(ModelError::Config(format!(
                    "'{}': its members have different row counts",
                    self.name
                )));
            };
            let (a, b) = if *second {
                (pair, &self.carry[..])
            } else {
                (&self.carry[..], pair)
            };
            self.run.extend_from_slice(a);
            self.run.extend_from_slice(b);
            self.carry.clear();
            self.rows_done += 1;
            if self.run.len() >= JOIN_RUN_BYTES {
                self.up.push(ctx, &self.run)?;
                self.run.clear();
            }
        }
        Ok(())
    }

    /// The group's name and matrix, once the member's every byte is in.
    pub fn finish(mut self, ctx: &GpuContext) -> Result<(String, QuantMatrix), ModelError> {
        if !self.run.is_empty() {
            self.up.push(ctx, &self.run)?;
        }
        // Short of its rows (a member of another shape): refused here.
        Ok((self.name, self.up.finish(ctx)?))
    }
}

#[cfg(test)]
#[path = "fusion_tests.rs"]
mod tests;
