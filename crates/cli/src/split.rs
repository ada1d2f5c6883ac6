//! Split GGUF files (llama.cpp's `gguf-split`) on disk: finding a model's
//! shards from its first shard's name, and `wick split`, which cuts a GGUF
//! into shards as `gguf-split --split-max-size` does (also what
//! `wick bench --write-gguf PATH --split-max-size SIZE` writes with).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use wick::format::gguf::GgufFile;
use wick::format::gguf_split::{parse_shard_name, shard_name, SplitWriter};

use crate::map_file::map_file;
use crate::CliResult;

/// The files of the model at `path`: the file itself, or, for the first
/// shard of a split model (`PREFIX-00001-of-0000N.gguf`), every shard in
/// order, found by name in the same folder. A later shard, or a shard
/// missing from the folder, is an error naming the file.
pub fn model_files(path: &Path) -> Result<Vec<PathBuf>, String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some((prefix, no, count)) = parse_shard_name(name) else {
        return Ok(vec![path.to_path_buf()]);
    };
    let dir = path.parent().unwrap_or(Path::new(""));
    if no != 0 {
        let first = dir.join(shard_name(prefix, 0, count));
        return Err(format!(
            "'{}' is shard {} of {count} of a split model: give the first shard, '{}'",
            path.display(),
            no + 1,
            first.display()
        ));
    }
    (0..count)
        .map(|i| {
            let p = dir.join(shard_name(prefix, i, count));
            match p.is_file() {
                true => Ok(p),
                false => Err(format!(
                    "shard {} of {count} of the split model is missing: '{}' not found",
                    i + 1,
                    p.display()
                )),
            }
        })
        .collect()
}

/// A shard size as gguf-split takes it: a number of bytes with an optional
/// K, M or G suffix (powers of 1000, as gguf-split counts): `500M`, `2G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, 'B'),
    };
    let scale: u64 = match unit {
        'B' => 1,
        'K' => 1_000,
        'M' => 1_000_000,
        'G' => 1_000_000_000,
        _ => return Err(format!("'{s}': the size's unit must be K, M or G")),
    };
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "'{s}' is not a positive size (a number of bytes, or with K, M or G: 500M, 2G)"
        )),
    }
}

/// Writes the GGUF whose header is `header` as shards of at most `max`
/// bytes of tensor data, `PREFIX-0000i-of-0000N.gguf`; `feed` sends the
/// whole file's bytes in order to the sink it is given. Returns the paths.
pub fn write_shards(
    header: &GgufFile,
    max: u64,
    prefix: &Path,
    feed: impl FnOnce(&mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()>,
) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let mut splitter = SplitWriter::new(header, max)?;
    let count = splitter.count();
    let prefix = prefix.to_string_lossy();
    let paths: Vec<PathBuf> = (0..count)
        .map(|i| PathBuf::from(shard_name(&prefix, i, count)))
        .collect();
    let mut open: Option<(usize, BufWriter<File>)> = None;
    let mut write = |i: usize, bytes: &[u8]| -> std::io::Result<()> {
        if open.as_ref().map(|(j, _)| *j) != Some(i) {
            if let Some((_, mut f)) = open.take() {
                f.flush()?;
            }
            open = Some((i, BufWriter::new(File::create(&paths[i])?)));
        }
        open.as_mut().expect("opened above").1.write_all(bytes)
    };
    let named = |e: std::io::Error| format!("writing shards at {prefix}: {e}");
    feed(&mut |chunk| splitter.push(chunk, &mut write)).map_err(named)?;
    splitter.finish()?;
    if let Some((_, mut f)) = open.take() {
        f.flush().map_err(named)?;
    }
    Ok(paths)
}

/// The prefix shards are written under: the path without its `.gguf`.
pub fn prefix_of(path: &Path) -> PathBuf {
    match path.to_str().and_then(|s| s.strip_suffix(".gguf")) {
        Some(p) => PathBuf::from(p),
        None => path.to_path_buf(),
    }
}

#[derive(clap::Args)]
pub struct SplitArgs {
    /// The GGUF file to split.
    pub input: PathBuf,
    /// Shards are written as OUTPUT-00001-of-0000N.gguf (a trailing .gguf
    /// is dropped).
    pub output: PathBuf,
    /// Most tensor data in a shard: bytes, or with K, M or G (500M, 2G). A
    /// tensor is never cut; one larger than this is alone in its shard.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub split_max_size: u64,
}

/// `wick split`: llama.cpp's `gguf-split --split-max-size`, the file mapped
/// and streamed through, never held.
pub fn run(args: SplitArgs) -> CliResult {
    let bytes = map_file(&args.input)?;
    let header = GgufFile::parse(&bytes).map_err(|e| format!("'{}': {e}", args.input.display()))?;
    let paths = write_shards(
        &header,
        args.split_max_size,
        &prefix_of(&args.output),
        |sink| sink(&bytes),
    )?;
    for p in &paths {
        println!("{}", p.display());
    }
    Ok(())
}
