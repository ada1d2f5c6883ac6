//! Stop strings: generation ends where the generated text contains one of
//! them (OpenAI's `stop`). Tokens are matched as text, so a stop string may
//! span several tokens or end inside one; the text from the stop string on is
//! never emitted, and text that could still turn out to be the start of a
//! stop string is held back until it cannot.

use crate::pipeline::error::PipelineError;

/// OpenAI's limit on `stop`.
pub const MAX_STOP_STRINGS: usize = 4;

/// Filters streamed text for stop strings.
#[derive(Clone, Debug, Default)]
pub struct StopStrings {
    stops: Vec<String>,
    /// Text received but not yet emitted: the end of the stream so far that
    /// is the start of some stop string.
    pending: String,
    /// The stop string found, once one is.
    matched: Option<usize>,
}

impl StopStrings {
    /// Refuses more than [`MAX_STOP_STRINGS`] strings, and empty ones (an
    /// empty string would stop before the first token).
    pub fn new(stops: &[String]) -> Result<StopStrings, PipelineError> {
        if stops.len() > MAX_STOP_STRINGS {
            return Err(PipelineError::InvalidOption(format!(
                "{} stop strings given; at most {MAX_STOP_STRINGS}",
                stops.len()
            )));
        }
        if stops.iter().any(String::is_empty) {
            return Err(PipelineError::InvalidOption(
                "a stop string must not be empty".into(),
            ));
        }
        Ok(StopStrings {
            stops: stops.to_vec(),
            ..Default::default()
        })
    }

    /// The stop string found, if any.
    pub fn matched(&self) -> Option<&str> {
        self.matched.map(|i| self.stops[i].as_str())
    }

    /// Takes the next piece of generated text and returns what may be emitted
    /// now. Once a stop string is found, returns the text before it (the
    /// earliest occurrence of any of them) and from then on nothing.
    pub fn push(&mut self, text: &str) -> String {
        if self.matched.is_some() {
            return String::new();
        }
        self.pending.push_str(text);
        let found = self
            .stops
            .iter()
            .enumerate()
            .filter_map(|(i, s)| self.pending.find(s.as_str()).map(|at| (at, i)))
            .min();
        if let Some((at, i)) = found {
            self.matched = Some(i);
            self.pending.truncate(at);
            return std::mem::take(&mut self.pending);
        }
        let emit = self.pending.len() - self.partial_match_len();
        self.pending.drain(..emit).collect()
    }

    /// Ends the stream: the held-back text, which no stop string can now
    /// complete (nothing after a match).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }

    /// Bytes at the end of `pending` that are a proper start of some stop
    /// string (the longest such run). Both are whole UTF-8 strings, so a
    /// suffix that equals a stop string's start begins on a character.
    fn partial_match_len(&self) -> usize {
        self.stops
            .iter()
            .flat_map(|s| {
                s.char_indices()
                    .skip(1)
                    .map(|(end, _)| &s[..end])
                    .filter(|start| self.pending.ends_with(start))
                    .map(str::len)
            })
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stops(s: &[&str]) -> StopStrings {
        StopStrings::new(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    /// Pushes each piece; returns what was emitted per push and at the end.
    fn run(f: &mut StopStrings, pieces: &[&str]) -> (Vec<String>, String) {
        let out = pieces.iter().map(|p| f.push(p)).collect();
        (out, f.finish())
    }

    #[test]
    fn a_stop_string_split_across_pieces_is_never_emitted() {
        let mut f = stops(&["END"]);
        let (out, rest) = run(&mut f, &["The ", "story E", "N", "D and more"]);
        assert_eq!(out, ["The ", "story ", "", ""]);
        assert_eq!(rest, "");
        assert_eq!(f.matched(), Some("END"));
    }

    #[test]
    fn held_back_text_is_released_when_the_stop_never_completes() {
        let mut f = stops(&["END"]);
        let (out, rest) = run(&mut f, &["an E", "N", "velope"]);
        // "EN" is held until "v" shows it is not "END".
        assert_eq!(out, ["an ", "", "ENvelope"]);
        assert_eq!(rest, "");
        let mut f = stops(&["END"]);
        let (out, rest) = run(&mut f, &["an E", "N"]);
        assert_eq!(out, ["an ", ""]);
        assert_eq!(rest, "EN");
        assert_eq!(f.matched(), None);
    }

    #[test]
    fn the_earliest_stop_string_wins() {
        let mut f = stops(&["world", "lo w", "x"]);
        assert_eq!(f.push("hello world"), "hel");
        assert_eq!(f.matched(), Some("lo w"));
        assert_eq!(f.push("more"), "");
    }

    #[test]
    fn text_before_a_stop_inside_one_piece_is_emitted() {
        let mut f = stops(&["\n\n"]);
        assert_eq!(f.push("a\n"), "a");
        assert_eq!(f.push("\nb"), "");
        assert_eq!(f.matched(), Some("\n\n"));
    }

    #[test]
    fn multibyte_characters_are_held_whole() {
        let mut f = stops(&["€€!"]);
        assert_eq!(f.push("x€"), "x");
        assert_eq!(f.push("€"), "");
        assert_eq!(f.push("?"), "€€?");
        assert_eq!(f.finish(), "");
    }

    #[test]
    fn too_many_or_empty_stop_strings_are_refused() {
        let five: Vec<String> = (0..5).map(|i| i.to_string()).collect();
        assert!(matches!(
            StopStrings::new(&five),
            Err(PipelineError::InvalidOption(_))
        ));
        assert!(StopStrings::new(&five[..4]).is_ok());
        assert!(StopStrings::new(&[String::new()]).is_err());
    }
}
