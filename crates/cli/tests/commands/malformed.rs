//! Malformed model files of every kind through the `wick` binary: each must
//! end with exit code 1 and one stderr line naming the problem, never a
//! panic. The files are made from SmolLM2's real header (so everything but
//! the one defect is as a real model has it) and written to a temp dir.

use std::path::{Path, PathBuf};

use wick::format::gguf::{GgufFile, MetaValue};
use wick::format::gguf_write::GgufWriter;
use wick::format::quant::GgmlType;

use crate::common;
use common::smollm2 as model;

/// A private directory for this test binary's files.
fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wick-malformed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = temp_dir().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Runs `wick generate` on `path` and checks the failure is one line holding
/// every needle.
fn refused(path: &Path, needles: &[&str]) {
    // As scripts/env.sh sets them: without a runtime dir the Vulkan loader
    // writes a warning line of its own to stderr.
    let runtime = temp_dir().join("xdg-runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let out = common::wick_command()
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("WGPU_BACKEND", "vulkan")
        .args(["generate", "--model", path.to_str().unwrap()])
        .args(["--prompt", "hi", "--max-tokens", "1"])
        .output()
        .expect("run wick");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = path.file_name().unwrap().to_string_lossy();
    assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
    assert!(!stderr.contains("panicked"), "{name} panicked: {stderr}");
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    assert_eq!(lines.len(), 1, "{name}: not one line: {stderr}");
    assert!(lines[0].starts_with("error: "), "{name}: {stderr}");
    for needle in needles {
        assert!(
            lines[0].contains(needle),
            "{name}: no {needle:?} in {stderr}"
        );
    }
}

/// The real header's metadata and tensor table, to change one thing in.
struct Header {
    file: GgufFile,
    meta: Vec<(String, MetaValue)>,
}

impl Header {
    fn real() -> Header {
        let f = std::fs::File::open(model()).unwrap();
        let file = GgufFile::read_header(std::io::BufReader::new(f)).unwrap();
        let meta = file.metadata.clone();
        Header { file, meta }
    }

    fn set(mut self, key: &str, value: MetaValue) -> Header {
        self.meta.retain(|(k, _)| k != key);
        self.meta.push((key.to_string(), value));
        self
    }

    /// The header only (declared tensors, no data), with `dtype_of` giving
    /// each tensor's type.
    fn bytes_with(&self, dtype_of: impl Fn(&str, GgmlType) -> GgmlType) -> Vec<u8> {
        let mut w = GgufWriter::new().version(self.file.version);
        for (k, v) in &self.meta {
            w = w.meta(k.clone(), v.clone());
        }
        for t in &self.file.tensors {
            w = w.declare_tensor(t.name.clone(), &t.dims, dtype_of(&t.name, t.dtype));
        }
        w.try_header().unwrap()
    }

    fn bytes(&self) -> Vec<u8> {
        self.bytes_with(|_, dtype| dtype)
    }
}

#[test]
fn truncated_files_are_refused() {
    let real = std::fs::read(model()).unwrap();
    refused(
        &write("empty.gguf", &[]),
        &["incomplete", "inside its header"],
    );
    refused(
        &write("cut-in-header.gguf", &real[..1000]),
        &["incomplete", "after 1000 bytes"],
    );
    // The whole header, no tensor data: the first needed tensor is named.
    let header = Header::real();
    let cut = header.file.data_offset as usize + 100;
    refused(
        &write("cut-in-data.gguf", &real[..cut]),
        &["incomplete", "tensor '", "needs bytes up to"],
    );
}

#[test]
fn wrong_magic_and_version_are_refused() {
    refused(&write("magic.gguf", b"GGML\x03\0\0\0 and more"), &["magic"]);
    let mut v9 = b"GGUF".to_vec();
    v9.extend_from_slice(&9u32.to_le_bytes());
    v9.extend_from_slice(&[0; 16]);
    refused(&write("version.gguf", &v9), &["version 9"]);
}

#[test]
fn absurd_counts_are_refused() {
    // 2^60 tensors in a 24-byte file: refused before anything is sized.
    let mut huge = b"GGUF".to_vec();
    huge.extend_from_slice(&3u32.to_le_bytes());
    huge.extend_from_slice(&(1u64 << 60).to_le_bytes());
    huge.extend_from_slice(&0u64.to_le_bytes());
    refused(
        &write("tensor-count.gguf", &huge),
        &["implausible", "tensor count"],
    );
    let layers = Header::real().set("llama.block_count", MetaValue::U32(1 << 30));
    refused(
        &write("block-count.gguf", &layers.bytes()),
        &["llama.block_count", "1073741824"],
    );
    let heads = Header::real().set("llama.attention.head_count", MetaValue::U32(0));
    refused(
        &write("head-count.gguf", &heads.bytes()),
        &["llama.attention.head_count"],
    );
}

#[test]
fn tensors_outside_the_file_are_refused() {
    // A whole small model with one table entry moved 1 TiB past the end:
    // every other tensor is in the file, so the refusal names that one.
    let tiny = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models/tiny-qwen3moe.q8_0.gguf");
    let mut bytes = std::fs::read(tiny).unwrap();
    let name = b"token_embd.weight";
    let at = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("token_embd in the table");
    // Name, then n_dims (u32), dims (2 x u64), type (u32), offset (u64).
    let offset_at = at + name.len() + 4 + 16 + 4;
    bytes[offset_at..offset_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    refused(
        &write("offset.gguf", &bytes),
        &["token_embd.weight", "needs bytes up to 10995"],
    );
}

#[test]
fn unknown_and_unsupported_tensor_types_are_refused() {
    let header = Header::real();
    let mut bytes = header.bytes();
    let name = b"output_norm.weight";
    let at = bytes
        .windows(name.len())
        .rposition(|w| w == name)
        .expect("output_norm in the table");
    // Name, n_dims (u32), one dim (u64), then the type id.
    let type_at = at + name.len() + 4 + 8;
    bytes[type_at..type_at + 4].copy_from_slice(&99u32.to_le_bytes());
    refused(
        &write("type-99.gguf", &bytes),
        &["output_norm.weight", "99"],
    );
    // A real ggml type the GPU kernels do not decode (Q8_1 has Q8_0's
    // 32-element blocks, so the shapes stay valid).
    let q8_1 = header.bytes_with(|name, dtype| match name {
        "blk.0.attn_q.weight" => GgmlType::Q8_1,
        _ => dtype,
    });
    refused(
        &write("q8_1.gguf", &q8_1),
        &["blk.0.attn_q.weight", "Q8_1", "do not support"],
    );
}

#[test]
fn unsupported_architectures_and_rope_scaling_are_refused_by_name() {
    let mamba = Header::real().set("general.architecture", MetaValue::String("mamba".into()));
    refused(
        &write("mamba.gguf", &mamba.bytes()),
        &["unsupported architecture", "mamba"],
    );
    let longrope = Header::real()
        .set(
            "llama.rope.scaling.type",
            MetaValue::String("longrope".into()),
        )
        .set("llama.rope.scaling.factor", MetaValue::F32(4.0));
    refused(
        &write("longrope.gguf", &longrope.bytes()),
        &["llama.rope.scaling.type", "longrope", "not implemented"],
    );
}
