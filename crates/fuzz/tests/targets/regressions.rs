//! Every input the fuzzer ever failed on (`regressions/<target>/`), run
//! again through the same target: each must now end in a typed error or
//! success, with no panic and no allocation over the bound.

use std::path::Path;

use wick_fuzz::alloc::CappedAllocator;
use wick_fuzz::{exec, targets::TARGETS};

#[global_allocator]
static ALLOCATOR: CappedAllocator = CappedAllocator;

#[test]
fn past_findings_no_longer_fail() {
    exec::quiet_panics();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut ran = 0;
    for target in &TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(target.name)) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            let input = std::fs::read(&path).unwrap();
            if let Err(f) = exec::run(target, &input) {
                panic!("{} on {}: {f}", target.name, path.display());
            }
            ran += 1;
        }
    }
    assert!(
        ran > 0,
        "no regression inputs found under {}",
        root.display()
    );
}
