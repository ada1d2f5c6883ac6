//! What a kernel profile measured (`wick bench --profile`): GPU time per
//! kernel family. `profile_timer.rs` takes the timestamps.

use std::collections::BTreeMap;

/// GPU time of one kernel family over a profiled run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FamilyTime {
    pub seconds: f64,
    pub dispatches: u64,
}

/// What a profiled run measured.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub by_family: BTreeMap<String, FamilyTime>,
    /// Dispatches past `MAX_TIMED` in one submit, not timed.
    pub untimed_dispatches: u64,
    /// Submits whose timestamps could not be read back (their dispatches
    /// are not in `by_family`).
    pub unread_submits: u64,
}

impl Profile {
    pub fn total_seconds(&self) -> f64 {
        self.by_family.values().map(|f| f.seconds).sum()
    }
}
