//! `model.safetensors.index.json`: which shard file holds each tensor of a
//! sharded checkpoint (`{"metadata": {..}, "weight_map": {"name":
//! "model-00001-of-00002.safetensors", ..}}`).
//!
//! The index is checked against the shards' own headers once they are read:
//! a tensor the index places in a shard that lacks it, or a tensor a shard
//! holds that the index does not place there, is an error naming both, so a
//! mismatched download is caught before anything is uploaded.

use std::collections::HashMap;

use serde_json::Value;

use super::safetensors::{SafetensorsError, SafetensorsHeader};

/// The shards of a checkpoint and where each tensor is.
#[derive(Clone, Debug)]
pub struct ShardIndex {
    /// Shard file names, sorted: `model-00001-of-00003...` sorts in file order.
    pub shards: Vec<String>,
    /// Tensor name -> index into `shards`.
    weight_map: HashMap<String, usize>,
}

fn bad(msg: impl Into<String>) -> SafetensorsError {
    SafetensorsError::BadIndex(msg.into())
}

impl ShardIndex {
    pub fn parse(json: &[u8]) -> Result<ShardIndex, SafetensorsError> {
        let doc: Value = serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?;
        let map = doc
            .get("weight_map")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("no \"weight_map\" object"))?;
        let mut files: Vec<&str> = Vec::new();
        for (tensor, file) in map {
            let file = file
                .as_str()
                .ok_or_else(|| bad(format!("tensor `{tensor}`: shard is not a string")))?;
            // Shard names are joined to the checkpoint's folder (or base URL):
            // a path in one could reach outside it.
            if file.is_empty() || file.contains(['/', '\\']) || file.starts_with('.') {
                return Err(bad(format!(
                    "tensor `{tensor}`: shard {file:?} is not a plain file name"
                )));
            }
            files.push(file);
        }
        files.sort_unstable();
        files.dedup();
        if files.is_empty() {
            return Err(bad("\"weight_map\" lists no tensors"));
        }
        let shards: Vec<String> = files.iter().map(|s| s.to_string()).collect();
        let weight_map = map
            .iter()
            .map(|(tensor, file)| {
                let file = file.as_str().expect("checked above");
                let shard = shards.iter().position(|s| s == file).expect("listed");
                (tensor.clone(), shard)
            })
            .collect();
        Ok(ShardIndex { shards, weight_map })
    }

    /// Checks the shards' headers (in `shards` order) against the index.
    pub fn check(&self, headers: &[SafetensorsHeader]) -> Result<(), SafetensorsError> {
        if headers.len() != self.shards.len() {
            return Err(bad(format!(
                "{} shards listed, {} headers given",
                self.shards.len(),
                headers.len()
            )));
        }
        let mut found = std::collections::HashSet::new();
        for (i, header) in headers.iter().enumerate() {
            for t in &header.tensors {
                match self.weight_map.get(&t.name) {
                    Some(&at) if at == i => {
                        found.insert(t.name.as_str());
                    }
                    Some(&at) => {
                        return Err(bad(format!(
                            "tensor `{}` is in {} but listed under {}",
                            t.name, self.shards[i], self.shards[at]
                        )))
                    }
                    None => {
                        return Err(bad(format!(
                            "tensor `{}` of {} is not listed",
                            t.name, self.shards[i]
                        )))
                    }
                }
            }
        }
        for (tensor, &at) in &self.weight_map {
            if !found.contains(tensor.as_str()) {
                return Err(bad(format!(
                    "tensor `{tensor}` is listed under {} but not in it",
                    self.shards[at]
                )));
            }
        }
        Ok(())
    }
}
