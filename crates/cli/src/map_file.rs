//! A model file mapped into memory, read-only.

use std::path::Path;

use memmap2::Mmap;

/// Maps the file read-only: the weights are copied to the GPU once and the
/// mapping is dropped after, so a model is never held twice in memory.
pub fn map_file(path: &Path) -> Result<Mmap, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot open model file '{}': {e}", path.display()))?;
    // SAFETY: the file is opened read-only and only read while mapped; a
    // concurrent truncation by another process is outside what we guard.
    unsafe { Mmap::map(&file) }.map_err(|e| format!("cannot map '{}': {e}", path.display()))
}
