use super::*;

/// Feeds `pieces` then finishes; the joined reasoning and content.
fn run(inside: bool, pieces: &[&str]) -> (String, String) {
    let mut s = ReasoningSplit::new(inside);
    let mut out = Split::default();
    for p in pieces {
        let part = s.push(p);
        out.reasoning.push_str(&part.reasoning);
        out.content.push_str(&part.content);
    }
    let last = s.finish();
    (out.reasoning + &last.reasoning, out.content + &last.content)
}

/// The same result whatever the text's split into three pieces (every pair
/// of split points, so tags cut anywhere, once or twice), and one character
/// at a time.
fn check(inside: bool, text: &str, reasoning: &str, content: &str) {
    let want = (reasoning.to_string(), content.to_string());
    let cuts: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    for &i in &cuts {
        for &j in cuts.iter().filter(|&&j| j >= i) {
            let pieces = [&text[..i], &text[i..j], &text[j..]];
            assert_eq!(run(inside, &pieces), want, "{text:?} cut as {pieces:?}");
        }
    }
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let chars: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(
        run(inside, &chars),
        want,
        "{text:?} one character at a time"
    );
}

#[test]
fn a_block_at_the_start_is_reasoning_and_the_rest_content() {
    check(
        false,
        "<think>\nLet me see: 2+2.\nOK.\n</think>\n\nThe answer is 4.",
        "Let me see: 2+2.\nOK.",
        "The answer is 4.",
    );
}

#[test]
fn a_reply_starting_inside_the_block_ends_it_at_the_close() {
    check(
        true,
        "\nHmm, a < b and </th is not a tag.\n</think>\n\nIt is 4. </think>",
        "Hmm, a < b and </th is not a tag.",
        "It is 4. </think>",
    );
}

#[test]
fn text_without_a_block_at_the_start_is_content_untouched() {
    check(
        false,
        "  Hello <think> there\n",
        "",
        "  Hello <think> there\n",
    );
    check(false, "<thin", "", "<thin");
    check(false, "\n\n", "", "\n\n");
}

#[test]
fn a_reply_cut_off_inside_the_block_is_all_reasoning() {
    check(
        false,
        "<think>\nstill going\n</thi",
        "still going\n</thi",
        "",
    );
    check(true, "  \n", "", "");
}

#[test]
fn multibyte_text_around_the_tags_is_kept_whole() {
    check(
        false,
        "<think>é 思考 🙂</think>答え é",
        "é 思考 🙂",
        "答え é",
    );
}

#[test]
fn an_empty_block_gives_empty_reasoning() {
    check(false, "<think>\n\n</think>\n\nHi", "", "Hi");
}

#[test]
fn applies_only_where_the_template_writes_think_tags() {
    let plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
    assert!(ReasoningSplit::for_chat(plain, "<think>\n").is_none());
    let qwen3 = "{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}";
    let outside = ReasoningSplit::for_chat(qwen3, "<|im_start|>assistant\n").unwrap();
    assert!(!outside.in_reasoning());
    let closed = ReasoningSplit::for_chat(qwen3, "assistant\n<think>\n\n</think>\n\n").unwrap();
    assert!(!closed.in_reasoning());
    let r1 = "{{ '<｜Assistant｜><think>\\n' }}";
    let open = ReasoningSplit::for_chat(r1, "<｜Assistant｜><think>\n").unwrap();
    assert!(open.in_reasoning());
}
