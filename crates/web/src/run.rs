//! What a `WasmGeneration` steps: free text (`Generation`) or a generation
//! under a grammar (`ConstrainedGeneration`), behind one interface.

use wick::pipeline::constrained::ConstrainedGeneration;
use wick::pipeline::generate::Generation;
use wick::pipeline::stats::GenerationStats;
use wick::pipeline::stopping::FinishReason;
use wick::pipeline::{Pipeline, PipelineError};

// One per generation, held in its RefCell: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Run {
    Free(Generation),
    Constrained(ConstrainedGeneration),
}

impl Run {
    /// The next token, or `None` once finished.
    pub async fn next_token(
        &mut self,
        pipeline: &mut Pipeline,
    ) -> Result<Option<u32>, PipelineError> {
        match self {
            Run::Free(g) => pipeline.next_token(g).await,
            Run::Constrained(g) => pipeline.next_constrained_token(g).await,
        }
    }

    pub fn ids(&self) -> &[u32] {
        match self {
            Run::Free(g) => g.ids(),
            Run::Constrained(g) => g.ids(),
        }
    }

    pub fn stats(&self) -> &GenerationStats {
        match self {
            Run::Free(g) => g.stats(),
            Run::Constrained(g) => g.stats(),
        }
    }

    pub fn finish_reason(&self) -> Option<FinishReason> {
        match self {
            Run::Free(g) => g.finish_reason(),
            Run::Constrained(g) => g.finish_reason(),
        }
    }

    pub fn stop_at_string(&mut self) {
        match self {
            Run::Free(g) => g.stop_at_string(),
            Run::Constrained(g) => g.stop_at_string(),
        }
    }

    pub fn cancel(&mut self) {
        match self {
            Run::Free(g) => g.cancel(),
            Run::Constrained(g) => g.cancel(),
        }
    }
}
