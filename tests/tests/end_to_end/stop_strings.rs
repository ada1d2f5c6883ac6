//! Stop strings on a real model's text (`Engine::complete`): one split across
//! two tokens ends the generation there, unseen in the stream; one that never
//! completes leaves the text whole; a full context finishes as OpenAI's
//! `length`.

use wick::completion::Completion;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::{FinishReason, StopCriteria};
use wick::tokenizer::StreamDecoder;
use wick::Engine;
use wick_tests::load_engine;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const PROMPT: &str = "Once upon a time";
const MAX_TOKENS: usize = 16;

/// Greedy completion of `PROMPT`; returns it and the pieces streamed.
fn complete(engine: &mut Engine, stops: &[String]) -> (Completion, Vec<String>) {
    let prompt = engine.tokenize_prompt(PROMPT).unwrap();
    let stop = StopCriteria {
        stop_ids: engine.tokenizer.stop_ids(),
        max_tokens: MAX_TOKENS,
    };
    let mut streamed = Vec::new();
    let out = pollster::block_on(engine.complete(
        &prompt,
        &SamplingParams::default(),
        stop,
        stops,
        None,
        &mut |piece| {
            streamed.push(piece.to_string());
            true
        },
    ))
    .unwrap();
    (out, streamed)
}

/// The text each id adds, as the stream decodes it.
fn pieces(engine: &Engine, ids: &[u32]) -> Vec<String> {
    let mut d = StreamDecoder::new(&engine.tokenizer, true);
    ids.iter().map(|&id| d.push(id).unwrap()).collect()
}

fn last_chars(s: &str, n: usize) -> &str {
    let at = s.char_indices().rev().nth(n - 1).map_or(0, |(i, _)| i);
    &s[at..]
}

fn first_chars(s: &str, n: usize) -> &str {
    let at = s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
    &s[..at]
}

#[test]
fn a_stop_string_across_two_tokens_ends_there_unseen() {
    let mut engine = load_engine(MODEL, 128);
    let (full, streamed) = complete(&mut engine, &[]);
    assert_eq!(full.finish_reason, FinishReason::Length, "{:?}", full.text);
    assert_eq!(streamed.concat(), full.text);
    let pieces = pieces(&engine, &full.ids);
    // A stop string of two characters from the end of token i and two from
    // the start of token i + 1, first found exactly there.
    let (i, stop, at) = (0..pieces.len() - 1)
        .find_map(|i| {
            let (a, b) = (&pieces[i], &pieces[i + 1]);
            if a.chars().count() < 2 || b.chars().count() < 2 {
                return None;
            }
            let stop = format!("{}{}", last_chars(a, 2), first_chars(b, 2));
            let boundary = pieces[..=i].concat().len();
            let at = boundary - last_chars(a, 2).len();
            (full.text.find(&stop) == Some(at)).then_some((i, stop, at))
        })
        .expect("two adjacent tokens of two characters or more");
    eprintln!(
        "stop {stop:?} across tokens {i} and {} of {:?}",
        i + 1,
        full.text
    );

    let (out, streamed) = complete(&mut engine, std::slice::from_ref(&stop));
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.finish_reason.openai(), Some("stop"));
    assert_eq!(out.stop_string.as_deref(), Some(stop.as_str()));
    assert_eq!(out.text, full.text[..at]);
    // Nothing of the stop string reached the stream, not even its start,
    // which token i alone had completed.
    assert_eq!(streamed.concat(), out.text);
    assert_eq!(out.ids, full.ids[..=i + 1]);
}

#[test]
fn a_stop_string_that_never_completes_leaves_the_text_whole() {
    let mut engine = load_engine(MODEL, 128);
    let (full, _) = complete(&mut engine, &[]);
    // Starts with the text's last characters, so they are held back to the
    // end, then released.
    let tail = last_chars(&full.text, 3).to_string();
    let never = vec![format!("{tail}\u{2603}\u{2603}"), "\u{2603}".to_string()];
    let (out, streamed) = complete(&mut engine, &never);
    assert_eq!(out.finish_reason, FinishReason::Length);
    assert_eq!(out.stop_string, None);
    assert_eq!(out.text, full.text);
    assert_eq!(out.ids, full.ids);
    assert_eq!(streamed.concat(), full.text);
    assert!(streamed.last().unwrap().ends_with(&tail), "{streamed:?}");
}

#[test]
fn a_full_context_finishes_as_length() {
    let mut engine = load_engine(MODEL, 12);
    let (out, _) = complete(&mut engine, &[]);
    let prompt = engine.tokenize_prompt(PROMPT).unwrap();
    assert_eq!(out.finish_reason, FinishReason::ContextFull);
    assert_eq!(out.finish_reason.openai(), Some("length"));
    // Every position is used: the prompt, then one per token but the last,
    // which is sampled from the final position's logits.
    assert_eq!(out.ids.len(), 12 - prompt.len() + 1);
}

#[test]
fn more_than_four_stop_strings_are_refused() {
    let mut engine = load_engine(MODEL, 32);
    let prompt = engine.tokenize_prompt(PROMPT).unwrap();
    let stops: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
    let stop = StopCriteria {
        stop_ids: Vec::new(),
        max_tokens: 4,
    };
    let err = pollster::block_on(engine.complete(
        &prompt,
        &SamplingParams::default(),
        stop,
        &stops,
        None,
        &mut |_| true,
    ))
    .err()
    .expect("five stop strings refused");
    assert!(matches!(err, wick::WickError::InvalidOption(_)), "{err}");
}

#[test]
fn a_caller_that_says_stop_is_not_called_again() {
    let mut engine = load_engine(MODEL, 64);
    let prompt = engine.tokenize_prompt(PROMPT).unwrap();
    let stop = StopCriteria {
        stop_ids: Vec::new(),
        max_tokens: MAX_TOKENS,
    };
    let mut calls = 0;
    let out = pollster::block_on(engine.complete(
        &prompt,
        &SamplingParams::default(),
        stop,
        &["never seen \u{2603}".to_string()],
        None,
        &mut |_| {
            calls += 1;
            false
        },
    ))
    .unwrap();
    assert_eq!(calls, 1);
    assert_eq!(out.finish_reason, FinishReason::Cancelled);
    assert!(out.ids.len() < MAX_TOKENS, "{:?}", out.ids);
}
