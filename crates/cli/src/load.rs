//! Opening a model (a GGUF file or a Hugging Face checkpoint folder) and
//! loading it onto the GPU, with a progress bar.

use std::path::Path;
use std::sync::Arc;

use crate::map_file::map_file;
use indicatif::{ProgressBar, ProgressStyle};
use wick::engine::ModelLoader;
use wick::format::quant::GgmlType;
use wick::gpu::GpuContext;
use wick::model::hf::HfOptions;
use wick::model::synthetic::{self, SyntheticModel};
use wick::pipeline::{ActDtype, KvDtype, PipelineOptions};
use wick::Engine;

/// A loaded engine and how long loading took.
pub struct Loaded {
    pub engine: Engine,
    pub load_seconds: f64,
}

/// Loads a GGUF file, or the Hugging Face checkpoint in the folder `path`.
/// `hf_opts` (quantizing at load) apply to checkpoints only.
pub fn load(
    path: &Path,
    opts: &PipelineOptions,
    hf_opts: &HfOptions,
    quiet: bool,
) -> Result<Loaded, Box<dyn std::error::Error>> {
    if path.is_dir() {
        return load_hf(path, opts, hf_opts, quiet);
    }
    if let Some(q) = hf_opts.quantize {
        return Err(format!(
            "--quantize {} applies to Hugging Face folders; '{}' is a file",
            q.name(),
            path.display()
        )
        .into());
    }
    let ctx = Arc::new(pollster::block_on(GpuContext::new())?);
    load_file_on(ctx, path, opts, quiet)
}

/// Loads a GGUF file (or a split model by its first shard) on `ctx`.
pub fn load_file_on(
    ctx: Arc<GpuContext>,
    path: &Path,
    opts: &PipelineOptions,
    quiet: bool,
) -> Result<Loaded, Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    let files = crate::split::model_files(path)?;
    let maps = files
        .iter()
        .map(|f| map_file(f))
        .collect::<Result<Vec<_>, _>>()?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bar = progress_bar(quiet, maps.iter().map(|m| m.len() as u64).sum(), name);
    let mut on_progress = |p: wick::model::LoadProgress| {
        bar.set_length(p.total);
        bar.set_position(p.loaded);
    };
    // A split model's shards are all mapped (address space, not memory):
    // each is read as its tensors are uploaded.
    let engine = match maps.as_slice() {
        [one] => pollster::block_on(Engine::load(ctx, one, opts, &mut on_progress)),
        shards => {
            let parts: Vec<&[u8]> = shards.iter().map(|m| &m[..]).collect();
            pollster::block_on(Engine::load_split(ctx, &parts, opts, &mut on_progress))
        }
    };
    bar.finish_and_clear();
    Ok(Loaded {
        engine: engine?,
        load_seconds: start.elapsed().as_secs_f64(),
    })
}

fn load_hf(
    dir: &Path,
    opts: &PipelineOptions,
    hf_opts: &HfOptions,
    quiet: bool,
) -> Result<Loaded, Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    let folder = crate::hf::HfFolder::open(dir)?;
    let ctx = Arc::new(pollster::block_on(GpuContext::new())?);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The bar counts the GGUF stream the checkpoint becomes (its total is
    // known once the stream's header is out).
    let bar = progress_bar(quiet, folder.weight_bytes(), name);
    let mut on_progress = |p: wick::model::LoadProgress| {
        bar.set_length(p.total);
        bar.set_position(p.loaded);
    };
    let engine = pollster::block_on(Engine::load_hf(
        ctx,
        &folder.files(),
        opts,
        hf_opts,
        &mut on_progress,
    ));
    bar.finish_and_clear();
    Ok(Loaded {
        engine: engine?,
        load_seconds: start.elapsed().as_secs_f64(),
    })
}

fn progress_bar(quiet: bool, total: u64, name: String) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("loading {msg} {wide_bar} {bytes}/{total_bytes} ({eta})")
            .expect("static template"),
    );
    bar.set_message(name);
    bar
}

/// Builds a synthetic model (`wick::model::synthetic`) and streams it into
/// the loader tensor by tensor, as a file would arrive: an 8B model is never
/// held whole in memory. `load_seconds` covers making the weights too.
pub fn load_synthetic(
    name: &str,
    quant: &str,
    opts: &PipelineOptions,
    quiet: bool,
) -> Result<Loaded, Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    let model = SyntheticModel::new(synthetic::arch(name)?, synthetic::quant(quant)?)?;
    let ctx = Arc::new(pollster::block_on(GpuContext::new())?);
    let bar = progress_bar(quiet, model.len(), format!("synthetic {name} {quant}"));
    let mut loader = ModelLoader::new(ctx, opts.clone());
    model.stream(|chunk| {
        let p = loader.push(chunk)?;
        bar.set_position(p.loaded);
        Ok::<_, wick::WickError>(())
    })?;
    bar.finish_and_clear();
    let mut engine = loader.finish()?;
    pollster::block_on(engine.pipeline.warm_up())?;
    Ok(Loaded {
        engine,
        load_seconds: start.elapsed().as_secs_f64(),
    })
}

/// The model to load and how: what every command that runs a model reads.
#[derive(clap::Args)]
pub struct ModelArgs {
    /// GGUF model file (of a split model, its first shard:
    /// NAME-00001-of-0000N.gguf), or a Hugging Face checkpoint folder
    /// (config.json, model.safetensors or its shards, tokenizer.json).
    #[arg(long)]
    pub model: std::path::PathBuf,
    /// Quantize a Hugging Face checkpoint's matrices at load (q8_0: about a
    /// quarter of an F32 checkpoint's GPU memory).
    #[arg(long, value_name = "TYPE", value_parser = ["q8_0"])]
    pub quantize: Option<String>,
    /// KV cache length (default: the model's, capped to what the GPU holds).
    #[arg(long)]
    pub ctx_len: Option<usize>,
    /// Decode steps per GPU submit when generating (sampled tokens stay on the GPU).
    #[arg(long, default_value_t = wick::pipeline::DEFAULT_TOKENS_PER_SUBMIT)]
    pub tokens_per_submit: usize,
    /// How the KV cache stores K and V: f16 (as llama.cpp does by default) or f32.
    #[arg(long, default_value = "f16")]
    pub kv_cache: KvDtype,
    /// What decode steps feed the projections after a norm: f32, or q8
    /// (8-bit blocks: faster decode on lavapipe; see docs/kernels.md).
    #[arg(long, value_name = "TYPE", default_value = "f32")]
    pub activations: ActDtype,
    /// GPU memory the model may take, in GiB (default: what the adapter
    /// reports; lavapipe reports 2 GiB but takes more from system memory).
    #[arg(long, value_name = "GIB", value_parser = parse_gib)]
    pub memory_budget: Option<u64>,
    /// Skip compiling every pipeline at load (as llama.cpp's --no-warmup):
    /// each compiles when first used, so a short run loads quicker and its
    /// first token (and the stats' prefill time) waits for the compiles.
    #[arg(long)]
    pub no_warmup: bool,
}

impl ModelArgs {
    pub fn load(&self, quiet: bool) -> Result<Loaded, Box<dyn std::error::Error>> {
        let opts = PipelineOptions {
            ctx_len: self.ctx_len,
            tokens_per_submit: self.tokens_per_submit,
            kv_dtype: self.kv_cache,
            act_dtype: self.activations,
            memory_budget: self.memory_budget,
            warm_up: !self.no_warmup,
            ..Default::default()
        };
        let hf_opts = HfOptions {
            quantize: self.quantize.as_ref().map(|_| GgmlType::Q8_0),
        };
        load(&self.model, &opts, &hf_opts, quiet)
    }
}

/// What `generate` and `logits` read: a model and an input to run it on.
#[derive(clap::Args)]
pub struct ModelInput {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Input text, tokenized with BOS where the model wants it.
    #[arg(long, conflicts_with = "ids", required_unless_present = "ids")]
    pub prompt: Option<String>,
    /// Input token ids, used verbatim (no BOS added): 1,2,3.
    #[arg(long, value_parser = parse_ids)]
    pub ids: Option<IdList>,
}

/// A positive number of GiB as bytes.
pub fn parse_gib(s: &str) -> Result<u64, String> {
    match s.parse::<f64>() {
        Ok(g) if g.is_finite() && g > 0.0 && g < 1e9 => Ok((g * (1u64 << 30) as f64) as u64),
        _ => Err(format!("'{s}' is not a positive number of GiB")),
    }
}

impl ModelInput {
    pub fn load(&self, quiet: bool) -> Result<Loaded, Box<dyn std::error::Error>> {
        self.model.load(quiet)
    }

    /// The input as ids: `--ids` verbatim, or `--prompt` tokenized as
    /// llama.cpp does for a raw prompt. Ids outside the vocabulary are refused.
    pub fn ids(&self, engine: &Engine) -> Result<Vec<u32>, Box<dyn std::error::Error>> {
        let ids = match (&self.prompt, &self.ids) {
            (_, Some(IdList(ids))) => ids.clone(),
            (Some(text), None) => engine.tokenize_prompt(text)?,
            (None, None) => return Err("give --prompt TEXT or --ids 1,2,3".into()),
        };
        let vocab = engine.pipeline.model().config.vocab_size;
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(format!("token id {bad} is outside the vocabulary of {vocab}").into());
        }
        Ok(ids)
    }
}

/// Token ids given on the command line as one comma-separated value (a
/// newtype, so clap does not take `Vec` to mean a repeated flag).
#[derive(Clone, Debug)]
pub struct IdList(pub Vec<u32>);

/// `--ids 1,2,3` parsing for clap.
pub fn parse_ids(s: &str) -> Result<IdList, String> {
    let ids: Result<Vec<u32>, _> = s
        .split(',')
        .map(|t| t.trim().parse::<u32>().map_err(|e| format!("'{t}': {e}")))
        .collect();
    match ids {
        Ok(ids) if ids.is_empty() => Err("no ids given".into()),
        other => other.map(IdList),
    }
}
