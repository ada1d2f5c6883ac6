//! A split model (llama.cpp's `gguf-split` shards) loads to the same engine
//! as its unsplit file: the same logits and greedy ids, whichever way the
//! tensors fall into shards; shards that are not one model are typed errors
//! before any upload.

use wick::engine::ModelLoader;
use wick::format::gguf_split::{SplitError, SplitWriter};
use wick::format::GgufFile;
use wick::model::ModelError;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::StopCriteria;
use wick::pipeline::PipelineOptions;
use wick::{Engine, WickError};
use wick_tests::{gpu, model_path};

const TINY: &str = "tiny-qwen3.q8_0.gguf";

fn opts() -> PipelineOptions {
    PipelineOptions {
        ctx_len: Some(32),
        warm_up: false,
        ..Default::default()
    }
}

/// `bytes` cut into shards of at most `max` bytes of tensor data.
fn split(bytes: &[u8], max: u64) -> Vec<Vec<u8>> {
    let file = GgufFile::parse(bytes).unwrap();
    let mut w = SplitWriter::new(&file, max).unwrap();
    let mut out = vec![Vec::new(); w.count()];
    w.push(bytes, &mut |i, b: &[u8]| {
        out[i].extend_from_slice(b);
        Ok::<_, ()>(())
    })
    .unwrap();
    w.finish().unwrap();
    out
}

/// The smallest shard size that cuts `bytes` into at most `n` shards.
fn split_in(bytes: &[u8], n: usize) -> Vec<Vec<u8>> {
    let file = GgufFile::parse(bytes).unwrap();
    let count = |max| SplitWriter::new(&file, max).unwrap().count();
    let (mut lo, mut hi) = (1u64, bytes.len() as u64);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if count(mid) <= n {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let shards = split(bytes, lo);
    assert_eq!(shards.len(), n);
    shards
}

fn load_split(shards: &[Vec<u8>]) -> Result<Engine, WickError> {
    let parts: Vec<&[u8]> = shards.iter().map(Vec::as_slice).collect();
    pollster::block_on(Engine::load_split(gpu(), &parts, &opts(), &mut |_| {}))
}

/// The prompt's last logits and 6 greedy ids.
fn run(engine: &mut Engine) -> (Vec<Vec<f32>>, Vec<u32>) {
    let ids = engine.tokenize_prompt("The capital of France is").unwrap();
    let logits = pollster::block_on(engine.pipeline.prefill(&ids, 1)).unwrap();
    engine.pipeline.reset();
    let stop = StopCriteria {
        stop_ids: Vec::new(),
        max_tokens: 6,
    };
    let out = pollster::block_on(engine.pipeline.generate(
        &ids,
        &SamplingParams::default(),
        &stop,
        None,
        &mut |_| true,
    ))
    .unwrap();
    (logits, out.ids)
}

fn tensors_per_shard(shards: &[Vec<u8>]) -> Vec<usize> {
    shards
        .iter()
        .map(|s| GgufFile::parse(s).unwrap().tensors.len())
        .collect()
}

#[test]
fn split_model_runs_as_its_unsplit_file() {
    let bytes = std::fs::read(model_path(TINY)).unwrap();
    let mut whole = pollster::block_on(Engine::load(gpu(), &bytes, &opts(), &mut |_| {})).unwrap();
    let expected = run(&mut whole);
    drop(whole);
    let mut single_tensor_shard = false;
    for n in [2, 3] {
        let shards = split_in(&bytes, n);
        let counts = tensors_per_shard(&shards);
        single_tensor_shard |= counts.contains(&1);
        let mut engine = load_split(&shards).unwrap();
        assert_eq!(
            run(&mut engine),
            expected,
            "{n} shards holding {counts:?} tensors"
        );
        // The engine's header is the model's: every tensor, the first
        // shard's metadata.
        assert_eq!(
            engine.gguf.tensors.len(),
            GgufFile::parse(&bytes).unwrap().tensors.len()
        );
        assert_eq!(engine.gguf.meta_u64("split.count").unwrap(), n as u64);
    }
    assert!(
        single_tensor_shard,
        "no split put a tensor alone in a shard"
    );
}

/// A real model (SmolLM2, Q4_1 with its output tied to the embedding) in two
/// shards: the same logits as its file.
#[test]
fn a_real_model_in_two_shards_gives_its_file_logits() {
    let bytes = std::fs::read(model_path("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    let prefill = |e: &mut Engine| {
        let ids = e.tokenize_prompt("The capital of France is").unwrap();
        pollster::block_on(e.pipeline.prefill(&ids, 1)).unwrap()
    };
    let mut whole = pollster::block_on(Engine::load(gpu(), &bytes, &opts(), &mut |_| {})).unwrap();
    let expected = prefill(&mut whole);
    drop(whole);
    let mut split = load_split(&split_in(&bytes, 2)).unwrap();
    assert_eq!(prefill(&mut split), expected);
}

#[test]
fn streamed_shards_in_odd_chunks_load_and_report_progress_over_all() {
    let bytes = std::fs::read(model_path(TINY)).unwrap();
    let shards = split_in(&bytes, 3);
    let mut loader = ModelLoader::split(gpu(), opts(), 3);
    // Headers in small pieces, last shard first: their order is free.
    for i in [2, 0, 1] {
        let mut done = false;
        for c in shards[i].chunks(4093) {
            if loader.push_header(i, c).unwrap() {
                done = true;
                break;
            }
        }
        assert!(done);
    }
    let mut last = None;
    for (i, s) in shards.iter().enumerate() {
        for c in s.chunks(65_537) {
            loader.push_shard(i, c, &mut |p| last = Some(p)).unwrap();
        }
    }
    let p = loader.progress();
    // Every shard's tensor data counted: the total is the sum of theirs.
    let data_end = |s: &[u8]| {
        let h = GgufFile::parse(s).unwrap();
        h.tensors
            .iter()
            .map(|t| h.tensor_range(t).end)
            .max()
            .unwrap()
    };
    let sum: u64 = shards.iter().map(|s| data_end(s)).sum();
    assert_eq!((p.loaded, p.total), (sum, sum));
    assert_eq!(last.map(|p| p.total), Some(sum));
    loader.finish().unwrap();
}

#[test]
fn shards_that_are_not_one_model_fail_before_any_upload() {
    let bytes = std::fs::read(model_path(TINY)).unwrap();
    let shards = split_in(&bytes, 3);
    let err = |r: Result<Engine, WickError>| r.err().expect("loaded");
    // A shard missing, two swapped, the unsplit file given as a shard.
    assert!(matches!(
        err(load_split(&[shards[0].clone(), shards[2].clone()])),
        WickError::Split(SplitError::Missing { no: 1, count: 3 })
    ));
    assert!(matches!(
        err(load_split(&[
            shards[1].clone(),
            shards[0].clone(),
            shards[2].clone()
        ])),
        WickError::Split(SplitError::OutOfOrder { shard: 0, no: 1 })
    ));
    assert!(matches!(
        err(load_split(&[
            shards[0].clone(),
            bytes.clone(),
            shards[2].clone()
        ])),
        WickError::Split(SplitError::NotAShard { shard: 1, .. })
    ));
    // One shard alone, as if it were the whole file.
    assert!(matches!(
        err(pollster::block_on(Engine::load(
            gpu(),
            &shards[0],
            &opts(),
            &mut |_| {}
        ))),
        WickError::Split(SplitError::ShardAlone { no: 0, count: 3 })
    ));
    // A shard cut short: named by its place.
    let mut short = shards.clone();
    let half = short[1].len() / 2;
    short[1].truncate(half);
    let e = err(load_split(&short));
    assert!(
        matches!(&e, WickError::Model(ModelError::Truncated(m)) if m.starts_with("shard 2 ended")),
        "{e}"
    );
    // A shard cut inside its header.
    let mut headless = shards.clone();
    headless[2].truncate(40);
    assert!(matches!(
        err(load_split(&headless)),
        WickError::Split(SplitError::Header { shard: 2, .. })
    ));
    // Bytes before every header is in.
    let mut loader = ModelLoader::split(gpu(), opts(), 2);
    assert!(matches!(
        loader.push_shard(0, &shards[0], &mut |_| {}),
        Err(WickError::Split(SplitError::HeadersFirst { shard: 0 }))
    ));
    assert!(matches!(
        loader.push_header(2, &shards[0]),
        Err(WickError::Split(SplitError::NoSuchShard {
            shard: 2,
            count: 2
        }))
    ));
}
