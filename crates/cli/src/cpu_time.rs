//! The process's CPU time, for `wick bench`.
//!
//! On a software adapter (lavapipe, SwiftShader) the GPU's work runs on the
//! process's own threads, so the CPU seconds a phase takes are its work;
//! unlike wall time they leave out what a shared host's hypervisor takes
//! away (steal), which made wall-time figures of one binary differ by 2x
//! between runs minutes apart.

/// User plus system CPU seconds of every thread of this process so far, or
/// `None` where the platform does not say.
pub fn process_seconds() -> Option<f64> {
    #[cfg(unix)]
    {
        // SAFETY: getrusage writes one plain struct that we own.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
            return None;
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Some(secs(usage.ru_utime) + secs(usage.ru_stime))
    }
    #[cfg(not(unix))]
    {
        None
    }
}
