//! Running one input under `catch_unwind` and the allocation bound, and
//! shrinking an input that fails to a small one that fails the same way.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::alloc;
use crate::targets::Target;

/// How an execution failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The panic's message and location.
    Panic(String),
    /// The largest refused allocation, in bytes.
    Oversize(usize),
}

impl Failure {
    /// What two failures share when they are the same bug: the panic's
    /// location (its message may hold input values), or "oversize".
    pub fn kind(&self) -> String {
        match self {
            Failure::Panic(m) => m.rsplit(" at ").next().unwrap_or(m).to_string(),
            Failure::Oversize(_) => "oversize".into(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Panic(m) => write!(f, "panic: {m}"),
            Failure::Oversize(n) => write!(
                f,
                "allocation of {n} bytes (over the bound of {} bytes)",
                alloc::ALLOCATION_BOUND
            ),
        }
    }
}

static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

/// Replaces the panic hook with one that records the message quietly: a
/// fuzzer's panics are reported once each, not printed per execution.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = format!("{msg} at {at}");
        }
    }));
}

/// Executions started so far, for the watchdog.
static STARTED: AtomicU64 = AtomicU64::new(0);

/// Starts a thread that ends the process (exit code 3) when one execution
/// runs longer than `limit`, after writing its input to `dump`: a hang is a
/// finding too (a template that loops for ever), and would otherwise stall
/// the run without a word.
pub fn watchdog(limit: Duration, dump: String) {
    std::thread::spawn(move || {
        let (mut last, mut since) = (STARTED.load(Ordering::SeqCst), Instant::now());
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = STARTED.load(Ordering::SeqCst);
            if now != last {
                (last, since) = (now, Instant::now());
            } else if since.elapsed() > limit && alloc::write_running_input(&dump) {
                eprintln!("an execution ran over {limit:?}; input written to {dump}");
                std::process::exit(3);
            }
        }
    });
}

/// Runs `target` on `input`: its outcome signature, or how it failed.
pub fn run(target: &Target, input: &[u8]) -> Result<String, Failure> {
    STARTED.fetch_add(1, Ordering::SeqCst);
    alloc::take_oversize();
    let result = alloc::run_with_input(input, || {
        catch_unwind(AssertUnwindSafe(|| (target.run)(input)))
    });
    if let Some(n) = alloc::take_oversize() {
        return Err(Failure::Oversize(n));
    }
    result.map_err(|_| {
        let msg = LAST_PANIC.lock().map(|m| m.clone()).unwrap_or_default();
        Failure::Panic(msg)
    })
}

/// The smallest input found by deleting ever smaller blocks of `input` while
/// it still fails as `failure` does; at most `budget` executions.
pub fn minimize(target: &Target, input: &[u8], failure: &Failure, budget: usize) -> Vec<u8> {
    let kind = failure.kind();
    let still_fails =
        |candidate: &[u8]| matches!(run(target, candidate), Err(f) if f.kind() == kind);
    let mut best = input.to_vec();
    let mut runs = 0;
    let mut chunk = best.len().div_ceil(2).max(1);
    loop {
        let mut at = 0;
        while at < best.len() && runs < budget {
            let end = (at + chunk).min(best.len());
            let mut candidate = best[..at].to_vec();
            candidate.extend_from_slice(&best[end..]);
            runs += 1;
            if still_fails(&candidate) {
                best = candidate;
            } else {
                at += chunk;
            }
        }
        if chunk == 1 || runs >= budget {
            return best;
        }
        chunk = chunk.div_ceil(2);
    }
}
