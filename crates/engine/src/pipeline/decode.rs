//! Decode: one token, one step, one submit.

use super::step::InferenceStep;
use super::Pipeline;
use crate::error::WickError;

impl Pipeline {
    /// Appends `id` at the current position; returns its logits.
    pub async fn decode(&mut self, id: u32) -> Result<Vec<f32>, WickError> {
        self.check_room(1)?;
        let step = InferenceStep::Decode { pos: self.pos };
        let mut rows = self.run_step(step, &[id], 1).await?;
        Ok(rows.pop().expect("one logits row"))
    }
}
