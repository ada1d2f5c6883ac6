//! Split GGUF (llama.cpp's `gguf-split`): shards cut by `SplitWriter` are
//! complete GGUF files that together hold the input's tensors byte for byte,
//! and every way a list of shards can fail to be one model is its own error.

use wick::format::gguf_split::{
    self as split, merge, parse_shard_name, shard_name, SplitError, SplitWriter,
};
use wick::format::{GgufFile, GgufWriter, MetaValue};

/// A small model-like file: metadata, and tensors of 40, 24, 8 and 100 bytes
/// (padded to 64, 32, 32 and 128 in the data section).
fn model() -> Vec<u8> {
    let t = |n: usize, v: f32| vec![v; n];
    GgufWriter::new()
        .meta("general.architecture", MetaValue::String("llama".into()))
        .meta("llama.block_count", MetaValue::U32(1))
        .tensor_f32("a", &[10], &t(10, 1.0))
        .tensor_f32("b", &[2, 3], &t(6, 2.0))
        .tensor_f32("c", &[2], &t(2, 3.0))
        .tensor_f32("d", &[25], &t(25, 4.0))
        .to_bytes()
}

/// The input cut at `max` bytes, fed in chunks of `chunk` bytes.
fn cut(bytes: &[u8], max: u64, chunk: usize) -> Vec<Vec<u8>> {
    let file = GgufFile::parse(bytes).unwrap();
    let mut w = SplitWriter::new(&file, max).unwrap();
    let mut out = vec![Vec::new(); w.count()];
    for c in bytes.chunks(chunk) {
        w.push(c, &mut |i, b: &[u8]| {
            out[i].extend_from_slice(b);
            Ok::<_, ()>(())
        })
        .unwrap();
    }
    w.finish().unwrap();
    out
}

fn headers(shards: &[Vec<u8>]) -> Vec<GgufFile> {
    shards.iter().map(|s| GgufFile::parse(s).unwrap()).collect()
}

#[test]
fn shards_hold_the_input_tensors_byte_for_byte() {
    let bytes = model();
    let whole = GgufFile::parse(&bytes).unwrap();
    // At 96 bytes: a and b (64 + 32), then c (32; c and d would be 160), then d.
    for (max, chunk, names) in [
        (96, 7, vec![vec!["a", "b"], vec!["c"], vec!["d"]]),
        (1, 1000, vec![vec!["a"], vec!["b"], vec!["c"], vec!["d"]]),
        (1 << 20, 13, vec![vec!["a", "b", "c", "d"]]),
    ] {
        let shards = cut(&bytes, max, chunk);
        let hs = headers(&shards);
        let got: Vec<Vec<&str>> = hs
            .iter()
            .map(|h| h.tensors.iter().map(|t| t.name.as_str()).collect())
            .collect();
        assert_eq!(got, names, "max {max}");
        for (i, (h, s)) in hs.iter().zip(&shards).enumerate() {
            assert_eq!(h.meta_u64("split.no").unwrap(), i as u64);
            assert_eq!(h.meta_u64("split.count").unwrap(), names.len() as u64);
            assert_eq!(h.meta_i64("split.tensors.count").unwrap(), 4);
            // Metadata in the first shard only.
            assert_eq!(h.meta("general.architecture").is_some(), i == 0);
            for t in &h.tensors {
                let orig = whole.tensor(&t.name).unwrap();
                assert_eq!(
                    h.tensor_bytes(s, t).unwrap(),
                    whole.tensor_bytes(&bytes, orig).unwrap()
                );
            }
        }
        let m = merge(&hs).unwrap();
        assert_eq!(m.file.tensors.len(), 4);
        assert_eq!(m.file.meta_u64("llama.block_count").unwrap(), 1);
    }
}

#[test]
fn shard_names_follow_gguf_split() {
    assert_eq!(shard_name("m/x", 0, 3), "m/x-00001-of-00003.gguf");
    assert_eq!(
        parse_shard_name("Qwen-7B-00002-of-00003.gguf"),
        Some(("Qwen-7B", 1, 3))
    );
    for bad in [
        "x-00000-of-00003.gguf",
        "x-00004-of-00003.gguf",
        "x-0001-of-00003.gguf",
        "x-00001-of-00003.bin",
        "x.gguf",
        "-00001-of-0000a.gguf",
    ] {
        assert_eq!(parse_shard_name(bad), None, "{bad}");
    }
}

/// The metadata entries of a shard with `f` applied, tensors kept.
fn rewrite(shard: &[u8], f: impl Fn(&mut Vec<(String, MetaValue)>)) -> Vec<u8> {
    let h = GgufFile::parse(shard).unwrap();
    let mut meta = h.metadata.clone();
    f(&mut meta);
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w = w.meta(k, v);
    }
    for t in &h.tensors {
        w = w.tensor(
            &t.name,
            &t.dims,
            t.dtype,
            h.tensor_bytes(shard, t).unwrap().to_vec(),
        );
    }
    w.to_bytes()
}

fn set(key: &str, v: MetaValue) -> impl Fn(&mut Vec<(String, MetaValue)>) + '_ {
    move |m| match m.iter_mut().find(|(k, _)| k == key) {
        Some(e) => e.1 = v.clone(),
        None => m.push((key.into(), v.clone())),
    }
}

fn merge_err(shards: &[Vec<u8>]) -> SplitError {
    merge(&headers(shards)).expect_err("merged")
}

#[test]
fn every_mismatch_between_shards_is_its_own_error() {
    let s = cut(&model(), 96, 1 << 20);
    assert_eq!(s.len(), 3);
    // split.count differs between shards.
    let mut bad = s.clone();
    bad[2] = rewrite(&s[2], set("split.count", MetaValue::U16(4)));
    assert_eq!(
        merge_err(&bad),
        SplitError::CountDiffers {
            shard: 2,
            found: 4,
            first: 3
        }
    );
    // More shards given than split.count says: one repeats.
    let mut four = s.clone();
    four.push(rewrite(&s[2], set("split.no", MetaValue::U16(2))));
    assert_eq!(
        merge_err(&four),
        SplitError::Repeated {
            shard: 3,
            no: 2,
            first: 2
        }
    );
    // A shard missing from the list.
    assert_eq!(
        merge_err(&[s[0].clone(), s[2].clone()]),
        SplitError::Missing { no: 1, count: 3 }
    );
    assert_eq!(merge_err(&s[..2]), SplitError::Missing { no: 2, count: 3 });
    // Out of order.
    assert_eq!(
        merge_err(&[s[0].clone(), s[2].clone(), s[1].clone()]),
        SplitError::OutOfOrder { shard: 1, no: 2 }
    );
    // A tensor in two shards (split.tensors.count raised to match).
    let mut twice = s.clone();
    twice[2] = rewrite(&s[1], set("split.no", MetaValue::U16(2)));
    assert_eq!(
        merge_err(&twice),
        SplitError::TensorInTwoShards {
            tensor: "c".into(),
            first: 1,
            second: 2
        }
    );
    // split.tensors.count not the sum.
    let mut count = s.clone();
    count[0] = rewrite(&s[0], set("split.tensors.count", MetaValue::I32(5)));
    assert_eq!(
        merge_err(&count),
        SplitError::TensorCount {
            declared: 5,
            found: 4
        }
    );
    // A later shard contradicting the first's metadata; repeating it is fine.
    let mut conflict = s.clone();
    conflict[1] = rewrite(&s[1], set("llama.block_count", MetaValue::U32(2)));
    assert_eq!(
        merge_err(&conflict),
        SplitError::MetadataConflict {
            shard: 1,
            key: "llama.block_count".into()
        }
    );
    let mut same = s.clone();
    same[1] = rewrite(&s[1], set("llama.block_count", MetaValue::U32(1)));
    merge(&headers(&same)).unwrap();
    // A file that is not a shard.
    assert_eq!(
        merge_err(&[s[0].clone(), model(), s[2].clone()]),
        SplitError::NotAShard {
            shard: 1,
            key: "split.count"
        }
    );
    // split.no past split.count, and a count of 0.
    let mut past = s.clone();
    past[1] = rewrite(&s[1], set("split.no", MetaValue::U16(7)));
    assert!(matches!(
        merge_err(&past),
        SplitError::BadKey {
            shard: 1,
            key: "split.no",
            ..
        }
    ));
    let mut zero = s.clone();
    zero[0] = rewrite(&s[0], set("split.count", MetaValue::U16(0)));
    assert!(matches!(
        merge_err(&zero),
        SplitError::BadKey {
            shard: 0,
            key: "split.count",
            ..
        }
    ));
    assert_eq!(merge(&[]).err(), Some(SplitError::NoShards));
    // Messages count shards from 1, as the file names do.
    assert_eq!(
        SplitError::Missing { no: 1, count: 3 }.to_string(),
        "shard 2 of 3 (split.no 1) is missing"
    );
}

#[test]
fn a_shard_of_several_alone_is_refused_and_a_split_of_one_is_a_file() {
    let s = cut(&model(), 96, 1 << 20);
    let h = GgufFile::parse(&s[1]).unwrap();
    assert_eq!(
        split::check_alone(&h),
        Err(SplitError::ShardAlone { no: 1, count: 3 })
    );
    let one = cut(&model(), 1 << 20, 1 << 20);
    split::check_alone(&GgufFile::parse(&one[0]).unwrap()).unwrap();
    // Splitting a shard again is refused the same way.
    assert!(matches!(
        SplitWriter::new(&h, 64),
        Err(SplitError::ShardAlone { .. })
    ));
}

#[test]
fn a_short_input_is_named_by_the_tensor_it_lacks() {
    let bytes = model();
    let file = GgufFile::parse(&bytes).unwrap();
    let mut w = SplitWriter::new(&file, 96).unwrap();
    let end = file.tensor_range(file.tensor("c").unwrap()).end as usize;
    w.push(&bytes[..end - 1], &mut |_, _: &[u8]| Ok::<_, ()>(()))
        .unwrap();
    assert!(matches!(
        w.finish(),
        Err(SplitError::Truncated { tensor, .. }) if tensor == "c"
    ));
}
