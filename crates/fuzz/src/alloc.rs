//! A global allocator that refuses any single allocation over a bound.
//!
//! Untrusted counts that size a buffer before being checked are the bugs a
//! parser fuzzer finds least by panics: the allocation just succeeds (or the
//! process dies of it). Here an allocation over [`ALLOCATION_BOUND`] is
//! recorded and refused (null): fallible callers (`try_reserve`) see an
//! error and the harness reports the input once the target returns;
//! infallible ones abort, so the input being run is written out first, from
//! inside the allocator, for the script to report.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// The largest single allocation a target may make. Real headers and
/// vocabularies stay far below it (a 150k-token vocabulary is a few MB).
pub const ALLOCATION_BOUND: usize = 256 << 20;

pub struct CappedAllocator;

/// Largest refused request since the last [`take_oversize`], 0 if none.
static OVERSIZE: AtomicUsize = AtomicUsize::new(0);
/// The input being run and where to write it if it ends the process.
static INPUT_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static INPUT_LEN: AtomicUsize = AtomicUsize::new(0);
static DUMP_PATH: AtomicPtr<String> = AtomicPtr::new(std::ptr::null_mut());
/// Set while writing the input, so a dump does not recurse.
static DUMPING: AtomicBool = AtomicBool::new(false);

unsafe impl GlobalAlloc for CappedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_BOUND {
            refuse(layout.size());
            return std::ptr::null_mut();
        }
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_BOUND {
            refuse(layout.size());
            return std::ptr::null_mut();
        }
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOCATION_BOUND {
            refuse(new_size);
            return std::ptr::null_mut();
        }
        System.realloc(ptr, layout, new_size)
    }
}

fn refuse(size: usize) {
    OVERSIZE.fetch_max(size, Ordering::SeqCst);
    let path = DUMP_PATH.load(Ordering::SeqCst);
    let ptr = INPUT_PTR.load(Ordering::SeqCst);
    if path.is_null() || ptr.is_null() || DUMPING.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: `run_with_input` keeps the input borrowed while these are set,
    // and the path is leaked, so both outlive this call.
    let (path, input) = unsafe {
        (
            &*path,
            std::slice::from_raw_parts(ptr, INPUT_LEN.load(Ordering::SeqCst)),
        )
    };
    // Small allocations only; `System` serves them re-entrantly.
    let _ = std::fs::write(path, input);
    eprintln!(
        "allocation of {size} bytes refused (bound {ALLOCATION_BOUND}); input written to {path}"
    );
    DUMPING.store(false, Ordering::SeqCst);
}

/// Where the running input is written if an allocation over the bound
/// happens; set once.
pub fn set_dump_path(path: String) {
    DUMP_PATH.store(Box::into_raw(Box::new(path)), Ordering::SeqCst);
}

/// Runs `f` with `input` registered as the input to write out on an
/// over-bound allocation.
pub fn run_with_input<R>(input: &[u8], f: impl FnOnce() -> R) -> R {
    INPUT_LEN.store(input.len(), Ordering::SeqCst);
    INPUT_PTR.store(input.as_ptr() as *mut u8, Ordering::SeqCst);
    let r = f();
    INPUT_PTR.store(std::ptr::null_mut(), Ordering::SeqCst);
    r
}

/// The largest refused size since the last call, if any.
pub fn take_oversize() -> Option<usize> {
    match OVERSIZE.swap(0, Ordering::SeqCst) {
        0 => None,
        n => Some(n),
    }
}

/// Writes the input being run, if any, to `path` (a watchdog's report of an
/// execution that does not end).
pub fn write_running_input(path: &str) -> bool {
    let ptr = INPUT_PTR.load(Ordering::SeqCst);
    if ptr.is_null() {
        return false;
    }
    // SAFETY: a stuck execution keeps its input borrowed; the pointer is
    // cleared when `run_with_input` returns.
    let input = unsafe { std::slice::from_raw_parts(ptr, INPUT_LEN.load(Ordering::SeqCst)) };
    std::fs::write(path, input).is_ok()
}
