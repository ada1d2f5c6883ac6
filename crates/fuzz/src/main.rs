//! `wick-fuzz`: runs every target (or those named) for a share of the given
//! time, from seeds made from the model files present, and exits non-zero
//! if any input panicked or allocated over the bound.
//!
//! ```text
//! wick-fuzz [--seconds N] [--seed S] [--models DIR]... [--findings DIR] [--target NAME]...
//! wick-fuzz --replay FILE --target NAME
//! ```
//!
//! A failing input is minimized and written to the findings directory with
//! its message; an allocation over the bound in an infallible path aborts
//! the process after writing the input there (`<target>-abort.bin`), and an
//! execution over `HANG_LIMIT` ends it with code 3 (`hang.bin`).
//! `WICK_FUZZ_OUTCOMES=1` lists the distinct outcomes each target reached.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wick_fuzz::alloc::{self, CappedAllocator, ALLOCATION_BOUND};
use wick_fuzz::exec::{self, Failure};
use wick_fuzz::seeds;
use wick_fuzz::targets::{self, Target, TARGETS};

#[global_allocator]
static ALLOCATOR: CappedAllocator = CappedAllocator;

/// Inputs kept per target; beyond it new outcomes are counted, not kept.
const MAX_CORPUS: usize = 4096;
/// One execution running longer than this is reported as a hang.
const HANG_LIMIT: Duration = Duration::from_secs(30);
/// Executions spent shrinking one failing input.
const MINIMIZE_BUDGET: usize = 4000;

struct Args {
    seconds: f64,
    seed: u64,
    models: Vec<PathBuf>,
    findings: PathBuf,
    targets: Vec<String>,
    replay: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 60.0,
        seed: 1,
        models: Vec::new(),
        findings: PathBuf::from("target/fuzz-findings"),
        targets: Vec::new(),
        replay: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => a.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--seed" => a.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--models" => a.models.push(value()?.into()),
            "--findings" => a.findings = value()?.into(),
            "--target" => a.targets.push(value()?),
            "--replay" => a.replay = Some(value()?.into()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    for t in &a.targets {
        targets::target(t).ok_or(format!("no target {t}"))?;
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    exec::quiet_panics();
    if let Some(file) = &args.replay {
        std::process::exit(replay(&args, file));
    }
    let _ = std::fs::create_dir_all(&args.findings);
    exec::watchdog(
        HANG_LIMIT,
        args.findings.join("hang.bin").display().to_string(),
    );
    let chosen: Vec<&Target> = TARGETS
        .iter()
        .filter(|t| args.targets.is_empty() || args.targets.iter().any(|n| n == t.name))
        .collect();
    let dirs: Vec<&Path> = args.models.iter().map(PathBuf::as_path).collect();
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let seeds = seeds::collect(&dirs, &committed);
    let share = Duration::from_secs_f64(args.seconds / chosen.len() as f64);
    println!(
        "wick-fuzz: {} targets, {:.0} s each, seed {}, allocation bound {} MiB",
        chosen.len(),
        share.as_secs_f64(),
        args.seed,
        ALLOCATION_BOUND >> 20
    );
    let mut total = (0u64, 0usize);
    for (i, target) in chosen.iter().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(args.seed.wrapping_add(i as u64));
        let report = fuzz(
            target,
            (
                seeds.for_target(target.name),
                seeds.once_for_target(target.name),
            ),
            share,
            &mut rng,
            &args.findings,
        );
        println!(
            "{:<15} {:>10} executions ({:>7.0}/s), corpus {:>5}, outcomes {:>4}, failures {}",
            target.name,
            report.executions,
            report.executions as f64 / share.as_secs_f64(),
            report.corpus,
            report.outcomes,
            report.failures
        );
        total.0 += report.executions;
        total.1 += report.failures;
    }
    println!("total: {} executions, {} failures", total.0, total.1);
    if total.1 > 0 {
        std::process::exit(1);
    }
}

/// Runs one input through a target and says how it went.
fn replay(args: &Args, file: &Path) -> i32 {
    let Some(target) = args.targets.first().and_then(|n| targets::target(n)) else {
        eprintln!("error: --replay needs --target NAME");
        return 2;
    };
    let input = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return 2;
        }
    };
    match exec::run(target, &input) {
        Ok(outcome) => {
            println!("{}: {outcome}", target.name);
            0
        }
        Err(f) => {
            println!("{}: {f}", target.name);
            1
        }
    }
}

struct Report {
    executions: u64,
    corpus: usize,
    outcomes: usize,
    failures: usize,
}

fn fuzz(
    target: &Target,
    (seeds, once): (&[Vec<u8>], &[Vec<u8>]),
    share: Duration,
    rng: &mut ChaCha8Rng,
    findings: &Path,
) -> Report {
    alloc::set_dump_path(
        findings
            .join(format!("{}-abort.bin", target.name))
            .display()
            .to_string(),
    );
    let mut corpus: Vec<Vec<u8>> = seeds.to_vec();
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let mut outcomes = HashSet::new();
    let mut failed_kinds = HashSet::new();
    let mut executions = 0u64;
    let start = Instant::now();
    // The seeds as they are first, then mutants of the corpus.
    let mut pending: Vec<Vec<u8>> = corpus.iter().chain(once).cloned().collect();
    while start.elapsed() < share {
        let input = pending.pop().unwrap_or_else(|| {
            // Of two random entries, the shorter: cheap inputs run more often.
            let a = &corpus[rng.gen_range(0..corpus.len())];
            let b = &corpus[rng.gen_range(0..corpus.len())];
            let mut child = if a.len() <= b.len() {
                a.clone()
            } else {
                b.clone()
            };
            let other = &corpus[rng.gen_range(0..corpus.len())];
            wick_fuzz::mutate_for(target.name, rng, &mut child, other);
            child
        });
        executions += 1;
        match exec::run(target, &input) {
            Ok(outcome) => {
                if outcomes.insert(outcome) && corpus.len() < MAX_CORPUS {
                    corpus.push(input);
                }
            }
            Err(failure) => {
                if failed_kinds.insert(failure.kind()) {
                    report_failure(target, &input, &failure, findings, failed_kinds.len());
                }
            }
        }
    }
    if std::env::var_os("WICK_FUZZ_OUTCOMES").is_some() {
        let mut all: Vec<_> = outcomes.iter().collect();
        all.sort();
        for o in all {
            eprintln!("outcome {}: {o}", target.name);
        }
    }
    Report {
        executions,
        corpus: corpus.len(),
        outcomes: outcomes.len(),
        failures: failed_kinds.len(),
    }
}

fn report_failure(target: &Target, input: &[u8], failure: &Failure, findings: &Path, n: usize) {
    let small = exec::minimize(target, input, failure, MINIMIZE_BUDGET);
    let stem = findings.join(format!("{}-{n}", target.name));
    let _ = std::fs::write(stem.with_extension("bin"), &small);
    let _ = std::fs::write(stem.with_extension("orig.bin"), input);
    println!(
        "FAILURE {}: {failure}\n  minimized to {} bytes (from {}): {}",
        target.name,
        small.len(),
        input.len(),
        stem.with_extension("bin").display()
    );
}
