// Checks of the core path that more than one browser runs (browser.test.mjs
// in Chromium, firefox.test.mjs in Firefox), each on the page's
// `window.engine`: the page side runs in the browser, the assertions here.

import assert from "node:assert/strict";
import { llamaCppCase, within } from "./harness.mjs";

/**
 * A multi-turn chat reuses its cached prefix and answers as a fresh run:
 * turn 2 reuses turn 1's prompt and reply (all but the reply's last token at
 * least), and the same history after an unrelated prompt, which leaves less
 * to reuse, gives the same ids. Returns the three turns' usage.
 */
export async function checkMultiTurnReuse(page, log) {
  const r = await within(280_000, page.evaluate(async () => {
    const engine = window.engine;
    const create = (messages) => engine.chat.completions.create({ messages, max_tokens: 3, temperature: 0 });
    const messages = [{ role: "user", content: "Name a colour." }];
    const first = await create(messages);
    messages.push(first.choices[0].message, { role: "user", content: "And another?" });
    const second = await create(messages);
    const secondIds = engine.lastResult.ids;
    // The same history after an unrelated prompt: nothing to reuse but BOS-level text.
    await engine.chat.completions.create({ messages: [{ role: "user", content: "Count to three." }], max_tokens: 1, temperature: 0 });
    const fresh = await create(messages);
    return { first: first.usage, second: second.usage, fresh: fresh.usage, same: JSON.stringify(engine.lastResult.ids) === JSON.stringify(secondIds) };
  }), "multi-turn");
  log(`multi-turn usage: ${JSON.stringify(r)}`);
  assert.ok(r.second.prompt_tokens_details.cached_tokens >= r.first.prompt_tokens, JSON.stringify(r));
  assert.ok(r.second.prompt_tokens_details.cached_tokens < r.second.prompt_tokens);
  assert.ok(r.fresh.prompt_tokens_details.cached_tokens < r.second.prompt_tokens_details.cached_tokens);
  assert.ok(r.same, "the reused turn gives the ids of a run with less reuse");
  return r;
}

/**
 * SmolLM2's prompt ids equal llama.cpp's, and its greedy ids too wherever
 * llama.cpp's top-1 leads its top-2 by more than 0.5 (from the first
 * position where it does not, the two engines' rounding may part).
 */
export function checkLlamaCppGreedy(prompt, promptIds, ids, model = undefined) {
  const ref = llamaCppCase(prompt, model);
  assert.ok(ref, "llama.cpp reference case");
  assert.deepEqual(promptIds, ref.prompt_ids);
  for (let i = 0; i < ids.length; i++) {
    const top = ref.topk_per_position[ref.prompt_ids.length - 1 + i];
    if (top[0][1] - top[1][1] <= 0.5) break;
    assert.equal(ids[i], ref.greedy_ids[i], `token ${i} vs llama.cpp`);
  }
}

/**
 * llama.cpp's first `n` greedy ids for `model` and `prompt` (the golden
 * file), each asserted to lead llama.cpp's second choice by more than 0.5,
 * so that another engine's rounding cannot part from them: a reference to
 * compare every one of `n` generated ids with.
 */
export function llamaCppGreedyIds(prompt, model, n) {
  const ref = llamaCppCase(prompt, model);
  assert.ok(ref, `llama.cpp reference case for ${model}`);
  for (let i = 0; i < n; i++) {
    const top = ref.topk_per_position[ref.prompt_ids.length - 1 + i];
    assert.ok(top[0][1] - top[1][1] > 0.5, `${model}: llama.cpp's token ${i} leads by ${top[0][1] - top[1][1]}, too close to compare`);
  }
  return ref.greedy_ids.slice(0, n);
}
