//! GGUF reader and writer round trips: every metadata value type (nested
//! arrays included), tensors of several types and alignments, the typed
//! accessors, and what the writer refuses.

use wick::format::gguf_write::GgufWriteError;
use wick::format::{quantize, GgmlType, GgufError, GgufFile, GgufWriter, MetaValue};

fn strings(s: &[&str]) -> MetaValue {
    MetaValue::Array(s.iter().map(|s| MetaValue::String(s.to_string())).collect())
}

#[test]
fn round_trip_every_value_type() {
    use MetaValue::*;
    let metadata = vec![
        ("u8", U8(255)),
        ("i8", I8(-128)),
        ("u16", U16(65535)),
        ("i16", I16(-32768)),
        ("u32", U32(u32::MAX)),
        ("i32", I32(i32::MIN)),
        ("u64", U64(u64::MAX)),
        ("i64", I64(i64::MIN)),
        ("f32", F32(-0.0)),
        ("f32.inf", F32(f32::INFINITY)),
        ("f64", F64(f64::MIN_POSITIVE)),
        ("bool.t", Bool(true)),
        ("bool.f", Bool(false)),
        ("str.empty", String(std::string::String::new())),
        ("str.unicode", String("héllo ▁wörld 🦀\n\0".into())),
        ("arr.empty", Array(vec![])),
        ("arr.i16", Array(vec![I16(1), I16(-2), I16(3)])),
        ("arr.f64", Array(vec![F64(0.5), F64(-1e300)])),
        ("arr.bool", Array(vec![Bool(true), Bool(false)])),
        ("arr.str", strings(&["", "x", "Ġ t"])),
        (
            "arr.nested",
            Array(vec![
                Array(vec![U8(1), U8(2)]),
                Array(vec![]),
                Array(vec![U8(3)]),
            ]),
        ),
        (
            "arr.mixed.inner",
            Array(vec![Array(vec![U32(1)]), strings(&["a", "b"])]),
        ),
        (
            "arr.deep",
            Array(vec![Array(vec![Array(vec![Array(vec![I64(-7)])])])]),
        ),
    ];
    for version in [2, 3] {
        for alignment in [None, Some(1), Some(64)] {
            let mut w = GgufWriter::new().version(version);
            if let Some(a) = alignment {
                w = w.alignment(a);
            }
            for (k, v) in &metadata {
                w = w.meta(*k, v.clone());
            }
            let file = GgufFile::parse(&w.to_bytes()).unwrap();
            assert_eq!(file.version, version);
            assert_eq!(file.alignment, alignment.unwrap_or(32) as u64);
            let got: Vec<_> = file
                .metadata
                .iter()
                .filter(|(k, _)| k != "general.alignment")
                .collect();
            assert_eq!(got.len(), metadata.len());
            for ((k, v), (gk, gv)) in metadata.iter().zip(got) {
                assert_eq!((*k, v), (gk.as_str(), gv));
                assert_eq!(file.meta(k), Some(v));
            }
            assert!(file.tensors.is_empty());
        }
    }
}

#[test]
fn round_trip_tensors() {
    let values: Vec<f32> = (0..512)
        .map(|i| ((i * 37) % 101) as f32 / 10.0 - 5.0)
        .collect();
    let types = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q6_K,
    ];
    for alignment in [32, 64, 4096] {
        let mut w = GgufWriter::new().alignment(alignment);
        let mut expect = Vec::new();
        for (i, t) in types.iter().enumerate() {
            let bytes = quantize(*t, &values).unwrap();
            let dims = [256, 2];
            w = w.tensor(format!("t{i}"), &dims, *t, bytes.clone());
            expect.push((format!("t{i}"), *t, bytes));
        }
        let file_bytes = w.to_bytes();
        let file = GgufFile::parse(&file_bytes).unwrap();
        assert_eq!(file.data_offset % alignment as u64, 0);
        assert!(
            file.data_offset >= file.header_len
                && file.data_offset - file.header_len < alignment as u64
        );
        assert_eq!(
            file_bytes.len() as u64 % alignment as u64,
            0,
            "last tensor padded too"
        );
        for (t, (name, dtype, bytes)) in file.tensors.iter().zip(&expect) {
            assert_eq!(
                (&t.name, t.dtype, &t.dims[..]),
                (name, *dtype, &[256, 2][..])
            );
            assert_eq!((t.n_elements, t.n_bytes), (512, bytes.len() as u64));
            assert_eq!(
                (t.n_rows(), t.row_elements(), t.row_bytes()),
                (2, 256, bytes.len() as u64 / 2)
            );
            assert_eq!(t.offset % alignment as u64, 0);
            assert_eq!(file.tensor_bytes(&file_bytes, t).unwrap(), &bytes[..]);
            assert_eq!(file.tensor(name), Some(t));
        }
        assert_eq!(file.tensor("missing"), None);
    }
}

#[test]
fn typed_metadata_accessors_name_the_key() {
    let bytes = GgufWriter::new()
        .meta("general.architecture", MetaValue::String("qwen2".into()))
        .meta("n", MetaValue::U32(7))
        .meta("neg", MetaValue::I32(-1))
        .meta("big", MetaValue::U64(1 << 40))
        .meta("theta", MetaValue::U32(10000))
        .meta("eps", MetaValue::F32(1e-6))
        .meta("ok", MetaValue::Bool(true))
        .meta(
            "types",
            MetaValue::Array(vec![MetaValue::I32(1), MetaValue::I32(3)]),
        )
        .meta(
            "scores",
            MetaValue::Array(vec![MetaValue::F64(-1.0), MetaValue::F64(2.5)]),
        )
        .meta("toks", strings(&["a", "b"]))
        .to_bytes();
    let f = GgufFile::parse(&bytes).unwrap();
    assert_eq!(f.architecture().unwrap(), "qwen2");
    assert_eq!(f.meta_u64("n").unwrap(), 7);
    assert_eq!(f.meta_u32("n").unwrap(), 7);
    assert_eq!(f.meta_usize("n").unwrap(), 7);
    assert_eq!(f.meta_i64("neg").unwrap(), -1);
    assert_eq!(
        f.meta_f32("theta").unwrap(),
        10000.0,
        "integers read as floats"
    );
    assert_eq!(f.meta_f32("eps").unwrap(), 1e-6);
    assert!(f.meta_bool("ok").unwrap());
    assert_eq!(f.meta_i64_array("types").unwrap(), [1, 3]);
    assert_eq!(f.meta_f32_array("scores").unwrap(), [-1.0, 2.5]);
    assert_eq!(f.meta_str_array("toks").unwrap(), ["a", "b"]);
    assert_eq!(f.meta_array("toks").unwrap().len(), 2);
    assert_eq!(f.meta_u64_opt("absent").unwrap(), None);
    assert_eq!(
        f.meta_str_opt("general.architecture").unwrap(),
        Some("qwen2")
    );

    let e = f.meta_u64("absent").unwrap_err();
    assert_eq!(e, GgufError::MissingKey("absent".into()));
    assert!(e.to_string().contains("absent"));
    let e = f.meta_u64("neg").unwrap_err();
    assert!(
        matches!(&e, GgufError::WrongType { key, found: "i32", .. } if key == "neg"),
        "{e}"
    );
    assert!(e.to_string().contains("`neg`"));
    assert!(matches!(
        f.meta_str("n"),
        Err(GgufError::WrongType {
            expected: "string",
            found: "u32",
            ..
        })
    ));
    assert!(matches!(
        f.meta_u32("big"),
        Err(GgufError::OutOfRange { target: "u32", .. })
    ));
    assert!(matches!(f.meta_bool("n"), Err(GgufError::WrongType { .. })));
    assert!(matches!(
        f.meta_array("n"),
        Err(GgufError::WrongType { found: "u32", .. })
    ));
    let e = f.meta_str_array("types").unwrap_err();
    assert!(matches!(
        e,
        GgufError::WrongType {
            expected: "array of string",
            found: "array of i32",
            ..
        }
    ));
    assert!(matches!(
        f.meta_i64_array("toks"),
        Err(GgufError::WrongType {
            found: "array of string",
            ..
        })
    ));
    let no_arch = GgufFile::parse(&GgufWriter::new().to_bytes()).unwrap();
    assert_eq!(
        no_arch.architecture(),
        Err(GgufError::MissingKey("general.architecture".into()))
    );
}

#[test]
fn meta_value_conversions() {
    use MetaValue::*;
    assert_eq!(I8(-1).as_u64(), None);
    assert_eq!(I64(5).as_u64(), Some(5));
    assert_eq!(U64(u64::MAX).as_i64(), None);
    assert_eq!(U16(9).as_i64(), Some(9));
    assert_eq!(F64(0.5).as_f32(), Some(0.5));
    assert_eq!(F32(0.5).as_u64(), None, "floats are not integers");
    assert_eq!(String("x".into()).as_f32(), None);
    assert_eq!(Bool(true).as_u64(), None);
    assert_eq!(Array(vec![]).type_name(), "array");
    assert_eq!(U8(1).as_array(), None);
}

#[test]
fn writer_refuses_bad_contents() {
    use GgufWriteError::*;
    let w = || GgufWriter::new();
    let mixed = w()
        .meta(
            "m",
            MetaValue::Array(vec![MetaValue::U8(1), MetaValue::I8(1)]),
        )
        .try_to_bytes();
    assert_eq!(
        mixed.unwrap_err(),
        MixedArray {
            key: "m".into(),
            first: "u8",
            other: "i8"
        }
    );
    let dup = w()
        .meta("k", MetaValue::U8(1))
        .meta("k", MetaValue::U8(2))
        .try_to_bytes();
    assert_eq!(dup.unwrap_err(), DuplicateKey("k".into()));
    let dup = w()
        .tensor_f32("t", &[1], &[0.0])
        .tensor_f32("t", &[1], &[0.0])
        .try_to_bytes();
    assert_eq!(dup.unwrap_err(), DuplicateTensor("t".into()));
    let short = w()
        .tensor("t", &[32], GgmlType::Q8_0, vec![0; 33])
        .try_to_bytes();
    assert!(matches!(short, Err(BadTensor { .. })));
    let partial = w()
        .tensor("t", &[16], GgmlType::Q8_0, vec![0; 17])
        .try_to_bytes();
    assert!(matches!(partial, Err(BadTensor { .. })));
    assert!(matches!(
        w().tensor_f32("t", &[], &[]).try_to_bytes(),
        Err(BadTensor { .. })
    ));
    assert!(matches!(
        w().alignment(24).try_to_bytes(),
        Err(BadAlignment(_))
    ));
    assert_eq!(
        w().alignment(8)
            .alignment(64)
            .try_to_bytes()
            .map(|b| GgufFile::parse(&b).unwrap().alignment),
        Ok(64)
    );
}

#[test]
#[should_panic(expected = "GgufWriter: tensor `t`")]
fn writer_to_bytes_panics_on_a_test_bug() {
    GgufWriter::new()
        .tensor("t", &[32], GgmlType::Q8_0, vec![0; 3])
        .to_bytes();
}
