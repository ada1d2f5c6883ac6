//! The sampling decision itself (the steps listed in `sampling.rs`), written
//! plainly: sorts where the GPU bisects, f64 `exp` where it uses f32, exact
//! integers for every mass.

use super::{
    fixed24, key_value, order_key, Decision, SamplingParams, Work, BANNED, MASKED, Q_SCALE,
};

/// Whether bit `id % 32` of word `id / 32` is set (words past the end: no).
pub fn is_allowed(mask: &[u32], id: u32) -> bool {
    mask.get(id as usize / 32)
        .is_some_and(|w| w >> (id % 32) & 1 != 0)
}

/// `ceil(f * x / 2^24)` for a 24-bit fraction `f`.
fn scale24_ceil(f: u32, x: u64) -> u64 {
    (f as u128 * x as u128).div_ceil(1 << 24) as u64
}

/// Decides one token. `bias` is `params.merged_bias()`; `history` is the
/// penalty window (order does not matter); `u` in [0, 1); `mask`, where
/// given, the allowed-token bitmask (`is_allowed`).
pub(crate) fn decide(
    params: &SamplingParams,
    bias: &[(u32, f32)],
    logits: &[f32],
    history: &[u32],
    u: f32,
    mask: Option<&[u32]>,
    w: &mut Work,
) -> Decision {
    let n = logits.len();
    assert!(n > 0, "sampling needs at least one logit");
    w.z.clear();
    w.z.extend_from_slice(logits);
    for &(id, b) in bias {
        if let Some(z) = w.z.get_mut(id as usize) {
            *z = if b <= MASKED { BANNED } else { *z + b };
        }
    }
    if params.penalties_on() {
        // Counts by sorting a copy of the window (it is small).
        w.order.clear();
        w.order
            .extend(history.iter().filter(|&&t| (t as usize) < n));
        w.order.sort_unstable();
        let (rep, inv_rep) = (params.repetition_penalty, params.inv_repetition_penalty());
        for run in w.order.chunk_by(|a, b| a == b) {
            let z = &mut w.z[run[0] as usize];
            if *z <= MASKED {
                continue;
            }
            let v = if *z <= 0.0 { *z * rep } else { *z * inv_rep };
            *z = v - (run.len() as f32 * params.frequency_penalty + params.presence_penalty);
        }
    }
    w.keys.clear();
    w.keys.extend(w.z.iter().map(|&z| order_key(z)));
    // A disallowed token is banned outright. Bias and penalties change only
    // a token's own logit, so banning it here, after them, is the same as
    // removing it before them.
    if let Some(mask) = mask {
        for (i, k) in w.keys.iter_mut().enumerate() {
            if !is_allowed(mask, i as u32) {
                *k = 0;
            }
        }
    }
    let keys = &w.keys;
    // Largest key, lowest id on ties (an all-banned row gives id 0).
    let best = (0..n).fold(0, |b, i| if keys[i] > keys[b] { i } else { b });
    let greedy = Decision {
        id: best as u32,
        margin: f64::INFINITY,
    };
    if params.is_greedy() || keys[best] == 0 {
        return greedy;
    }

    let z_max = key_value(keys[best]) as f64;
    let inv_t = params.inv_temperature() as f64;
    w.q.clear();
    w.q.extend(keys.iter().map(|&k| {
        if k == 0 {
            0
        } else {
            (((key_value(k) as f64 - z_max) * inv_t).exp() * Q_SCALE) as u64
        }
    }));
    let q = &w.q;
    let live = keys.iter().filter(|&&k| k > 0).count();
    let mut margin = f64::INFINITY;

    // Top-k: the k-th largest key is the cut.
    let mut cut = 1;
    if params.top_k > 0 && params.top_k < live {
        w.order.clear();
        w.order.extend_from_slice(keys);
        let k = params.top_k - 1;
        w.order.select_nth_unstable_by(k, |a, b| b.cmp(a));
        cut = w.order[k];
    }

    // Top-p: walk the kept tokens by descending key, a tie group at a time.
    let p24 = fixed24(params.top_p);
    if p24 < 1 << 24 {
        w.order.clear();
        w.order
            .extend((0..n as u32).filter(|&i| keys[i as usize] >= cut));
        w.order
            .sort_unstable_by(|&a, &b| keys[b as usize].cmp(&keys[a as usize]));
        let mass: u64 = w.order.iter().map(|&i| q[i as usize]).sum();
        let target = scale24_ceil(p24, mass);
        let mut before = 0u64;
        for group in w
            .order
            .chunk_by(|&a, &b| keys[a as usize] == keys[b as usize])
        {
            let after = before + group.iter().map(|&i| q[i as usize]).sum::<u64>();
            if after >= target {
                cut = keys[group[0] as usize];
                let gap = (target - before).min(after - target + 1);
                margin = margin.min(gap as f64 / mass as f64);
                break;
            }
            before = after;
        }
    }

    // Min-p: relative to the best token's weight.
    let m24 = fixed24(params.min_p);
    let min_q = if m24 > 0 {
        scale24_ceil(m24, q[best])
    } else {
        0
    };
    let kept = |i: usize| keys[i] >= cut && q[i] >= min_q;
    if m24 > 0 {
        for i in (0..n).filter(|&i| keys[i] >= cut) {
            let gap = q[i].abs_diff(min_q) as f64 / q[best] as f64;
            margin = margin.min(gap);
        }
    }

    // The draw, in ascending id order.
    let total: u64 = (0..n).filter(|&i| kept(i)).map(|i| q[i]).sum();
    if total == 0 {
        return greedy;
    }
    let u24 = ((u * 16777216.0) as u64).min((1 << 24) - 1);
    let r = ((u24 as u128 * total as u128) >> 24) as u64;
    let mut acc = 0u64;
    for i in (0..n).filter(|&i| kept(i)) {
        let next = acc + q[i];
        if next > r {
            let gap = (r - acc).min(next - r);
            margin = margin.min(gap as f64 / total as f64);
            return Decision {
                id: i as u32,
                margin,
            };
        }
        acc = next;
    }
    unreachable!("r < total, so the running mass passes it")
}
