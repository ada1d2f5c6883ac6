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
