//! The lane form's shape (`shaders/attention/attention_lanes.wgsl`): how many query
//! heads an invocation holds and the statements written out for them.

use super::Defines;

/// The lane form walks a row's keys in one loop, and llvmpipe ends a
/// shader's loops after 65535 trips in all: rows that may see more keys
/// than this take the workgroup form, which splits them over 64 lanes.
pub(super) const LANES_MAX_KEYS: usize = 32768;

/// Most query heads one lane-form invocation holds (`HL`).
const LANES_MAX_HEADS: usize = 8;
/// Most vec4s of q (and as many of output) one lane-form invocation holds,
/// over all its heads: its statements are written out per head and vec4,
/// and a CPU adapter's compile time grows with them (Gemma 3's head_dim 256
/// at 4 heads an invocation took 7 s longer to compile cold on lavapipe, at
/// 2 heads 0.5 s). 128 keeps 7 heads of 64 (Qwen2.5 0.5B) and 2 of 256.
const LANES_MAX_VEC4S: usize = 128;
/// Invocations per workgroup in the lane form: small, so that a short
/// prompt's few invocations still spread over a CPU adapter's threads.
pub(super) const LANES_WG: u32 = 16;

/// Query heads per lane-form invocation for a GQA group of `group` heads of
/// `d4` vec4s: the largest divisor of the group (so an invocation's heads
/// share one KV head) within `LANES_MAX_HEADS` and `LANES_MAX_VEC4S`.
pub(super) fn lanes_heads(group: usize, d4: usize) -> usize {
    (1..=group.min(LANES_MAX_HEADS))
        .rev()
        .find(|h| group % h == 0 && h * d4 <= LANES_MAX_VEC4S)
        .unwrap_or(1)
}

/// The lane form's statements per head and vec4, written out (`d4` vec4s a
/// head row, `hl` heads): llvmpipe stops a shader's loops after 65535
/// iterations in all, and loops over the head inside the loop over a long
/// row's keys reached that (head_dim 256, 500 keys), silently dropping the
/// last keys. Only the key loop stays a loop.
pub(super) fn lanes_defines(d4: u32, hl: u32) -> Defines {
    let per_vec4 = |f: &dyn Fn(u32) -> String| (0..d4).map(f).collect::<Vec<_>>().join("\n    ");
    let per_head = |f: &dyn Fn(u32) -> String| (0..hl).map(f).collect::<Vec<_>>().join("\n    ");
    let per_both = |f: &dyn Fn(u32, u32) -> String| {
        (0..hl)
            .flat_map(|j| (0..d4).map(move |i| (j, i)))
            .map(|(j, i)| f(j, i))
            .collect::<Vec<_>>()
            .join("\n    ")
    };
    let load_q = per_both(&|j, i| {
        let b = 4 * (j * d4 + i);
        let slot = j * d4 + i;
        format!(
            "qv[{slot}] = vec4(q[qb + {b}u], q[qb + {}u], q[qb + {}u], q[qb + {}u]) * p.scale;",
            b + 1,
            b + 2,
            b + 3
        )
    });
    let store = per_both(&|j, i| {
        let b = 4 * (j * d4 + i);
        let slot = j * d4 + i;
        format!(
            "out[ob + {b}u] = acc[{slot}].x / l[{j}]; out[ob + {}u] = acc[{slot}].y / l[{j}]; \
             out[ob + {}u] = acc[{slot}].z / l[{j}]; out[ob + {}u] = acc[{slot}].w / l[{j}];",
            b + 1,
            b + 2,
            b + 3
        )
    });
    vec![
        ("D4", d4.to_string().into()),
        ("HL", hl.to_string().into()),
        ("WG_LANES", LANES_WG.to_string().into()),
        ("LOAD_Q", load_q.into()),
        ("INIT", per_head(&|j| format!("m[{j}] = NEG_BIG; l[{j}] = 0.0;")).into()),
        ("LOAD_K", per_vec4(&|i| format!("kv[{i}] = load_k(kb + {i}u);")).into()),
        (
            "DOT_K",
            per_both(&|j, i| format!("dot4[{j}] += qv[{}] * kv[{i}];", j * d4 + i)).into(),
        ),
        (
            "SCORE",
            per_head(&|j| {
                format!(
                    "let step{j} = online_step(dot4[{j}].x + dot4[{j}].y + dot4[{j}].z + dot4[{j}].w, m[{j}], l[{j}]); \
                     alpha[{j}] = step{j}.x; wgt[{j}] = step{j}.y; m[{j}] = step{j}.z; l[{j}] = step{j}.w;"
                )
            })
            .into(),
        ),
        ("LOAD_V", per_vec4(&|i| format!("kv[{i}] = load_v(kb + {i}u);")).into()),
        (
            "ADD_V",
            per_both(&|j, i| {
                let slot = j * d4 + i;
                format!("acc[{slot}] = acc[{slot}] * alpha[{j}] + wgt[{j}] * kv[{i}];")
            })
            .into(),
        ),
        ("STORE", store.into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_form_holds_the_largest_divisor_of_the_group_that_fits() {
        // (group, head_dim / 4, heads an invocation): every head of an
        // invocation reads the same KV head, so the count divides the group;
        // at most 8 heads and 128 vec4s of q.
        for (group, d4, want) in [
            (1, 16, 1),
            (3, 16, 3),
            (7, 16, 7),
            (8, 16, 8),
            (12, 16, 6),
            (16, 16, 8),
            (11, 16, 1),
            (9, 16, 3),
            (4, 64, 2),
            (6, 32, 3),
            (4, 25, 4),
            (2, 128, 1),
        ] {
            assert_eq!(lanes_heads(group, d4), want, "group {group}, d4 {d4}");
        }
    }
}
