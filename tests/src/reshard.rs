//! A safetensors file split into shards as transformers saves a large
//! checkpoint (`model-00001-of-0000N.safetensors` and
//! `model.safetensors.index.json`), so a test can require a sharded load
//! to equal the one-file load of the same tensors.

use std::path::Path;

use safetensors::SafeTensors;
use serde_json::json;

use crate::hf_checkpoint::shard_name;

/// `file`'s tensors in `shards` files of about equal tensor counts (in the
/// file's order), and the index naming where each tensor is.
pub fn reshard(file: &[u8], shards: usize) -> (Vec<Vec<u8>>, Vec<u8>) {
    let st = SafeTensors::deserialize(file).expect("a valid safetensors file");
    let mut tensors = st.tensors();
    // In file order, so each shard holds a run of the original.
    tensors.sort_by_key(|(_, t)| t.data().as_ptr() as usize);
    let per_shard = tensors.len().div_ceil(shards);
    let mut weight_map = serde_json::Map::new();
    let mut files = Vec::new();
    for (i, chunk) in tensors.chunks(per_shard).enumerate() {
        for (name, _) in chunk {
            weight_map.insert(name.clone(), json!(shard_name(i, shards)));
        }
        let views = chunk.iter().map(|(n, t)| (n.clone(), t.clone()));
        files.push(safetensors::serialize(views, None).expect("serializable"));
    }
    assert_eq!(files.len(), shards, "too few tensors for {shards} shards");
    let index = json!({ "metadata": { "total_size": file.len() }, "weight_map": weight_map });
    (files, serde_json::to_vec_pretty(&index).unwrap())
}

/// A copy of the checkpoint folder `from` in `to` with its
/// `model.safetensors` split into `shards` files (and the index); every
/// other file and folder is copied as it is.
pub fn reshard_folder(from: &Path, to: &Path, shards: usize) {
    copy_dir(from, to, &|name| name != "model.safetensors");
    let single = std::fs::read(from.join("model.safetensors")).unwrap();
    let (files, index) = reshard(&single, shards);
    for (i, bytes) in files.iter().enumerate() {
        std::fs::write(to.join(shard_name(i, shards)), bytes).unwrap();
    }
    std::fs::write(to.join("model.safetensors.index.json"), index).unwrap();
}

fn copy_dir(from: &Path, to: &Path, keep: &dyn Fn(&str) -> bool) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !keep(&name) {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(&name), &|_| true);
        } else {
            std::fs::copy(&path, to.join(&name)).unwrap();
        }
    }
}
