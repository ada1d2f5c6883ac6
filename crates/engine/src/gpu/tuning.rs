//! What the kernels do differently on each kind of adapter, decided once.
//!
//! The context reads the adapter's class here, when it is created, into one
//! `Tuning`; kernels choose their workgroup shapes, reductions, tiles and
//! forms from it, and nothing else in the engine asks which adapter it runs
//! on. Most entries exist for the CPU emulators the tests run on (Mesa's
//! llvmpipe behind lavapipe natively and Firefox, SwiftShader in
//! Chromium): their workgroups run lanes in SIMD batches of 8 or 4 and turn
//! each barrier into a switch between batches, and llvmpipe's storage loads
//! cost a stall per 32-bit word. docs/kernels.md says what each one
//! measured. GPUs take the first column of every choice.

/// The environment variable that overrides choices (`Tuning::overridden`).
pub const TUNING_ENV: &str = "WICK_TUNING";

/// The kinds of adapter the kernels are tuned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterClass {
    /// A GPU: wide SIMD, cheap barriers, subgroups where granted.
    Gpu,
    /// Mesa's llvmpipe (lavapipe, Firefox on Linux without a GPU): a CPU
    /// running 8 lanes at a time (AVX2), whose compiler keeps arrays
    /// indexed by a variable in scratch memory.
    Llvmpipe,
    /// Another CPU adapter (SwiftShader, WARP): 4 lanes at a time.
    OtherCpu,
}

impl AdapterClass {
    /// The class of an adapter, from what wgpu reports of it: llvmpipe
    /// names its adapter "llvmpipe (LLVM ...)".
    pub fn of(info: &wgpu::AdapterInfo) -> AdapterClass {
        match info.device_type {
            wgpu::DeviceType::Cpu if info.name.starts_with("llvmpipe") => AdapterClass::Llvmpipe,
            wgpu::DeviceType::Cpu => AdapterClass::OtherCpu,
            _ => AdapterClass::Gpu,
        }
    }

    /// Whether the adapter is a CPU: correct, and slow.
    pub fn is_cpu(self) -> bool {
        self != AdapterClass::Gpu
    }

    /// As `wick info` and the JS `info()` name it.
    pub fn name(self) -> &'static str {
        match self {
            AdapterClass::Gpu => "gpu",
            AdapterClass::Llvmpipe => "llvmpipe",
            AdapterClass::OtherCpu => "cpu",
        }
    }
}

/// How the vec4 matrix-vector core turns a row's `lanes` partial sums into
/// one, after they meet in workgroup memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The lane that stores the row adds them one by one: CPU adapters,
    /// whose groups are 8 lanes and whose barriers cost more than the adds.
    Serial = 0,
    /// A tree in workgroup memory, log2(lanes) barriers: GPUs without
    /// subgroups (the browser, while WebGPU does not expose them there).
    Tree = 1,
    /// Each subgroup sums whole rows with `subgroupAdd`, one barrier: GPUs
    /// with subgroups. Which rows a subgroup takes comes from its own ids,
    /// so nothing assumes how invocations map to subgroups.
    Subgroup = 2,
}

impl Reduce {
    /// The reduction of a class of adapter: see the variants.
    pub fn choose(cpu: bool, subgroups: bool) -> Reduce {
        match (cpu, subgroups) {
            (true, _) => Reduce::Serial,
            (false, true) => Reduce::Subgroup,
            (false, false) => Reduce::Tree,
        }
    }

    /// As `wick info` and the JS `info()` name it.
    pub fn name(self) -> &'static str {
        match self {
            Reduce::Serial => "serial",
            Reduce::Tree => "tree",
            Reduce::Subgroup => "subgroup",
        }
    }

    /// The REDUCE define of matvec.wgsl.
    pub(crate) fn code(self) -> u32 {
        self as u32
    }
}

/// The chunked tiled core's per-row code (`row_code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowForm {
    /// A loop over the rows adding into one array.
    Loop,
    /// The rows written out one by one, each row's token sums a vec4 of
    /// its own; x and the decoded chunk still loop over their vec4s.
    Unrolled,
    /// Everything written out: x's vec4s named one by one and each row's
    /// dot products spelled out, so no function-local array is indexed by
    /// a variable.
    Flat,
}

impl RowForm {
    pub(crate) fn code(self) -> u32 {
        self as u32
    }

    /// The pipeline name's mark of the form.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            RowForm::Loop => "",
            RowForm::Unrolled => "_unrolled",
            RowForm::Flat => "_flat",
        }
    }
}

/// How decode attention's split form cuts a row's keys: into about
/// `workgroups` workgroups, none given fewer than `min_span` keys when
/// there are more (below it the merge costs more than the parallelism
/// brings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitTarget {
    pub workgroups: usize,
    pub min_span: usize,
}

/// Every choice the kernels make by adapter, read once from the adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    pub class: AdapterClass,
    /// A CPU adapter's SIMD batch (lanes run at once), about the vec4
    /// core's lanes per group there; None on GPUs. llvmpipe runs 8 (AVX2),
    /// SwiftShader 4: in headless Chromium SmolLM2 decoded faster with
    /// groups of 4 lanes than of 8 or 16.
    pub cpu_lanes: Option<u32>,
    /// How the vec4 matrix-vector core sums a row's lanes.
    pub gemv_reduce: Reduce,
    /// Rows per workgroup of the unit matrix-vector core, for 1-2 token
    /// rows and for 3-4. GPUs get 4: enough workgroups to fill them even
    /// for 896-row matrices, and x reused from registers 4 times. CPU
    /// adapters pay a large fixed cost per workgroup (on lavapipe probably
    /// the two barriers: workgroup-memory zeroing and the reduction):
    /// 2048 x 2048 Q8_0 GEMVs ran 2-2.7x faster with 16 rows than with 2
    /// there. The reduction's shared array (rows * tokens * 64 f32) stays
    /// within 8 KiB, half of WebGPU's default 16 KiB.
    pub gemv_rows: [u32; 2],
    /// Integer dot products for 8-bit x in every weight format (GPUs, as
    /// llama.cpp's quantized GEMVs) or in the nibble formats only (CPU
    /// adapters, where only Q4_0, Q4_1 and Q5_0 gained).
    pub dot4_every_format: bool,
    /// Lanes a norm row takes; None: by the row's length. CPU adapters
    /// take 32 whatever the row: fewer barriers.
    pub norm_lanes: Option<u32>,
    /// A decode step's norm before a wide projection (gate/up, the output
    /// head) runs as its own dispatch rather than folded into the
    /// projection: on CPU adapters the folded form ran those projections
    /// 15-30 % slower than the dispatch it saves.
    pub norm_apart: bool,
    /// Prefill attention in the lane form (one invocation per row and KV
    /// head, no barriers) for rows that fit it: CPU adapters.
    pub attention_lanes: bool,
    /// How decode attention splits a row's keys.
    pub attention_split: SplitTarget,
    /// rope_kv's serial form (one invocation walks a head): CPU adapters.
    pub rope_kv_serial: bool,
    /// Rows of a prefill tile of the unit tiled core.
    pub tile_rows: u32,
    /// The chunked tiled core's rows and per-row form, where the adapter
    /// takes it (CPU adapters: 2-3x fewer words of weights a multiply);
    /// None: the unit core only.
    pub chunked_tile: Option<(u32, RowForm)>,
    /// Weight matrices in textures rather than storage buffers, where the
    /// adapter's textures are wide enough (llvmpipe: a texel fetch is one
    /// gather, a storage load a stall per word).
    pub weights_in_textures: bool,
    /// A speculative verifying pass runs its rows as decode steps would
    /// (`InferenceStep::Verify`: bit for bit what decoding them one by one
    /// gives, so greedy output equals plain decoding's even at near ties):
    /// GPUs, where a pass's matrix-vector projections read the weights once
    /// for all its rows. CPU adapters run it as a prefill chunk instead,
    /// whose register-blocked matmuls cost a fraction of several rows'
    /// decode sums there; its sums run in other orders, so where two
    /// tokens' logits stand within rounding of each other a drafted greedy
    /// run can part from the plain one.
    pub exact_passes: bool,
    /// Token rows one matrix-vector pipeline sums at once when a step runs
    /// several rows as decode (`Linear::as_decode`): 8 on GPUs. 1 on CPU
    /// adapters: each row then takes decode's own pipeline, since a lane
    /// holding several rows' sums spills its registers there (llvmpipe ran
    /// 8 rows of a Q4_1 matrix at 4-50x one row's time, by x reader, where
    /// 8 one-row dispatches take 8x).
    pub as_decode_tokens: u32,
}

impl Tuning {
    /// The tuning of an adapter of `class` granting subgroups or not.
    pub fn for_class(class: AdapterClass, subgroups: bool) -> Tuning {
        let cpu = class.is_cpu();
        Tuning {
            class,
            cpu_lanes: match class {
                AdapterClass::Gpu => None,
                AdapterClass::Llvmpipe => Some(8),
                AdapterClass::OtherCpu => Some(4),
            },
            gemv_reduce: Reduce::choose(cpu, subgroups),
            gemv_rows: if cpu { [16, 8] } else { [4, 4] },
            dot4_every_format: !cpu,
            norm_lanes: cpu.then_some(32),
            norm_apart: cpu,
            attention_lanes: cpu,
            attention_split: match cpu {
                // About two workgroups per thread of a many-core host, and
                // whole spans of 256 keys, so that a context of up to 256
                // keys takes one split and no merge: there a dispatch costs
                // tens of microseconds whatever it does.
                true => SplitTarget {
                    workgroups: 16,
                    min_span: 256,
                },
                // Enough workgroups to fill a large GPU's units twice.
                false => SplitTarget {
                    workgroups: 256,
                    min_span: 32,
                },
            },
            rope_kv_serial: cpu,
            tile_rows: if cpu { 32 } else { 8 },
            chunked_tile: match class {
                AdapterClass::Gpu => None,
                AdapterClass::Llvmpipe => Some((32, RowForm::Unrolled)),
                AdapterClass::OtherCpu => Some((16, RowForm::Flat)),
            },
            weights_in_textures: class == AdapterClass::Llvmpipe,
            exact_passes: !cpu,
            as_decode_tokens: if cpu { 1 } else { 8 },
        }
    }

    /// This tuning with the choices `spec` names changed, for measuring what
    /// each choice buys (`WICK_TUNING`, read natively by the context):
    /// comma-separated `key=value`, where `gpu` as the whole spec takes a
    /// GPU's column of every choice (subgroups as the adapter grants them)
    /// and the keys are `norm_apart`, `attention_lanes`, `rope_kv_serial`,
    /// `weights_in_textures`, `dot4_every_format` (true/false),
    /// `norm_lanes` (none or 32..=256), `tile_rows` (8, 16 or 32), `gemv_rows` (two of them, `16:8`), `chunked_tile` (none,
    /// or rows and form: `32:unrolled`), `gemv_reduce` (serial or tree),
    /// `attention_split` (workgroups and their fewest keys: `256:32`),
    /// `exact_passes` (true/false) and `as_decode_tokens` (1..=8).
    /// An unknown key or a value out of range is the error, naming it.
    pub fn overridden(self, spec: &str, subgroups: bool) -> Result<Tuning, String> {
        let spec = spec.trim();
        if spec == "gpu" {
            return Ok(Tuning::for_class(AdapterClass::Gpu, subgroups));
        }
        let mut t = self;
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("WICK_TUNING: '{item}' is not key=value"))?;
            let bad = || format!("WICK_TUNING: {key}={value} is not a value {key} takes");
            let flag = || match value {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad()),
            };
            let pair = || -> Result<(u32, &str), String> {
                let (a, b) = value.split_once(':').ok_or_else(bad)?;
                Ok((a.parse().map_err(|_| bad())?, b))
            };
            match key {
                "norm_apart" => t.norm_apart = flag()?,
                "attention_lanes" => t.attention_lanes = flag()?,
                "rope_kv_serial" => t.rope_kv_serial = flag()?,
                "weights_in_textures" => t.weights_in_textures = flag()?,
                "dot4_every_format" => t.dot4_every_format = flag()?,
                "exact_passes" => t.exact_passes = flag()?,
                "as_decode_tokens" => {
                    t.as_decode_tokens = match value.parse::<u32>() {
                        Ok(n) if (1..=8).contains(&n) => n,
                        _ => return Err(bad()),
                    }
                }
                "norm_lanes" => {
                    t.norm_lanes = match value {
                        "none" => None,
                        v => match v.parse::<u32>() {
                            Ok(n) if n.is_power_of_two() && (32..=256).contains(&n) => Some(n),
                            _ => return Err(bad()),
                        },
                    }
                }
                "tile_rows" => {
                    t.tile_rows = match value.parse::<u32>() {
                        Ok(n) if [8, 16, 32].contains(&n) => n,
                        _ => return Err(bad()),
                    }
                }
                "gemv_rows" => {
                    let (a, b) = pair()?;
                    let b: u32 = b.parse().map_err(|_| bad())?;
                    let ok = |n: u32| n.is_power_of_two() && (1..=16).contains(&n);
                    if !ok(a) || !ok(b) {
                        return Err(bad());
                    }
                    t.gemv_rows = [a, b];
                }
                "chunked_tile" => {
                    t.chunked_tile = match value {
                        "none" => None,
                        _ => {
                            let (rows, form) = pair()?;
                            let form = match form {
                                "loop" => RowForm::Loop,
                                "unrolled" => RowForm::Unrolled,
                                "flat" => RowForm::Flat,
                                _ => return Err(bad()),
                            };
                            if ![8, 16, 32].contains(&rows) {
                                return Err(bad());
                            }
                            Some((rows, form))
                        }
                    }
                }
                "gemv_reduce" => {
                    t.gemv_reduce = match value {
                        "serial" => Reduce::Serial,
                        "tree" => Reduce::Tree,
                        "subgroup" if subgroups => Reduce::Subgroup,
                        _ => return Err(bad()),
                    }
                }
                "attention_split" => {
                    let (workgroups, min_span) = pair()?;
                    let min_span: usize = min_span.parse().map_err(|_| bad())?;
                    if workgroups == 0 || min_span == 0 {
                        return Err(bad());
                    }
                    t.attention_split = SplitTarget {
                        workgroups: workgroups as usize,
                        min_span,
                    };
                }
                _ => return Err(format!("WICK_TUNING: unknown key '{key}'")),
            }
        }
        Ok(t)
    }

    /// Rows per workgroup of the unit matrix-vector core for `tokens` rows.
    pub fn gemv_rows_for(&self, tokens: usize) -> u32 {
        match tokens {
            0..=2 => self.gemv_rows[0],
            _ => self.gemv_rows[1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_change_what_they_name_and_refuse_the_rest() {
        let cpu = Tuning::for_class(AdapterClass::Llvmpipe, false);
        let t = cpu
            .overridden(
                "norm_apart=false, tile_rows=8,chunked_tile=none,gemv_rows=4:4,exact_passes=true,as_decode_tokens=8",
                false,
            )
            .unwrap();
        assert!(!t.norm_apart && t.tile_rows == 8 && t.chunked_tile.is_none());
        assert!(t.exact_passes && t.as_decode_tokens == 8);
        assert_eq!(t.gemv_rows, [4, 4]);
        assert_eq!(t.attention_lanes, cpu.attention_lanes);
        let gpu = cpu.overridden("gpu", false).unwrap();
        assert_eq!(gpu, Tuning::for_class(AdapterClass::Gpu, false));
        for bad in [
            "norm_apart=maybe",
            "tile_rows=6",
            "gemv_reduce=subgroup",
            "colour=blue",
            "norm_apart",
            "chunked_tile=32:spiral",
            "as_decode_tokens=9",
            "exact_passes=1",
        ] {
            let e = cpu.overridden(bad, false).unwrap_err();
            assert!(e.starts_with("WICK_TUNING"), "{bad}: {e}");
        }
    }
}
