//! A fused group whose last member streams in (`FusedTail`) uploads the
//! same buffers as the group joined whole (`Pending::matrix`): a q/k/v
//! concatenation and a gate/up pair, the tail in pieces that cut rows, in
//! either arrival order of the pair; members of unequal shape are refused.

use super::*;
use crate::format::quant::quantize;
use crate::gpu::WeightStore;
use crate::kernels::weights::test_weights;
use crate::testutil::ctx_with_store;

fn buffers(ctx: &GpuContext, m: &QuantMatrix) -> Vec<Vec<u8>> {
    m.parts
        .iter()
        .map(|p| pollster::block_on(ctx.read_bytes(&p.buffer, 0, p.buffer.size())).unwrap())
        .collect()
}

fn fusions() -> Vec<Fusion> {
    vec![
        Fusion::concat("qkv".into(), vec!["q".into(), "k".into(), "v".into()]),
        Fusion {
            name: "gate_up".into(),
            members: vec!["gate".into(), "up".into()],
            layout: Layout::Interleave,
        },
    ]
}

#[test]
fn a_streamed_last_member_joins_as_the_whole_group() {
    let ctx = ctx_with_store(WeightStore::Buffers);
    let dtype = GgmlType::Q4_K;
    let cols = 512;
    let member = |rows: usize, seed| quantize(dtype, &test_weights(rows * cols, seed)).unwrap();
    let cases: [(&str, &[(&str, usize)]); 3] = [
        ("qkv", &[("q", 12), ("k", 4), ("v", 4)]),
        ("gate_up", &[("gate", 9), ("up", 9)]),
        ("gate_up", &[("up", 9), ("gate", 9)]),
    ];
    for (group, members) in cases {
        let bytes: Vec<Vec<u8>> = (0..members.len())
            .map(|i| member(members[i].1, i as u64))
            .collect();
        // Whole: every member through Pending::matrix.
        let mut whole = Pending::new(fusions());
        let mut want = None;
        for ((name, rows), b) in members.iter().zip(&bytes) {
            want = whole
                .matrix(ctx, name, dtype, *rows, cols, b.clone())
                .unwrap();
        }
        let Some(Complete::Matrix(name, want)) = want else {
            panic!("{group}: no matrix");
        };
        assert_eq!(name, group);
        // Streamed: the last member in pieces of 100 bytes.
        let mut pending = Pending::new(fusions());
        let (last, rest) = members.split_last().unwrap();
        for ((name, rows), b) in rest.iter().zip(&bytes) {
            assert!(
                !pending.streams_tail(name),
                "{name}: the others are not in yet"
            );
            assert!(pending
                .matrix(ctx, name, dtype, *rows, cols, b.clone())
                .unwrap()
                .is_none());
        }
        assert!(pending.streams_tail(last.0), "{group}: {}", last.0);
        let mut tail = pending
            .begin_tail(ctx, last.0, dtype, last.1, cols)
            .unwrap();
        for piece in bytes.last().unwrap().chunks(100) {
            tail.push(ctx, piece).unwrap();
        }
        let (name, got) = tail.finish(ctx).unwrap();
        assert_eq!(name, group);
        assert!(
            buffers(ctx, &got) == buffers(ctx, &want),
            "{group}, {members:?}"
        );
    }
}

#[test]
fn a_pair_of_unequal_members_is_refused() {
    let ctx = ctx_with_store(WeightStore::Buffers);
    let dtype = GgmlType::Q8_0;
    let cols = 64;
    let mut pending = Pending::new(fusions());
    let gate = quantize(dtype, &test_weights(4 * cols, 1)).unwrap();
    pending.matrix(ctx, "gate", dtype, 4, cols, gate).unwrap();
    let up = quantize(dtype, &test_weights(5 * cols, 2)).unwrap();
    let mut tail = pending.begin_tail(ctx, "up", dtype, 5, cols).unwrap();
    let err = tail.push(ctx, &up).unwrap_err();
    assert!(err.to_string().contains("different row counts"), "{err}");
    // Not the last of a concatenation: gathered instead.
    assert!(!pending.streams_tail("q"));
}
