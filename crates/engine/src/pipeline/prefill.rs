//! Prefill: a prompt in chunks, each one step.

use super::step::plan_prefill;
use super::Pipeline;
use crate::error::WickError;

impl Pipeline {
    /// Runs `ids` at the current position and returns the logits of the last
    /// `last` of them (teacher forcing; `last` = 1 to start generating).
    pub async fn prefill(&mut self, ids: &[u32], last: usize) -> Result<Vec<Vec<f32>>, WickError> {
        if ids.is_empty() {
            return Err(WickError::InvalidOption("the prompt has no tokens".into()));
        }
        if last > ids.len() {
            return Err(WickError::InvalidOption(format!(
                "asked for logits of the last {last} positions of a {}-token input",
                ids.len()
            )));
        }
        self.check_room(ids.len())?;
        let chunk = self.act.max_rows;
        let first_wanted = ids.len() - last;
        let start = self.pos;
        let mut logits = Vec::with_capacity(last);
        for step in plan_prefill(start, ids.len(), chunk) {
            let (lo, rows) = (step.pos0() - start, step.rows());
            let wanted = (lo + rows).saturating_sub(first_wanted.max(lo));
            let chunk_ids = &ids[lo..lo + rows];
            logits.extend(self.run_step(step, chunk_ids, wanted).await?);
        }
        Ok(logits)
    }
}
