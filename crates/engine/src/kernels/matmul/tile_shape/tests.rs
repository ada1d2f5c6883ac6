//! `TileShape::windowed`'s rows and workgroups.

use super::*;
use crate::format::quant::GgmlType;

/// Rows an invocation for the models' projections in llvmpipe's
/// batches of 8: whole batches where one of WINDOW_TNS gives them, the
/// most rows of those; else the least padding.
#[test]
fn windowed_rows_fill_whole_batches() {
    // (rows, tn): SmolLM2's q/k/v (960), o and down (576), k/v alone
    // (192), gate/up (3072); Qwen2.5's q/k/v (1152), o and down (896),
    // k/v (128); Gemma 3's o (640); 200 rows, which no tn divides
    // into whole batches: 32 pads them to 256, 24 to 384, 16 to 256.
    let cases = [
        (960, 24),
        (576, 24),
        (192, 24),
        (3072, 32),
        (1152, 24),
        (896, 16),
        (128, 16),
        (640, 16),
        (200, 32),
    ];
    for (rows, tn) in cases {
        assert_eq!(window_tn(rows, 8), tn, "{rows} rows");
    }
}

/// The windowed shape takes one batch a workgroup and keeps the rest of
/// the adapter's tile.
#[test]
fn windowed_shape_is_a_batch_a_workgroup() {
    let tile = TileShape {
        tn: 32,
        tm: TILE_M,
        x4: true,
        vec: true,
        form: RowForm::Unrolled,
        wg: 64,
        x_share: false,
    };
    let w = tile.windowed(576, true, 8, false);
    assert_eq!((w.tn, w.tm, w.wg), (24, WIDE_TILE_M, 8));
    assert_eq!(w.rows(1), 8 * 24);
    // Batches of 4: 576 rows are 6 of 24 rows a lane, 5 of 32 padded.
    let narrow = tile.windowed(576, false, 4, false);
    assert_eq!((narrow.tn, narrow.tm, narrow.wg), (24, TILE_M, 4));
    assert_eq!(tile.windowed(640, false, 4, false).tn, 32);
    assert_eq!(
        (narrow.x4, narrow.vec, narrow.form),
        (true, true, RowForm::Unrolled)
    );
}

/// Sharing x through the subgroup: where the adapter's subgroups allow it,
/// the windowed tile shares x in every form but the flat one; its loads
/// take each of a chunk's vec4s from the lane that loaded it, every lane
/// runs the chunk loop (no exit for rows past the matrix), and the entry
/// point sets the lane. Unshared, none of that is in the source.
#[test]
fn windowed_tiles_share_x_through_the_subgroup() {
    let tile = |form| TileShape {
        tn: 32,
        tm: TILE_M,
        x4: true,
        vec: true,
        form,
        wg: 64,
        x_share: false,
    };
    for form in [RowForm::Loop, RowForm::Unrolled, RowForm::Flat] {
        let flat = form == RowForm::Flat;
        assert_eq!(tile(form).windowed(576, true, 8, true).x_share, !flat);
        assert!(!tile(form).windowed(576, true, 8, false).x_share);
    }
    let define = |shape: TileShape, fmt: GpuFormat, name: &str| {
        let defines = shape.defines(fmt);
        let found = defines.iter().find(|(n, _)| *n == name);
        found.map(|(_, v)| v.to_string()).unwrap_or_default()
    };
    // Q4_0's chunks are 8 vec4s, F32's 4.
    for (dtype, vec4s) in [(GgmlType::Q4_0, 8), (GgmlType::F32, 4)] {
        let fmt = GpuFormat::of(dtype).unwrap();
        let shared = tile(RowForm::Unrolled).windowed(576, true, 8, true);
        let loads = define(shared, fmt, "X_LOADS");
        for t in 0..shared.tm {
            for i in 0..vec4s {
                let line = format!("xs[{t}][{i}] = subgroupBroadcast(xv{t}, {i}u);");
                assert!(loads.contains(&line), "{dtype}: {line} in\n{loads}");
            }
            let past = format!("xs[{t}][{vec4s}]");
            assert!(!loads.contains(&past), "{dtype}: {past}");
        }
        assert_eq!(define(shared, fmt, "ROW_EXIT"), "");
        assert_eq!(shared.flags(), [("X_LANE", true)]);
        let own = tile(RowForm::Unrolled).windowed(576, true, 8, false);
        assert!(!define(own, fmt, "X_LOADS").contains("subgroupBroadcast"));
        assert_eq!(define(own, fmt, "ROW_EXIT"), "row0 >= p.rows || ");
        assert_eq!(own.flags(), [("X_LANE", false)]);
    }
}
