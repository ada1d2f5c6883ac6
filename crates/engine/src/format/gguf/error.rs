//! Everything that can be wrong with a GGUF file, each naming what and where.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    #[error("reading the GGUF header failed: {0}")]
    Io(String),
    #[error("not a GGUF file: magic is {found:02x?}, expected \"GGUF\"")]
    BadMagic { found: [u8; 4] },
    #[error("big-endian GGUF file (version {version} byte-swapped): only little-endian files are supported")]
    BigEndian { version: u32 },
    #[error("unsupported GGUF version {0}{hint}", hint = version_hint(*.0))]
    UnsupportedVersion(u32),
    /// Only from [`super::GgufFile::parse_header`]: the bytes given end inside
    /// the header. Fetch at least this many bytes from the start and retry.
    #[error("GGUF header continues past the bytes given: need at least {needed_at_least} bytes")]
    NeedMoreHeader { needed_at_least: u64 },
    #[error("file ends inside {what}: needs {needed} bytes at offset {offset}, {available} left")]
    Truncated {
        what: String,
        offset: u64,
        needed: u64,
        available: u64,
    },
    #[error("implausible {what} {count} at offset {offset}: more than the file could hold")]
    ImplausibleCount {
        what: String,
        count: u64,
        offset: u64,
    },
    #[error("metadata `{key}` has unknown value type id {id}")]
    UnknownValueType { key: String, id: u32 },
    #[error("metadata `{key}` nests arrays deeper than {max}")]
    NestingTooDeep { key: String, max: usize },
    #[error("metadata `{key}` holds bool byte {value}, expected 0 or 1")]
    BadBool { key: String, value: u8 },
    #[error("{what} at offset {offset} is not valid UTF-8")]
    BadUtf8 { what: String, offset: u64 },
    #[error("metadata key `{0}` appears twice")]
    DuplicateKey(String),
    #[error("tensor `{0}` appears twice")]
    DuplicateTensor(String),
    #[error("tensor `{tensor}` has unknown ggml type id {id}")]
    UnknownTensorType { tensor: String, id: u32 },
    #[error("tensor `{tensor}` has a bad shape: {reason}")]
    BadTensorShape { tensor: String, reason: String },
    #[error(
        "tensor `{tensor}` data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    Misaligned {
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    #[error("general.alignment is {0}: it must be a power of two")]
    BadAlignment(u64),
    #[error("tensors `{first}` and `{second}` overlap in the data section")]
    OverlappingTensors { first: String, second: String },
    #[error("tensor `{tensor}` occupies bytes {start}..{end} but the file has {file_len}")]
    TensorOutOfBounds {
        tensor: String,
        start: u64,
        end: u64,
        file_len: u64,
    },
    #[error("metadata key `{0}` is missing")]
    MissingKey(String),
    #[error("metadata `{key}` is {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("metadata `{key}` = {value} does not fit in {target}")]
    OutOfRange {
        key: String,
        value: String,
        target: &'static str,
    },
}

fn version_hint(v: u32) -> &'static str {
    match v {
        1 => " (version 1 stored 32-bit counts and is obsolete: re-convert the model)",
        _ => " (wick reads versions 2 and 3)",
    }
}
