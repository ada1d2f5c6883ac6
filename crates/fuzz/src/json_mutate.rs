//! Structure-aware JSON mutations for `tokenizer.json`: parse, change one
//! node (a number to an interesting integer, a string cut or swapped, an
//! array or object emptied, truncated or given a duplicate), write again.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::mutate::interesting;

/// Applies one mutation to a node of `data`; false if it is not JSON.
pub fn mutate_json(rng: &mut ChaCha8Rng, data: &mut Vec<u8>) -> bool {
    let Ok(mut doc) = serde_json::from_slice::<Value>(data) else {
        return false;
    };
    let mut count = 0usize;
    count_nodes(&doc, &mut count);
    let target = rng.gen_range(0..count.max(1));
    let mut seen = 0usize;
    mutate_node(rng, &mut doc, target, &mut seen);
    match serde_json::to_vec(&doc) {
        Ok(out) => {
            *data = out;
            true
        }
        Err(_) => false,
    }
}

fn count_nodes(v: &Value, n: &mut usize) {
    *n += 1;
    match v {
        Value::Array(a) => a.iter().for_each(|x| count_nodes(x, n)),
        Value::Object(m) => m.values().for_each(|x| count_nodes(x, n)),
        _ => {}
    }
}

/// Visits nodes in pre-order and changes the `target`-th.
fn mutate_node(rng: &mut ChaCha8Rng, v: &mut Value, target: usize, seen: &mut usize) -> bool {
    if *seen == target {
        change(rng, v);
        return true;
    }
    *seen += 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|x| mutate_node(rng, x, target, seen)),
        Value::Object(m) => m.values_mut().any(|x| mutate_node(rng, x, target, seen)),
        _ => false,
    }
}

fn change(rng: &mut ChaCha8Rng, v: &mut Value) {
    match v {
        Value::Number(_) => {
            let n = interesting(rng);
            *v = match rng.gen_range(0..3) {
                0 => Value::from(n as i64),
                1 => Value::from(-(n as i64 & 0xffff)),
                _ => Value::from(n),
            };
        }
        Value::String(s) => match rng.gen_range(0..4) {
            0 => s.clear(),
            1 => s.push_str(&s.clone()),
            2 => *v = Value::Null,
            _ => {
                *s = [
                    "BPE",
                    "Unigram",
                    "ByteLevel",
                    "Sequence",
                    "Replace",
                    "<s>",
                    " ",
                    "\u{0}",
                    "a b",
                ][rng.gen_range(0..9)]
                .to_string()
            }
        },
        Value::Array(a) if !a.is_empty() => match rng.gen_range(0..4) {
            0 => a.clear(),
            1 => a.truncate(rng.gen_range(0..a.len())),
            2 => {
                let x = a[rng.gen_range(0..a.len())].clone();
                a.push(x);
            }
            _ => a.reverse(),
        },
        Value::Object(m) if !m.is_empty() => {
            let i = rng.gen_range(0..m.len());
            let key = m.keys().nth(i).cloned().unwrap_or_default();
            if rng.gen() {
                m.remove(&key);
            } else {
                m.insert(key, Value::Null);
            }
        }
        _ => {
            *v = match rng.gen_range(0..4) {
                0 => Value::from(interesting(rng)),
                1 => Value::Array(vec![]),
                2 => Value::Bool(true),
                _ => Value::String("ByteLevel".into()),
            }
        }
    }
}
