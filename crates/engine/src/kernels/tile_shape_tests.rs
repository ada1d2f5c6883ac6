//! `TileShape::windowed`'s rows and workgroups.

use super::*;

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
    };
    let w = tile.windowed(576, true, 8);
    assert_eq!((w.tn, w.tm, w.wg), (24, WIDE_TILE_M, 8));
    assert_eq!(w.rows(1), 8 * 24);
    // Batches of 4: 576 rows are 6 of 24 rows a lane, 5 of 32 padded.
    let narrow = tile.windowed(576, false, 4);
    assert_eq!((narrow.tn, narrow.tm, narrow.wg), (24, TILE_M, 4));
    assert_eq!(tile.windowed(640, false, 4).tn, 32);
    assert_eq!(
        (narrow.x4, narrow.vec, narrow.form),
        (true, true, RowForm::Unrolled)
    );
}
