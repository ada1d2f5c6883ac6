//! The `hf_folder` target's seeds reach the end of its path: a whole tiny
//! checkpoint plans and streams to a GGUF that reads back ("ok" for both
//! the stored and the Q8_0 plan), and one cut after its header plans and
//! then reports the missing tensors. Otherwise the fuzzer would mutate
//! inputs that stop at the first parser.

use std::path::Path;

use wick_fuzz::seeds;
use wick_fuzz::targets::hf_folder;

#[test]
fn tiny_checkpoints_stream_whole_and_report_a_cut() {
    let empty = Path::new(env!("CARGO_MANIFEST_DIR")).join("no-such-dir");
    let found = seeds::collect(&[], &empty).hf_folder;
    // Three architectures, each cut and whole.
    assert_eq!(found.len(), 6, "tiny checkpoint seeds");
    for pair in found.chunks(2) {
        let (cut, whole) = (hf_folder(&pair[0]), hf_folder(&pair[1]));
        assert!(whole.ends_with(";ok,ok"), "whole checkpoint: {whole}");
        assert!(cut.contains("finish:Truncated"), "cut checkpoint: {cut}");
    }
}
