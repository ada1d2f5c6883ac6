//! Malformed GGUF input: every kind ends in its own typed error, never a
//! panic, and no count in a file can make the reader allocate more than the
//! bytes it was given could justify.

use wick::format::{quantize, GgmlType, GgufError, GgufFile, GgufWriter, MetaValue};

/// Raw header bytes, for inputs the writer refuses to make.
struct Raw(Vec<u8>);

impl Raw {
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw(b"GGUF".to_vec()).u32(version).u64(n_tensors).u64(n_kv)
    }
    fn u32(mut self, v: u32) -> Raw {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Raw {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend(b);
        self
    }
    fn str(self, s: &str) -> Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A metadata entry of value type `ty` with raw value bytes.
    fn kv(self, key: &str, ty: u32, value: &[u8]) -> Raw {
        self.str(key).u32(ty).bytes(value)
    }
    fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Raw {
        let mut r = self.str(name).u32(dims.len() as u32);
        for &d in dims {
            r = r.u64(d);
        }
        r.u32(ty).u64(offset)
    }
    /// Pads to 32 and appends `n` data bytes.
    fn data(mut self, n: usize) -> Raw {
        let len = self.0.len().next_multiple_of(32) + n;
        self.0.resize(len, 0xAB);
        self
    }
}

fn parse(r: &Raw) -> Result<GgufFile, GgufError> {
    GgufFile::parse(&r.0)
}

fn header(r: &Raw) -> Result<GgufFile, GgufError> {
    GgufFile::parse_header(&r.0)
}

const U32: u32 = 4;
const STRING: u32 = 8;
const ARRAY: u32 = 9;
const F32_TYPE: u32 = 0;

/// A small valid file: metadata of several types and three tensor types.
fn sample() -> Vec<u8> {
    let q8 = quantize(GgmlType::Q8_0, &[0.25; 64]).unwrap();
    let q4k = quantize(
        GgmlType::Q4_K,
        &(0..256).map(|i| i as f32 / 100.0).collect::<Vec<_>>(),
    )
    .unwrap();
    GgufWriter::new()
        .meta("general.architecture", MetaValue::String("llama".into()))
        .meta("llama.block_count", MetaValue::U32(2))
        .meta("llama.rope.freq_base", MetaValue::F32(10000.0))
        .meta(
            "tokenizer.ggml.tokens",
            MetaValue::Array(vec![MetaValue::String("<s>".into())]),
        )
        .meta(
            "tokenizer.ggml.scores",
            MetaValue::Array(vec![MetaValue::F32(0.0), MetaValue::F32(-1.5)]),
        )
        .meta("flag", MetaValue::Bool(true))
        .tensor_f32("output_norm.weight", &[3], &[1.0, 2.0, 3.0])
        .tensor("token_embd.weight", &[32, 2], GgmlType::Q8_0, q8)
        .tensor("blk.0.ffn_down.weight", &[256, 1], GgmlType::Q4_K, q4k)
        .to_bytes()
}

/// Cutting a valid file anywhere gives a typed error from `parse`, and from
/// `parse_header` a request for more bytes until the header is complete.
#[test]
fn every_truncation_is_an_error() {
    let file = sample();
    let full = GgufFile::parse(&file).unwrap();
    let header_len = full.header_len as usize;
    let last_end = full
        .tensors
        .iter()
        .map(|t| full.tensor_range(t).end)
        .max()
        .unwrap();
    for len in 0..file.len() {
        let cut = &file[..len];
        match GgufFile::parse(cut) {
            Err(GgufError::Truncated { .. } | GgufError::ImplausibleCount { .. }) => {
                assert!(len < header_len)
            }
            Err(GgufError::TensorOutOfBounds { file_len, .. }) => {
                assert_eq!(file_len, len as u64)
            }
            // Only the last tensor's padding is missing.
            Ok(_) => assert!(len as u64 >= last_end),
            other => panic!("cut at {len}: {other:?}"),
        }
        match GgufFile::parse_header(cut) {
            Err(GgufError::NeedMoreHeader { needed_at_least: n }) => {
                assert!(
                    len < header_len && n > len as u64 && n <= header_len as u64,
                    "cut at {len}: asks {n}"
                )
            }
            Ok(h) => {
                assert!(len >= header_len);
                assert_eq!(
                    (&h.metadata, &h.tensors, h.data_offset),
                    (&full.metadata, &full.tensors, full.data_offset)
                );
                assert_eq!(h.check_file_len(len as u64).is_ok(), len as u64 >= last_end);
            }
            other => panic!("cut at {len}: {other:?}"),
        }
    }
}

#[test]
fn streaming_header_fetch_converges() {
    let file = sample();
    let (mut have, mut rounds) = (0usize, 0);
    let header = loop {
        match GgufFile::parse_header(&file[..have]) {
            Ok(h) => break h,
            Err(GgufError::NeedMoreHeader { needed_at_least }) => {
                assert!(needed_at_least as usize > have);
                have = needed_at_least as usize;
                rounds += 1;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(have as u64, header.header_len, "never asks past the header");
    assert!(rounds < 40, "{rounds} rounds");
    header.check_file_len(file.len() as u64).unwrap();
}

#[test]
fn bad_magic_and_versions() {
    let mut file = sample();
    file[..4].copy_from_slice(b"GGML");
    assert_eq!(
        GgufFile::parse(&file).unwrap_err(),
        GgufError::BadMagic { found: *b"GGML" }
    );
    // A wrong start is reported at once, even from a prefix too short to hold the magic.
    assert_eq!(
        GgufFile::parse_header(b"GX").unwrap_err(),
        GgufError::BadMagic {
            found: [b'G', b'X', 0, 0]
        }
    );
    assert_eq!(
        GgufFile::parse_header(b"").unwrap_err(),
        GgufError::NeedMoreHeader { needed_at_least: 4 }
    );
    assert!(matches!(
        GgufFile::parse(b"GGU"),
        Err(GgufError::Truncated { .. })
    ));

    for v in [0, 1, 4, 99] {
        let e = GgufFile::parse(&GgufWriter::new().version(v).to_bytes()).unwrap_err();
        assert_eq!(e, GgufError::UnsupportedVersion(v));
    }
    let v1 = GgufError::UnsupportedVersion(1).to_string();
    assert!(
        v1.contains("version 1") && v1.contains("32-bit counts"),
        "{v1}"
    );
    let be = Raw(b"GGUF".to_vec()).bytes(&[0, 0, 0, 3]).u64(0).u64(0);
    assert_eq!(parse(&be).unwrap_err(), GgufError::BigEndian { version: 3 });
    assert_eq!(
        GgufFile::parse(&GgufWriter::new().version(2).to_bytes())
            .unwrap()
            .version,
        2
    );
}

#[test]
fn impossible_counts_fail_before_allocating() {
    let implausible =
        |r: Result<GgufFile, GgufError>| matches!(r, Err(GgufError::ImplausibleCount { .. }));
    // Each is refused both as a whole file and as a prefix: the prefix check
    // bounds the header at 1 GiB, so none of these can allocate.
    let cases = [
        Raw::new(3, u64::MAX, 0),
        Raw::new(3, 1 << 40, 0),
        Raw::new(3, 0, u64::MAX),
        Raw::new(3, 0, 1 << 40),
        Raw::new(3, 0, 1).u64(u64::MAX).bytes(&[b'k'; 16]),
        Raw::new(3, 0, 1).u64(1 << 31).bytes(&[b'k'; 16]),
        Raw::new(3, 0, 1).str("k").u32(STRING).u64(u64::MAX),
        Raw::new(3, 0, 1).str("k").u32(ARRAY).u32(0).u64(u64::MAX),
        Raw::new(3, 0, 1)
            .str("k")
            .u32(ARRAY)
            .u32(STRING)
            .u64(1 << 23),
        Raw::new(3, 0, 1)
            .str("k")
            .u32(ARRAY)
            .u32(ARRAY)
            .u64(1 << 40),
        Raw::new(3, 1, 0).u64(u64::MAX).bytes(&[0; 32]),
    ];
    for (i, r) in cases.iter().enumerate() {
        assert!(implausible(parse(r)), "case {i}: {:?}", parse(r));
        assert!(implausible(header(r)), "case {i}: {:?}", header(r));
    }
    // Arrays that each fit but together pass the element budget (32 bytes each parsed).
    let mut r = Raw::new(3, 0, 2);
    for k in ["a", "b"] {
        r = r
            .str(k)
            .u32(ARRAY)
            .u32(0)
            .u64(3 << 20)
            .bytes(&vec![7; 3 << 20]);
    }
    assert!(
        matches!(parse(&r), Err(GgufError::ImplausibleCount { what, .. }) if what.contains("`b`"))
    );
    // A count that fits the file's remaining bytes in a prefix is a request for more.
    let r = Raw::new(3, 0, 1).str("k").u32(ARRAY).u32(U32).u64(1000);
    let at = r.0.len() as u64;
    assert_eq!(
        header(&r).unwrap_err(),
        GgufError::NeedMoreHeader {
            needed_at_least: at + 4000
        }
    );
    assert!(implausible(parse(&r)));
    let e = parse(
        &Raw::new(3, 0, 1)
            .str("tokens")
            .u32(ARRAY)
            .u32(STRING)
            .u64(1 << 23),
    )
    .unwrap_err();
    assert!(e.to_string().contains("array length of `tokens`"), "{e}");
}

#[test]
fn bad_metadata_values() {
    let r = Raw::new(3, 0, 1).kv("k", 13, &[0; 8]);
    assert_eq!(
        parse(&r).unwrap_err(),
        GgufError::UnknownValueType {
            key: "k".into(),
            id: 13
        }
    );
    let r = Raw::new(3, 0, 1).str("arr").u32(ARRAY).u32(99).u64(0);
    assert_eq!(
        parse(&r).unwrap_err(),
        GgufError::UnknownValueType {
            key: "arr".into(),
            id: 99
        }
    );
    let r = Raw::new(3, 0, 1).kv("b", 7, &[2]);
    assert_eq!(
        parse(&r).unwrap_err(),
        GgufError::BadBool {
            key: "b".into(),
            value: 2
        }
    );
    let r = Raw::new(3, 0, 1)
        .u64(2)
        .bytes(&[0xff, 0xfe])
        .u32(U32)
        .u32(1);
    assert!(matches!(
        parse(&r),
        Err(GgufError::BadUtf8 { offset: 32, .. })
    ));
    let r = Raw::new(3, 0, 1).str("s").u32(STRING).u64(1).bytes(&[0x80]);
    assert!(matches!(parse(&r), Err(GgufError::BadUtf8 { what, .. }) if what.contains("`s`")));
    let r = Raw::new(3, 0, 2)
        .kv("a", U32, &[1, 0, 0, 0])
        .kv("a", U32, &[2, 0, 0, 0]);
    assert_eq!(parse(&r).unwrap_err(), GgufError::DuplicateKey("a".into()));
    // Four levels of arrays read; five are refused.
    let nest = |levels: usize| {
        let mut r = Raw::new(3, 0, 1).str("n").u32(ARRAY);
        for _ in 1..levels {
            r = r.u32(ARRAY).u64(1);
        }
        r.u32(U32).u64(1).u32(5)
    };
    assert!(parse(&nest(4)).is_ok());
    assert!(matches!(
        parse(&nest(5)),
        Err(GgufError::NestingTooDeep { max: 4, .. })
    ));
}

#[test]
fn alignment_must_be_a_power_of_two_integer() {
    for a in [0u32, 3, 48] {
        let r = Raw::new(3, 0, 1).kv("general.alignment", U32, &a.to_le_bytes());
        assert_eq!(parse(&r).unwrap_err(), GgufError::BadAlignment(a.into()));
    }
    let r = Raw::new(3, 0, 1)
        .str("general.alignment")
        .u32(STRING)
        .str("32");
    assert!(
        matches!(parse(&r), Err(GgufError::WrongType { key, .. }) if key == "general.alignment")
    );
    let r = Raw::new(3, 0, 1).kv("general.alignment", 11, &(1i64 << 62).to_le_bytes());
    assert_eq!(parse(&r).unwrap().alignment, 1 << 62, "any integer type");
}

#[test]
fn bad_tensor_entries() {
    let t = |dims: &[u64], ty: u32, offset: u64| {
        parse(&Raw::new(3, 1, 0).tensor("w", dims, ty, offset).data(4096))
    };
    let shape = |r: Result<GgufFile, GgufError>| matches!(r, Err(GgufError::BadTensorShape { tensor, .. }) if tensor == "w");
    assert!(t(&[4, 2], F32_TYPE, 0).is_ok());
    for id in [4, 5, 31, 36, 43, 1000] {
        assert_eq!(
            t(&[32], id, 0).unwrap_err(),
            GgufError::UnknownTensorType {
                tensor: "w".into(),
                id
            }
        );
    }
    assert!(shape(t(&[], F32_TYPE, 0)), "no dimensions");
    assert!(shape(t(&[1, 1, 1, 1, 1], F32_TYPE, 0)), "five dimensions");
    assert!(shape(t(&[4, 0], F32_TYPE, 0)), "a zero dimension");
    assert!(shape(t(&[31, 2], 8, 0)), "row not whole Q8_0 blocks");
    assert!(
        shape(t(&[1 << 32, 1 << 32, 1 << 32], F32_TYPE, 0)),
        "element count overflow"
    );
    assert!(
        shape(t(&[1 << 31, 1 << 31], F32_TYPE, 0)),
        "byte size overflow"
    );
    assert_eq!(
        t(&[4], F32_TYPE, 16).unwrap_err(),
        GgufError::Misaligned {
            tensor: "w".into(),
            offset: 16,
            alignment: 32
        }
    );
    let r = Raw::new(3, 1, 1)
        .kv("general.alignment", U32, &16u32.to_le_bytes())
        .tensor("w", &[4], F32_TYPE, 16)
        .data(64);
    assert_eq!(
        parse(&r).unwrap().tensors[0].offset,
        16,
        "16 is aligned under alignment 16"
    );
    let r = Raw::new(3, 2, 0)
        .tensor("w", &[4], F32_TYPE, 0)
        .tensor("w", &[4], F32_TYPE, 32)
        .data(64);
    assert_eq!(
        parse(&r).unwrap_err(),
        GgufError::DuplicateTensor("w".into())
    );
    let r = Raw::new(3, 2, 0)
        .tensor("a", &[16], F32_TYPE, 32)
        .tensor("b", &[16], F32_TYPE, 0)
        .data(96);
    assert_eq!(
        parse(&r).unwrap_err(),
        GgufError::OverlappingTensors {
            first: "b".into(),
            second: "a".into()
        }
    );
    let r = Raw::new(3, 1, 0)
        .u64(1)
        .bytes(&[0xC0])
        .u32(1)
        .u64(4)
        .u32(0)
        .u64(0)
        .data(16);
    assert!(matches!(parse(&r), Err(GgufError::BadUtf8 { .. })));
}

#[test]
fn tensors_outside_the_file() {
    let r = Raw::new(3, 1, 0).tensor("w", &[8], F32_TYPE, 64).data(64);
    let h = header(&r).unwrap();
    let e = parse(&r).unwrap_err();
    let start = h.data_offset + 64;
    let want = GgufError::TensorOutOfBounds {
        tensor: "w".into(),
        start,
        end: start + 32,
        file_len: r.0.len() as u64,
    };
    assert_eq!(e, want);
    assert_eq!(h.check_file_len(r.0.len() as u64).unwrap_err(), want);
    assert!(h.check_file_len(start + 32).is_ok());
    assert!(matches!(
        h.tensor_bytes(&r.0, &h.tensors[0]),
        Err(GgufError::TensorOutOfBounds { .. })
    ));
    // An offset whose end passes u64::MAX.
    let r = Raw::new(3, 1, 0)
        .tensor("w", &[8], F32_TYPE, u64::MAX - 31)
        .data(64);
    assert!(matches!(
        header(&r),
        Err(GgufError::TensorOutOfBounds { end: u64::MAX, .. })
    ));
    // Data truncated after writing.
    let mut file = sample();
    file.truncate(file.len() - 40);
    assert!(matches!(
        GgufFile::parse(&file),
        Err(GgufError::TensorOutOfBounds { .. })
    ));
}

/// Random corruption of a valid file: whatever the reader makes of it, it
/// returns (no panic, no runaway allocation), and what it accepts is sound.
#[test]
fn random_corruption_never_panics() {
    use rand::{Rng, SeedableRng};
    let file = sample();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let words = [0, 1, 3, 0xFF, 1 << 31, 1 << 40, u64::MAX, file.len() as u64];
    for _ in 0..20_000 {
        let mut f = file.clone();
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(0..f.len() - 8);
            match rng.gen_range(0..3) {
                0 => f[at] = rng.gen(),
                1 => f[at..at + 8]
                    .copy_from_slice(&words[rng.gen_range(0..words.len())].to_le_bytes()),
                _ => f[at] ^= 1 << rng.gen_range(0..8),
            }
        }
        if let Ok(g) = GgufFile::parse(&f) {
            for t in &g.tensors {
                let bytes = g.tensor_bytes(&f, t).unwrap();
                assert_eq!(bytes.len() as u64, t.n_bytes);
                assert_eq!(
                    t.dtype.row_bytes(t.dims[0]).unwrap() * t.n_rows(),
                    t.n_bytes
                );
            }
        }
        let cut = rng.gen_range(0..f.len());
        let _ = GgufFile::parse_header(&f[..cut]);
    }
}
