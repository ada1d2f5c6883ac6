//! A Hugging Face checkpoint folder (`config.json`, `model.safetensors` or
//! the shards `model.safetensors.index.json` lists, `tokenizer.json`,
//! optionally `tokenizer_config.json`): its files read or mapped, then handed
//! to the engine, which streams the weights to the GPU tensor by tensor.

use std::path::Path;

use memmap2::Mmap;
use wick::format::ShardIndex;
use wick::hf_folder::{hf_tokenizer, HfConfigFiles, HfFiles};
use wick::tokenizer::Tokenizer;

use crate::map_file::map_file;

const INDEX: &str = "model.safetensors.index.json";
const SINGLE: &str = "model.safetensors";

pub struct HfFolder {
    config: Vec<u8>,
    tokenizer: Vec<u8>,
    tokenizer_config: Option<Vec<u8>>,
    index: Option<Vec<u8>>,
    /// The safetensors files, mapped read-only, in the index's order.
    shards: Vec<Mmap>,
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read '{}': {e}", path.display()))
}

/// `name` in `dir` when the file exists.
fn optional(dir: &Path, name: &str) -> Result<Option<Vec<u8>>, String> {
    let path = dir.join(name);
    if path.is_file() {
        read(&path).map(Some)
    } else {
        Ok(None)
    }
}

impl HfFolder {
    pub fn open(dir: &Path) -> Result<HfFolder, Box<dyn std::error::Error>> {
        let Weights { index, shards } = Weights::open(dir)?;
        let (tokenizer, tokenizer_config) = tokenizer_files(dir)?;
        Ok(HfFolder {
            config: read(&dir.join("config.json"))?,
            tokenizer,
            tokenizer_config,
            index,
            shards,
        })
    }

    pub fn files(&self) -> HfFiles<'_> {
        HfFiles {
            meta: HfConfigFiles {
                config: &self.config,
                tokenizer: &self.tokenizer,
                tokenizer_config: self.tokenizer_config.as_deref(),
                index: self.index.as_deref(),
            },
            shards: self.shards.iter().map(|m| &m[..]).collect(),
        }
    }

    /// Bytes of weights to stream.
    pub fn weight_bytes(&self) -> u64 {
        self.shards.iter().map(|m| m.len() as u64).sum()
    }
}

/// A checkpoint folder's safetensors files: `model.safetensors`, or the
/// index and the shards it lists (mapped read-only, in its order).
pub struct Weights {
    pub index: Option<Vec<u8>>,
    pub shards: Vec<Mmap>,
}

impl Weights {
    pub fn open(dir: &Path) -> Result<Weights, Box<dyn std::error::Error>> {
        let index = optional(dir, INDEX)?;
        let shard_names: Vec<String> = match &index {
            Some(json) => {
                ShardIndex::parse(json)
                    .map_err(|e| format!("'{}': {e}", dir.join(INDEX).display()))?
                    .shards
            }
            None if dir.join(SINGLE).is_file() => vec![SINGLE.to_string()],
            None => {
                return Err(format!("'{}' has neither {SINGLE} nor {INDEX}", dir.display()).into())
            }
        };
        let shards = shard_names
            .iter()
            .map(|n| map_file(&dir.join(n)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Weights { index, shards })
    }

    /// The files' bytes, in order.
    pub fn slices(&self) -> Vec<&[u8]> {
        self.shards.iter().map(|m| &m[..]).collect()
    }
}

/// `tokenizer.json` and, when present, `tokenizer_config.json`.
fn tokenizer_files(dir: &Path) -> Result<(Vec<u8>, Option<Vec<u8>>), String> {
    let json = read(&dir.join("tokenizer.json"))?;
    Ok((json, optional(dir, "tokenizer_config.json")?))
}

/// The folder's tokenizer alone (no weights read): for `wick tokenize`.
pub fn tokenizer(dir: &Path) -> Result<Tokenizer, Box<dyn std::error::Error>> {
    let (json, config) = tokenizer_files(dir)?;
    Ok(hf_tokenizer(&json, config.as_deref())?.0)
}
