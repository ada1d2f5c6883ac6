//! Prefix reuse across a conversation's turns: each turn prefills only what
//! the KV cache does not already hold, and still produces the ids a
//! from-scratch run of the same history produces (greedy). A turn that edits
//! an earlier message rolls the position back to the difference. Gemma 3's
//! case runs past its 512-token sliding window.

use wick::pipeline::generate::GenerationOutput;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::{FinishReason, StopCriteria};
use wick::tokenizer::chat_template::{ChatMessage, ChatTemplate};
use wick::Engine;
use wick_tests::load_engine;

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";
/// Gemma 3's local layers see the last 512 positions.
const GEMMA3_WINDOW: usize = 512;
/// Tokens generated each turn: short, to keep lavapipe runs quick.
const REPLY_TOKENS: usize = 6;

/// One turn's prompt and what it generated.
struct Turn {
    prompt: Vec<u32>,
    out: GenerationOutput,
}

fn prompt_of(engine: &Engine, template: &ChatTemplate, messages: &[ChatMessage]) -> Vec<u32> {
    let text = template.render(messages, true).unwrap();
    template.encode(&engine.tokenizer, &text).unwrap()
}

fn generate(engine: &mut Engine, prompt: &[u32]) -> GenerationOutput {
    let stop = StopCriteria {
        stop_ids: engine.tokenizer.stop_ids(),
        max_tokens: REPLY_TOKENS,
    };
    let greedy = SamplingParams::default();
    pollster::block_on(
        engine
            .pipeline
            .generate(prompt, &greedy, &stop, None, &mut |_| true),
    )
    .unwrap()
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Runs one turn on the engine's current cache and checks the reuse: the
/// cache held exactly the last turn's prompt and all its reply but the last
/// token (sampled, never run), and the turn reused all of that it shares
/// with `prompt`.
fn turn(
    engine: &mut Engine,
    template: &ChatTemplate,
    messages: &[ChatMessage],
    last: Option<&Turn>,
) -> Turn {
    let prompt = prompt_of(engine, template, messages);
    let expected_held = match last {
        Some(t) => {
            let mut ids = t.prompt.clone();
            ids.extend_from_slice(&t.out.ids[..t.out.ids.len() - 1]);
            ids
        }
        None => Vec::new(),
    };
    assert_eq!(engine.pipeline.held_ids(), expected_held.as_slice());
    let out = generate(engine, &prompt);
    let shared = common_prefix(&expected_held, &prompt);
    assert_eq!(out.stats.prompt_tokens, prompt.len());
    assert_eq!(out.stats.cached_tokens, shared.min(prompt.len() - 1));
    assert_eq!(
        out.stats.prefilled_tokens(),
        prompt.len() - out.stats.cached_tokens
    );
    eprintln!(
        "prompt {} tokens, {} cached, {} prefilled, reply {:?}",
        prompt.len(),
        out.stats.cached_tokens,
        out.stats.prefilled_tokens(),
        engine.tokenizer.decode(&out.ids, true).unwrap()
    );
    Turn { prompt, out }
}

/// The replies of the turns from `first` (counted from 1) on, generated
/// again from a reset cache. Turn 1 ran on an empty cache already: a rerun
/// would repeat it exactly.
fn check_against_scratch(engine: &mut Engine, turns: &[Turn], first: usize) {
    assert!((2..=turns.len()).contains(&first), "turns {first}..");
    assert_eq!(
        turns[0].out.stats.cached_tokens, 0,
        "turn 1 ran from scratch"
    );
    for (i, t) in turns.iter().enumerate().skip(first - 1) {
        engine.pipeline.reset();
        let scratch = generate(engine, &t.prompt);
        assert_eq!(scratch.stats.cached_tokens, 0);
        assert_eq!(t.out.ids, scratch.ids, "turn {}", i + 1);
        eprintln!(
            "turn {}: time to first token {:.3} s reusing {} tokens, {:.3} s from scratch",
            i + 1,
            t.out.stats.time_to_first_token,
            t.out.stats.cached_tokens,
            scratch.stats.time_to_first_token
        );
    }
}

fn reply_message(engine: &Engine, t: &Turn) -> ChatMessage {
    ChatMessage::new(
        "assistant",
        engine.tokenizer.decode(&t.out.ids, true).unwrap(),
    )
}

/// Gemma 3's turn format. The gemma-3-270m file carries no chat template;
/// this is the shape of the instruction-tuned models' one, without its system
/// prompt handling (the test sends none).
const GEMMA3_TEMPLATE: &str = "{{ bos_token }}{% for m in messages %}\
{{ '<start_of_turn>' + ('model' if m.role == 'assistant' else m.role) + '\n' }}\
{{ m.content + '<end_of_turn>\n' }}{% endfor %}\
{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}";

fn load_chat(file: &str, ctx_len: usize) -> (Engine, ChatTemplate) {
    let engine = load_engine(file, ctx_len);
    let template = match ChatTemplate::from_gguf(&engine.gguf, &engine.tokenizer) {
        Ok(t) => t,
        Err(_) if file == GEMMA3 => {
            let t = &engine.tokenizer;
            let text = |id: Option<u32>| id.and_then(|id| t.token_text(id)).unwrap();
            ChatTemplate::new(GEMMA3_TEMPLATE, text(t.bos_id()), text(t.eos_id())).unwrap()
        }
        Err(e) => panic!("{file}: {e}"),
    };
    (engine, template)
}

#[test]
fn five_turns_prefill_only_their_new_tokens() {
    let (mut engine, template) = load_chat(SMOLLM2, 512);
    let questions = [
        "What is the capital of France?",
        "And of Italy?",
        "Which of the two is larger?",
        "Name a river in the first one.",
        "Thanks. Say goodbye.",
    ];
    let mut messages = vec![ChatMessage::new(
        "system",
        "You answer in one short sentence.",
    )];
    let mut turns: Vec<Turn> = Vec::new();
    for q in questions {
        messages.push(ChatMessage::new("user", q));
        let t = turn(&mut engine, &template, &messages, turns.last());
        if let Some(last) = turns.last() {
            // The history re-renders to the same ids, so only the last
            // reply's final token (never run) and the new turn are prefilled.
            let held = last.prompt.len() + last.out.ids.len() - 1;
            assert_eq!(t.out.stats.cached_tokens, held);
            assert!(t.out.stats.prefilled_tokens() < t.prompt.len() / 2);
        }
        messages.push(reply_message(&engine, &t));
        turns.push(t);
    }
    check_against_scratch(&mut engine, &turns, 2);
}

/// Turns 1 and 2, then turn 3 replaces turn 2's question (an edited message):
/// the cache rolls back to where the prompts part, and turn 4 goes on from
/// the edited history. The turns in `rerun` (counted from 1) are checked
/// against a run from scratch.
fn diverging_conversation(
    file: &str,
    ctx_len: usize,
    first_question: &str,
    rerun: std::ops::RangeInclusive<usize>,
) -> Vec<Turn> {
    let (mut engine, template) = load_chat(file, ctx_len);
    let mut messages = vec![ChatMessage::new("user", first_question)];
    let mut turns: Vec<Turn> = Vec::new();
    let t1 = turn(&mut engine, &template, &messages, None);
    messages.push(reply_message(&engine, &t1));
    turns.push(t1);

    messages.push(ChatMessage::new("user", "Tell me about the colour blue."));
    let t2 = turn(&mut engine, &template, &messages, turns.last());
    turns.push(t2);

    // The edit: turn 2's question and reply are replaced.
    messages.pop();
    messages.push(ChatMessage::new("user", "Tell me about the number seven."));
    let t3 = turn(&mut engine, &template, &messages, turns.last());
    let held_before = turns[1].prompt.len() + turns[1].out.ids.len() - 1;
    let cached = t3.out.stats.cached_tokens;
    assert!(
        cached > turns[0].prompt.len() && cached < turns[1].prompt.len(),
        "turn 3 should reuse turn 1 and part of turn 2's question: {cached} of {held_before} held"
    );
    messages.push(reply_message(&engine, &t3));
    turns.push(t3);

    messages.push(ChatMessage::new("user", "Why?"));
    let t4 = turn(&mut engine, &template, &messages, turns.last());
    turns.push(t4);
    check_against_scratch(&mut engine, &turns[..*rerun.end()], *rerun.start());
    turns
}

#[test]
fn an_edited_turn_rolls_back_to_the_difference() {
    diverging_conversation(SMOLLM2, 512, "Hello! Who are you?", 2..=4);
}

#[test]
fn gemma3_reuses_and_rolls_back_past_its_sliding_window() {
    let facts: String = (1..=58)
        .map(|i| format!("Box {i} holds {} marbles. ", i * 7 % 50))
        .collect();
    let question = format!("{facts}\nWhich box holds the most marbles?");
    // Turn 3 (the edit past the window) is rerun: the plain reuse of turns
    // 2 and 4 is what the SmolLM2 tests rerun, and each rerun here
    // prefills some 600 tokens, the slowest part on lavapipe.
    let turns = diverging_conversation(GEMMA3, 1024, &question, 3..=3);
    // The edit lands past the window: the local layers' re-prefilled queries
    // attend to the 512 positions before them, all kept from turns 1 and 2.
    let rolled_back_to = turns[2].out.stats.cached_tokens;
    assert!(
        rolled_back_to > GEMMA3_WINDOW + 16,
        "the first question should fill the window: edit at {rolled_back_to}"
    );
}

/// A constrained generation reuses the cache as a free one does: the same
/// prompt asked twice under a grammar prefills one token the second time
/// (the tools prompt under another `tool_choice`; a structured turn after a
/// free one), holds its whole reply for the next turn, and still gives a
/// from-scratch run's ids.
#[test]
fn constrained_turns_reuse_the_cached_prefix() {
    use wick::constrain::{Grammar, GrammarCompiler};
    let (mut engine, template) = load_chat(SMOLLM2, 512);
    let vocab = engine.pipeline.model().config.vocab_size;
    let compiler = GrammarCompiler::new(&engine.tokenizer, vocab).unwrap();
    let grammar = Grammar::Regex("(yes|no), because [a-z ]{1,60}\\.".into());
    let messages = [ChatMessage::new(
        "user",
        "Is the sky blue? Answer yes or no.",
    )];
    let prompt = prompt_of(&engine, &template, &messages);
    let constrained = |engine: &mut Engine| {
        let stop = StopCriteria {
            stop_ids: engine.tokenizer.stop_ids(),
            // Room for the grammar to end where the model chooses: its
            // last token is then the sampled `.` (one that reached the
            // 60-letter limit would end on a forced `.`, never run).
            max_tokens: 40,
        };
        let constraint = compiler.compile(&grammar).unwrap();
        pollster::block_on(engine.pipeline.generate(
            &prompt,
            &SamplingParams::default(),
            &stop,
            Some(constraint),
            &mut |_| true,
        ))
        .unwrap()
    };
    // A free turn first: the constrained one keeps its prompt's K/V.
    let free = generate(&mut engine, &prompt);
    assert_eq!(free.stats.cached_tokens, 0);
    let first = constrained(&mut engine);
    assert_eq!(first.stats.cached_tokens, prompt.len() - 1);
    // The cache holds the prompt and the whole reply but its last token
    // (sampled and never run), as after a free turn: the next turn of the
    // conversation reuses all of it.
    assert_eq!(first.finish_reason, FinishReason::Stop);
    let mut held = prompt.clone();
    held.extend_from_slice(&first.ids[..first.ids.len() - 1]);
    assert_eq!(engine.pipeline.held_ids(), held.as_slice());
    let again = constrained(&mut engine);
    assert_eq!(again.stats.cached_tokens, prompt.len() - 1);
    engine.pipeline.reset();
    let scratch = constrained(&mut engine);
    assert_eq!(scratch.stats.cached_tokens, 0);
    assert!(!scratch.ids.is_empty());
    assert_eq!(first.ids, scratch.ids);
    assert_eq!(again.ids, scratch.ids);
}
