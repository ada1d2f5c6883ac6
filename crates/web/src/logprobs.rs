//! Log-probabilities in OpenAI's shape (`choices[].logprobs.content`), from
//! the engine's `Pipeline::logprobs_of` (one prefill after the generation).

use serde::Serialize;
use wick::pipeline::logprobs::TokenLogprob;
use wick::tokenizer::Tokenizer;
use wick::WickError;

/// One token as OpenAI writes it: its text (lossy where the token holds part
/// of a character) and its exact bytes.
#[derive(Serialize)]
pub(crate) struct Alternative {
    token: String,
    logprob: f32,
    bytes: Vec<u8>,
}

#[derive(Serialize)]
pub(crate) struct Entry {
    token: String,
    logprob: f32,
    bytes: Vec<u8>,
    top_logprobs: Vec<Alternative>,
}

fn alternative(tok: &Tokenizer, id: u32, logprob: f32) -> Result<Alternative, WickError> {
    // Control tokens are written out (`<|im_end|>`), as OpenAI does.
    let bytes = tok.token_bytes(id, false)?;
    Ok(Alternative {
        token: String::from_utf8_lossy(&bytes).into_owned(),
        logprob,
        bytes,
    })
}

/// The engine's log-probabilities as OpenAI's `logprobs.content` entries.
pub(crate) fn entries(tok: &Tokenizer, lps: &[TokenLogprob]) -> Result<Vec<Entry>, WickError> {
    lps.iter()
        .map(|t| {
            let Alternative {
                token,
                logprob,
                bytes,
            } = alternative(tok, t.id, t.logprob)?;
            let top = t.top.iter().map(|&(id, lp)| alternative(tok, id, lp));
            Ok(Entry {
                token,
                logprob,
                bytes,
                top_logprobs: top.collect::<Result<_, _>>()?,
            })
        })
        .collect()
}
