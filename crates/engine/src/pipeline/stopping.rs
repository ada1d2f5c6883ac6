//! When generation stops, and why.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced an end-of-generation token, or the text a stop
    /// string.
    Stop,
    /// `max_tokens` were generated.
    Length,
    /// The context is full.
    ContextFull,
    /// The caller asked to stop.
    Cancelled,
}

impl FinishReason {
    /// The OpenAI-style name (`stop`, `length`).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ContextFull => "context_full",
            FinishReason::Cancelled => "cancelled",
        }
    }

    /// OpenAI's `finish_reason`, which has no name of its own for a full
    /// context: that is `length` too. A cancelled generation has none.
    pub fn openai(self) -> Option<&'static str> {
        match self {
            FinishReason::Stop => Some("stop"),
            FinishReason::Length | FinishReason::ContextFull => Some("length"),
            FinishReason::Cancelled => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct StopCriteria {
    pub stop_ids: Vec<u32>,
    pub max_tokens: usize,
}

impl StopCriteria {
    /// Checks after `generated` tokens, the last being `last`.
    pub fn check(
        &self,
        last: u32,
        generated: usize,
        pos: usize,
        ctx_len: usize,
    ) -> Option<FinishReason> {
        if self.stop_ids.contains(&last) {
            Some(FinishReason::Stop)
        } else if generated >= self.max_tokens {
            Some(FinishReason::Length)
        } else if pos >= ctx_len {
            Some(FinishReason::ContextFull)
        } else {
            None
        }
    }
}
