//! What is wrong with a chat.completions request: the field (a path such as
//! `response_format.json_schema.name` or `messages[2].content[0].type`) and
//! the problem, which says whether wick does not implement what was asked
//! (`unsupported`) or the value is outside what the field accepts.

use super::messages::MessagesError;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{field}: {problem}")]
pub struct RequestError {
    pub field: String,
    pub problem: Problem,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Problem {
    // What wick does not implement.
    #[error("not supported by wick")]
    UnknownField,
    #[error("pass it as create(body, {{ signal }}), as the openai SDK does")]
    SignalInBody,
    #[error("n > 1 is supported without stream only")]
    StreamedChoices,
    /// The tool's `type`, as JSON.
    #[error("{0} tools are not supported (\"function\" only)")]
    ToolType(String),
    /// `response_format.type`, as JSON.
    #[error("{0} is not supported (\"text\", \"json_object\" or \"json_schema\")")]
    FormatType(String),
    /// A message the chat template cannot take (a part other than text is
    /// the one unsupported case; the others are invalid).
    #[error("{0}")]
    Message(MessagesError),

    // Values outside what a field accepts; `got` is the value as JSON.
    #[error("must be a number in [{lo}, {hi}], got {got}")]
    NotInRange { lo: f64, hi: f64, got: String },
    #[error("must be an integer >= {lo}, got {got}")]
    NotIntegerFrom { lo: u64, got: String },
    #[error("must be an integer in [0, {max}], got {got}")]
    NotIntegerUpTo { max: usize, got: String },
    #[error("must be a boolean, got {0}")]
    NotBoolean(String),
    #[error("must be an object of token id -> bias")]
    BiasNotAnObject,
    #[error("key {0} is not a token id")]
    BiasKey(String),
    #[error("bias of {0} must be in [-100, 100]")]
    BiasValue(String),
    #[error("must be a string or an array of strings")]
    StopNotStrings,
    #[error("at most {max} strings, got {got}")]
    TooManyStops { max: usize, got: usize },
    #[error("an empty string never ends anything")]
    EmptyStop,
    #[error("requires logprobs: true")]
    TopLogprobsWithoutLogprobs,
    #[error("is only allowed with stream: true")]
    StreamOptionsWithoutStream,
    #[error("must be an object of template variables")]
    KwargsNotAnObject,
    #[error("must be an array")]
    NotAnArray,
    #[error("must be a string")]
    NotAString,
    #[error("must be an object")]
    NotAnObject,
    #[error("must be an object with name and schema")]
    NoJsonSchema,
    #[error("must be 1-64 letters, digits, _ or -")]
    BadSchemaName,
    #[error("must be a JSON schema object")]
    SchemaNotAnObject,
}

impl RequestError {
    pub(crate) fn new(field: impl Into<String>, problem: Problem) -> RequestError {
        RequestError {
            field: field.into(),
            problem,
        }
    }

    /// Whether wick does not implement what the field asks for (OpenAI's
    /// API has it), as opposed to a value the field does not accept.
    pub fn unsupported(&self) -> bool {
        matches!(
            self.problem,
            Problem::UnknownField
                | Problem::SignalInBody
                | Problem::StreamedChoices
                | Problem::ToolType(_)
                | Problem::FormatType(_)
                | Problem::Message(MessagesError::NotATextPart { .. })
        )
    }

    /// The problem alone, without the field: what a caller that reports the
    /// field apart (the browser's typed errors) shows.
    pub fn reason(&self) -> String {
        self.problem.to_string()
    }
}

impl From<MessagesError> for RequestError {
    fn from(e: MessagesError) -> RequestError {
        RequestError::new(e.field(), Problem::Message(e))
    }
}
