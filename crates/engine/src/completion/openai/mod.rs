//! OpenAI's chat.completions API, shaped once for every front end (the CLI's
//! `wick chat --json`, the browser's `chat.completions.create`): a request
//! checked into what a generation takes (`request`, its errors naming the
//! field in `error`, its messages in `messages`), and the reply's objects
//! (`response`), assembled from a generation's steps (`steps`). Front ends
//! only carry values in and out: JSON files, JavaScript objects and streams.

mod error;
pub mod messages;
mod request;
#[cfg(test)]
mod request_tests;
mod response;
mod steps;
#[cfg(test)]
mod steps_tests;

pub use error::{Problem, RequestError};
pub use messages::MessagesError;
pub use request::{ChatRequest, Sampling, FIELDS, MAX_TOP_LOGPROBS};
pub use response::{
    finish_reason, reply_reason, ChatCompletion, ChatCompletionChunk, Choice, ChunkChoice, Delta,
    Logprobs, Message, PromptTokensDetails, ReplyHeader, Usage,
};
pub use steps::{CallDelta, ChoiceBuilder, ChunkStream, FunctionDelta, Step};
