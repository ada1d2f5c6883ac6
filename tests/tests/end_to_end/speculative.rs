//! Speculative decoding gives what plain decoding gives: greedy ids on the
//! golden prompts and over long generations, sampled ids seed by seed, and
//! the same end (stop token, stop string, max tokens, a full context) with
//! the same cache left behind.

use wick::constrain::{Constraint, Grammar, GrammarCompiler};
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::speculative::{Speculation, MAX_DRAFT_TOKENS};
use wick::pipeline::stats::SpeculativeStats;
use wick::pipeline::stopping::{FinishReason, StopCriteria};
use wick::pipeline::PipelineError;
use wick::Engine;
use wick_tests::{golden, load_engine};

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const QWEN: &str = "qwen2.5-coder-0.5b-instruct-awq.gguf";
const TINY: &str = "tiny-qwen3.q8_0.gguf";

const LOOKUP: Speculation = Speculation::Lookup { draft_tokens: 8 };

struct Run {
    ids: Vec<u32>,
    finish: FinishReason,
    /// Positions the cache holds after it, and their ids.
    held: Vec<u32>,
    /// The logits of one more token decoded on the cache it left (where
    /// the context has room): what the cache's values give.
    next_logits: Option<Vec<f32>>,
    speculative: Option<SpeculativeStats>,
}

fn run(
    engine: &mut Engine,
    speculation: Speculation,
    prompt: &[u32],
    sampling: &SamplingParams,
    stop: &StopCriteria,
) -> Run {
    run_under(engine, speculation, prompt, sampling, stop, None)
}

/// `run`, under `grammar` where one is given.
fn run_under(
    engine: &mut Engine,
    speculation: Speculation,
    prompt: &[u32],
    sampling: &SamplingParams,
    stop: &StopCriteria,
    grammar: Option<Constraint>,
) -> Run {
    let p = &mut engine.pipeline;
    pollster::block_on(p.set_speculation(speculation, false)).unwrap();
    p.reset();
    let out =
        pollster::block_on(p.generate(prompt, sampling, stop, grammar, &mut |_| true)).unwrap();
    assert_eq!(p.position(), p.held_ids().len());
    let held = p.held_ids().to_vec();
    let next_logits =
        (p.position() < p.ctx_len()).then(|| pollster::block_on(p.decode(1)).unwrap());
    Run {
        ids: out.ids,
        finish: out.finish_reason,
        held,
        next_logits,
        speculative: out.stats.speculative,
    }
}

/// Checks that `drafted` left the cache `plain` did, value for value:
/// the logits of one more token on each are the same bits (exact passes
/// write what decode steps write).
fn same_cache_values(plain: &Run, drafted: &Run, what: &str) {
    let bits = |r: &Run| -> Option<Vec<u32>> {
        r.next_logits
            .as_ref()
            .map(|l| l.iter().map(|v| v.to_bits()).collect())
    };
    assert!(
        bits(plain) == bits(drafted),
        "{what}: one more token's logits differ on the cache the drafted run left"
    );
}

/// Verifying passes that run each row as a decode step would (the
/// default on GPUs; CPU adapters default to passes run as a prompt chunk).
fn exact_passes(engine: &mut Engine) {
    pollster::block_on(engine.pipeline.set_exact_passes(true)).unwrap();
}

/// `model` with a second copy of itself attached as its draft model (on
/// the same device), verifying with exact passes: every draft is what the
/// model's own decode steps give, so the passes keep the most drafts.
fn drafting_for_itself(model: &str, ctx_len: usize) -> Engine {
    let ctx = wick_tests::gpu();
    let mut engine = wick_tests::load_engine_on(ctx.clone(), model, ctx_len);
    engine
        .set_draft_model(wick_tests::load_engine_on(ctx, model, ctx_len))
        .unwrap();
    exact_passes(&mut engine);
    engine
}

fn stop_after(max_tokens: usize) -> StopCriteria {
    StopCriteria {
        stop_ids: Vec::new(),
        max_tokens,
    }
}

/// Plain and drafted runs of the same request, checked equal in ids, end
/// and the cache they leave; the drafted run's stats.
fn same_as_plain(
    engine: &mut Engine,
    prompt: &[u32],
    sampling: &SamplingParams,
    stop: &StopCriteria,
    what: &str,
) -> SpeculativeStats {
    same_as_plain_drafting(engine, LOOKUP, prompt, sampling, stop, what)
}

/// `same_as_plain` with another drafter.
fn same_as_plain_drafting(
    engine: &mut Engine,
    speculation: Speculation,
    prompt: &[u32],
    sampling: &SamplingParams,
    stop: &StopCriteria,
    what: &str,
) -> SpeculativeStats {
    let plain = run(engine, Speculation::Off, prompt, sampling, stop);
    let drafted = run(engine, speculation, prompt, sampling, stop);
    assert_eq!(drafted.ids, plain.ids, "{what}: ids");
    assert_eq!(drafted.finish, plain.finish, "{what}: finish reason");
    assert_eq!(drafted.held, plain.held, "{what}: the cache left behind");
    assert!(plain.speculative.is_none());
    let stats = drafted.speculative.clone().expect("stats of a drafted run");
    if stats.exact {
        same_cache_values(&plain, &drafted, what);
    }
    stats
}

/// A chat turn in SmolLM2's and Qwen's template (ChatML).
fn chat(engine: &Engine, user: &str) -> Vec<u32> {
    let text = format!("<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n");
    engine.tokenizer.encode(&text, true, true).unwrap()
}

/// The code edits and quotes `scripts/bench-speculative.sh` times (where
/// replies copy, so lookup drafts).
fn lookup_prompts() -> Vec<String> {
    let text = include_str!("../../fixtures/speculative/lookup_prompts.json");
    let prompts: Vec<serde_json::Value> = serde_json::from_str(text).unwrap();
    prompts
        .iter()
        .map(|p| p["text"].as_str().unwrap().to_string())
        .collect()
}

/// Two replies that copy and one that need not.
fn long_prompts() -> Vec<String> {
    let lookup = lookup_prompts();
    let story = "Write a short story about a lighthouse keeper who finds a message in a bottle.";
    vec![lookup[0].clone(), lookup[3].clone(), story.to_string()]
}

/// Both drafters: lookup, and a draft model (the model drafting for
/// itself, `drafting_for_itself`), with exact passes.
#[test]
fn greedy_drafting_equals_plain_greedy_on_the_golden_prompts() {
    for model in [SMOLLM2, QWEN] {
        let mut engine = drafting_for_itself(model, 128);
        let draft = Speculation::Draft { draft_tokens: 4 };
        for case in golden("llamacpp_public.json", model).cases {
            let stop = stop_after(case.greedy_ids.len());
            let greedy = SamplingParams::default();
            same_as_plain(&mut engine, &case.prompt_ids, &greedy, &stop, &case.prompt);
            let s = same_as_plain_drafting(
                &mut engine,
                draft,
                &case.prompt_ids,
                &greedy,
                &stop,
                &case.prompt,
            );
            assert!(s.passes > 0 || case.greedy_ids.len() < 2, "{s:?}");
        }
    }
}

/// Checks a drafted greedy run against the plain one: the same ids, bit
/// for bit (a pass computes each row as a decode step would,
/// `InferenceStep::Verify`, so even a near tie falls the same way). Where
/// they part, says how far apart the two tokens' logits were.
fn check_greedy(engine: &mut Engine, prompt: &[u32], plain: &[u32], drafted: &[u32], what: &str) {
    if let Some(j) = plain.iter().zip(drafted).position(|(a, b)| a != b) {
        let tokens: Vec<u32> = prompt.iter().chain(&plain[..j]).copied().collect();
        engine.pipeline.reset();
        let l = pollster::block_on(engine.pipeline.prefill(&tokens, 1)).unwrap();
        let l = &l[0];
        let top = l.iter().copied().fold(f32::MIN, f32::max);
        let (a, b) = (l[plain[j] as usize], l[drafted[j] as usize]);
        panic!(
            "{what}: drafted and plain greedy part at token {j} of {} ({} against {}; logits {b} and {a}, the top {top})",
            plain.len(),
            drafted[j],
            plain[j]
        );
    }
    assert_eq!(drafted.len(), plain.len(), "{what}: lengths");
}

#[test]
fn greedy_drafting_equals_plain_greedy_over_long_generations() {
    // Both drafters: lookup, and the model drafting for itself.
    let mut engine = drafting_for_itself(SMOLLM2, 512);
    let greedy = SamplingParams::default();
    let mut accepted = 0;
    for user in &long_prompts() {
        let prompt = chat(&engine, user);
        let plain = run(
            &mut engine,
            Speculation::Off,
            &prompt,
            &greedy,
            &stop_after(256),
        );
        for speculation in [LOOKUP, Speculation::Draft { draft_tokens: 4 }] {
            let drafted = run(&mut engine, speculation, &prompt, &greedy, &stop_after(256));
            let s = drafted.speculative.clone().expect("stats of a drafted run");
            let what = format!("{}, {speculation}", &user[..30]);
            eprintln!("{what}: {s:?}");
            check_greedy(&mut engine, &prompt, &plain.ids, &drafted.ids, &what);
            assert_eq!(drafted.held, plain.held, "{what}: the cache left behind");
            same_cache_values(&plain, &drafted, &what);
            accepted += s.accepted;
        }
    }
    assert!(accepted > 0, "the copying replies kept drafts");
}

/// The drafts are a point guess, so the acceptance rule of Leviathan et al.
/// is "sample from the model, keep the draft where they agree", and every
/// kept token is drawn with the random number plain sampling draws it
/// with: seed by seed the two give the same tokens, which is stronger
/// than the two distributions agreeing over many seeds (what the rule
/// promises). A wrong rule (keeping a draft the model did not draw,
/// taking the random numbers of rejected rows) breaks it within a few
/// seeds. The tiny model's random weights spread its choice over the whole
/// vocabulary, so a logit bias confines it to six tokens: its replies then
/// repeat n-grams, lookup drafts at almost every step, and the model
/// rejects most drafts. A frequency penalty is on (it counts each token in
/// the window), so rejected rows' samples must leave the GPU's penalty
/// window too.
#[test]
fn sampled_drafting_draws_what_plain_sampling_draws_seed_by_seed() {
    let mut engine = load_engine(TINY, 256);
    let six = 11u32..17;
    let prompt: Vec<u32> = six.clone().cycle().take(24).collect();
    let (mut drafted, mut accepted) = (0, 0);
    // The adapter's passes, then (from seed 6) exact ones, whose cache
    // values `same_as_plain` then checks too.
    for seed in 0..8 {
        if seed == 6 {
            exact_passes(&mut engine);
        }
        let sampling = SamplingParams {
            temperature: 1.0,
            top_p: 0.95,
            frequency_penalty: 0.5,
            logit_bias: six.clone().map(|t| (t, 30.0)).collect(),
            seed,
            ..Default::default()
        };
        let s = same_as_plain(&mut engine, &prompt, &sampling, &stop_after(40), "seed");
        drafted += s.drafted;
        accepted += s.accepted;
    }
    eprintln!("drafted {drafted}, accepted {accepted}");
    assert!(
        drafted > 60 && accepted > 0 && accepted < drafted / 2,
        "drafts both kept and rejected: {accepted} of {drafted}"
    );
}

#[test]
fn drafting_ends_where_plain_decoding_ends() {
    let mut engine = load_engine(SMOLLM2, 160);
    let prompt = chat(&engine, &lookup_prompts()[0]);
    let greedy = SamplingParams::default();
    let plain = run(
        &mut engine,
        Speculation::Off,
        &prompt,
        &greedy,
        &stop_after(64),
    );
    // A stop token late in the reply, where the passes keep drafts (and
    // draft past it): the latest token whose first occurrence is there.
    let j = (20..plain.ids.len() - 8)
        .rev()
        .find(|&j| !plain.ids[..j].contains(&plain.ids[j]))
        .expect("a token first met after 20");
    let stop = StopCriteria {
        stop_ids: vec![plain.ids[j]],
        max_tokens: 64,
    };
    let s = same_as_plain(&mut engine, &prompt, &greedy, &stop, "a stop token");
    assert!(s.accepted > 0, "{s:?}");
    // max_tokens inside a run of drafts, at every cut.
    for max in [1, 3, 9, 30] {
        same_as_plain(
            &mut engine,
            &prompt,
            &greedy,
            &stop_after(max),
            "max tokens",
        );
    }
    // The end of the context: 160 positions, the prompt's and 64 more asked.
    let room = 160 - prompt.len();
    let full = same_as_plain(
        &mut engine,
        &prompt,
        &greedy,
        &stop_after(room + 8),
        "a full context",
    );
    assert!(full.drafted > 0);
    // A stop string: the text of two tokens late in the reply, so that
    // where it ends may cut a pass's tokens.
    let late = &plain.ids[j - 1..=j];
    let stop_string = [engine.tokenizer.decode(late, true).unwrap()];
    assert!(!stop_string[0].trim().is_empty(), "{late:?}");
    let mut complete = |speculation| {
        pollster::block_on(engine.pipeline.set_speculation(speculation, false)).unwrap();
        engine.pipeline.reset();
        let out = pollster::block_on(engine.complete(
            &prompt,
            &greedy,
            stop_after(64),
            &stop_string,
            None,
            &mut |_| true,
        ))
        .unwrap();
        (
            out.ids,
            out.text,
            out.finish_reason,
            engine.pipeline.held_ids().to_vec(),
        )
    };
    let plain = complete(Speculation::Off);
    assert_eq!(plain.2, FinishReason::Stop, "{:?}", plain.1);
    assert_eq!(complete(LOOKUP), plain, "a stop string");
}

/// Runs plain and drafted (`speculation`) under a fresh `grammar` each and checks them
/// equal in ids, end and the cache they leave; the drafted run's stats.
fn same_under_grammar(
    engine: &mut Engine,
    speculation: Speculation,
    grammar: &Grammar,
    prompt: &[u32],
    sampling: &SamplingParams,
    stop: &StopCriteria,
    what: &str,
) -> SpeculativeStats {
    let vocab = engine.pipeline.model().config.vocab_size;
    let compiler = GrammarCompiler::new(&engine.tokenizer, vocab).unwrap();
    let under = |engine: &mut Engine, speculation| {
        let constraint = compiler.compile(grammar).unwrap();
        run_under(
            engine,
            speculation,
            prompt,
            sampling,
            stop,
            Some(constraint),
        )
    };
    let plain = under(engine, Speculation::Off);
    let drafted = under(engine, speculation);
    let what = format!(
        "{what}: {:?}",
        engine.tokenizer.decode(&plain.ids, true).unwrap()
    );
    assert_eq!(drafted.ids, plain.ids, "{what}: ids");
    assert_eq!(drafted.finish, plain.finish, "{what}: finish reason");
    assert_eq!(drafted.held, plain.held, "{what}: the cache left behind");
    let s = drafted.speculative.expect("stats of a drafted run");
    eprintln!("{what}: {s:?}");
    s
}

/// Under a grammar the drafts it allows are verified in one pass, a mask
/// a row, and the tokens are plain decoding's under the same grammar, as
/// are where the generation ends and the cache it leaves: greedy, a JSON
/// schema whose values the reply copies from the prompt (keys forced
/// between them); sampled, seed by seed, the tiny model confined to six
/// tokens (as in the sampled test above) under a regular expression that
/// forbids many of the drafts lookup makes.
#[test]
fn drafting_under_a_grammar_gives_plain_decodings_tokens() {
    let mut engine = load_engine(SMOLLM2, 320);
    let person = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "city": {"type": "string"},
            "known_for": {"type": "string"}
        },
        "required": ["name", "city", "known_for"]
    });
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"people": {"type": "array", "items": person}},
        "required": ["people"]
    });
    let prompt = chat(
        &engine,
        "Write these records as JSON: Ada Lovelace of London, known for the first published computer program; Alan Turing of Wilmslow, known for the Turing machine; Grace Hopper of New York City, known for the first compiler.",
    );
    let stop = StopCriteria {
        stop_ids: engine.tokenizer.stop_ids(),
        max_tokens: 96,
    };
    let greedy = SamplingParams::default();
    let grammar = Grammar::JsonSchema(schema);
    let s = same_under_grammar(
        &mut engine,
        LOOKUP,
        &grammar,
        &prompt,
        &greedy,
        &stop,
        "JSON",
    );
    assert!(s.accepted > 0, "{s:?}");

    let mut engine = load_engine(TINY, 256);
    let six = 11u32..17;
    let prompt: Vec<u32> = six.clone().cycle().take(24).collect();
    // Ids 11..17 are , - . / 0 1: after a 0 only , or . and after a 1
    // only - or /.
    let grammar = Grammar::Regex("(0[,.]|1[-/])*".into());
    let (mut drafted, mut accepted) = (0, 0);
    for seed in 0..4 {
        let sampling = SamplingParams {
            temperature: 1.0,
            frequency_penalty: 0.5,
            logit_bias: six.clone().map(|t| (t, 30.0)).collect(),
            seed,
            ..Default::default()
        };
        let s = same_under_grammar(
            &mut engine,
            LOOKUP,
            &grammar,
            &prompt,
            &sampling,
            &stop_after(40),
            "seed",
        );
        drafted += s.drafted;
        accepted += s.accepted;
    }
    assert!(
        drafted > 20 && accepted > 0 && accepted < drafted,
        "drafts both kept and rejected: {accepted} of {drafted}"
    );
}

#[test]
fn drafting_options_out_of_range_are_refused() {
    let mut engine = load_engine(TINY, 64);
    let p = &mut engine.pipeline;
    for k in [0, MAX_DRAFT_TOKENS + 1] {
        let err =
            pollster::block_on(p.set_speculation(Speculation::Lookup { draft_tokens: k }, false))
                .unwrap_err();
        assert!(
            matches!(err, PipelineError::InvalidOption(ref m) if m.contains("draft tokens")),
            "{err}"
        );
    }
    assert_eq!(
        p.speculation(),
        Speculation::Off,
        "a refused setting changes nothing"
    );
    pollster::block_on(p.set_speculation(
        Speculation::Lookup {
            draft_tokens: MAX_DRAFT_TOKENS,
        },
        false,
    ))
    .unwrap();
}

/// A draft model: greedy ids equal plain greedy's, and a draft whose
/// vocabulary differs is refused naming the first differing token. The
/// model drafts for itself here (the same file loaded twice on one
/// device) with exact passes, so the passes keep nearly every draft: the
/// mechanics (the draft's cache following the sequence, its rollback, one
/// submit of drafts a pass) are what this checks; the 0.5B drafting for
/// the 1.5B is measured in docs/performance.md.
#[test]
fn a_draft_model_gives_plain_greedy_and_a_foreign_vocabulary_is_refused() {
    let ctx = wick_tests::gpu();
    let mut engine = wick_tests::load_engine_on(ctx.clone(), SMOLLM2, 256);
    let foreign = wick_tests::load_engine_on(ctx.clone(), TINY, 256);
    let err = engine.set_draft_model(foreign).unwrap_err().to_string();
    assert!(
        err.contains("vocabulary differs") && err.contains("at token"),
        "{err}"
    );
    let refused = pollster::block_on(
        engine
            .pipeline
            .set_speculation(Speculation::Draft { draft_tokens: 4 }, false),
    );
    assert!(refused.is_err(), "no draft model attached yet");
    let draft = wick_tests::load_engine_on(ctx, SMOLLM2, 256);
    engine.set_draft_model(draft).unwrap();
    exact_passes(&mut engine);
    let greedy = SamplingParams::default();
    let prompt = chat(&engine, &long_prompts()[2]);
    let plain = run(
        &mut engine,
        Speculation::Off,
        &prompt,
        &greedy,
        &stop_after(40),
    );
    let drafted = run(
        &mut engine,
        Speculation::Draft { draft_tokens: 4 },
        &prompt,
        &greedy,
        &stop_after(40),
    );
    let s = drafted.speculative.expect("stats");
    eprintln!("self-draft: {s:?}");
    check_greedy(&mut engine, &prompt, &plain.ids, &drafted.ids, "self-draft");
    assert!(s.passes > 0 && s.accepted * 10 >= s.drafted * 9, "{s:?}");
    // A second generation reuses the draft's cache for the shared prefix.
    let again = run(
        &mut engine,
        Speculation::Draft { draft_tokens: 4 },
        &prompt,
        &greedy,
        &stop_after(40),
    );
    assert_eq!(again.ids, drafted.ids);
    // Under a grammar the draft model's drafts (it drafts without the
    // grammar) are cut where the grammar forbids them.
    let letters = Grammar::Regex("[A-Za-z ,.']+".into());
    let s = same_under_grammar(
        &mut engine,
        Speculation::Draft { draft_tokens: 4 },
        &letters,
        &prompt,
        &greedy,
        &stop_after(40),
        "self-draft under a grammar",
    );
    assert!(s.passes > 0 && s.accepted > 0, "{s:?}");
}

/// Exact passes of a mixture of experts (Qwen3-MoE's routed experts, and
/// Qwen2-MoE's with a shared expert beside them): the router and the
/// shared expert run a row at a time, the experts a slot at a time, as a
/// decode step runs them, so a pass of more rows than the experts'
/// matrix-vector form takes (9) still gives plain greedy's ids and cache,
/// its values bit for bit (a pass summing in other orders leaves other
/// roundings, which one more token's logits show). The model drafts for
/// itself, so the passes are long.
#[test]
fn exact_passes_of_a_mixture_of_experts_give_plain_greedy() {
    for model in ["tiny-qwen3moe.q8_0.gguf", "tiny-qwen2moe.q8_0.gguf"] {
        let mut engine = drafting_for_itself(model, 160);
        let prompt: Vec<u32> = (0..12).map(|i| 20 + 7 * i).collect();
        let greedy = SamplingParams::default();
        let draft = Speculation::Draft { draft_tokens: 8 };
        let s =
            same_as_plain_drafting(&mut engine, draft, &prompt, &greedy, &stop_after(96), model);
        eprintln!("{model}: {s:?}");
        assert!(s.exact && s.accepted > 0, "{model}: {s:?}");
        let plain = run(
            &mut engine,
            Speculation::Off,
            &prompt,
            &greedy,
            &stop_after(96),
        );
        let drafted = run(&mut engine, draft, &prompt, &greedy, &stop_after(96));
        same_cache_values(&plain, &drafted, model);
    }
}
