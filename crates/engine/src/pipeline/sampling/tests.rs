use super::*;

fn temp(temperature: f32) -> SamplingParams {
    SamplingParams {
        temperature,
        ..Default::default()
    }
}

#[test]
fn greedy_is_argmax_with_lowest_id_on_ties() {
    let mut s = Sampler::new(SamplingParams::default()).unwrap();
    assert_eq!(s.sample(&[0.1, 3.0, 3.0, -1.0]), 1);
    // top_k 1 is greedy too, whatever the temperature.
    let mut s = Sampler::new(SamplingParams {
        top_k: 1,
        ..temp(5.0)
    })
    .unwrap();
    assert_eq!(s.sample(&[0.1, 3.0, 3.0, -1.0]), 1);
}

#[test]
fn same_seed_same_tokens_and_cuts_respected() {
    let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
    let params = SamplingParams {
        top_k: 5,
        top_p: 0.9,
        seed: 42,
        ..temp(0.9)
    };
    let run = |params: &SamplingParams| {
        let mut s = Sampler::new(params.clone()).unwrap();
        (0..50).map(|_| s.sample(&logits)).collect::<Vec<_>>()
    };
    let a = run(&params);
    assert_eq!(a, run(&params));
    // Ties at the top-k cut are all kept: anything >= the 5th largest value.
    let mut sorted = logits.clone();
    sorted.sort_by(|x, y| y.total_cmp(x));
    assert!(
        a.iter().all(|&id| logits[id as usize] >= sorted[4]),
        "{a:?}"
    );
    assert!(
        a.iter().any(|&id| id != a[0]),
        "temperature 0.9 should vary"
    );
}

#[test]
fn draw_is_the_inverse_cdf_in_id_order() {
    // Equal weights: u picks the floor(u * 4)-th kept id.
    let logits = [0.0, 0.0, -1e31, 0.0, 0.0];
    let p = temp(1.0);
    let ids: Vec<u32> = [0.0, 0.24, 0.26, 0.6, 0.99]
        .iter()
        .map(|&u| reference(&p, &logits, &[], u).id)
        .collect();
    assert_eq!(ids, [0, 0, 1, 3, 4]);
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    // Probabilities ~0.665, 0.245, 0.090 at T = 1.
    let logits = [1.0, 2.0, 0.0];
    let p = |top_p| SamplingParams { top_p, ..temp(1.0) };
    let kept = |top_p| {
        let mut ids: Vec<u32> = (0..64)
            .map(|i| reference(&p(top_p), &logits, &[], i as f32 / 64.0).id)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    };
    assert_eq!(kept(0.6), [1]);
    assert_eq!(kept(0.7), [0, 1]);
    assert_eq!(kept(0.95), [0, 1, 2]);
}

#[test]
fn min_p_keeps_tokens_within_a_factor_of_the_best() {
    // Weights relative to the best: 1, e^-1 = 0.37, e^-3 = 0.05.
    let logits = [3.0, 2.0, 0.0];
    let p = SamplingParams {
        min_p: 0.2,
        ..temp(1.0)
    };
    let ids: Vec<u32> = (0..64)
        .map(|i| reference(&p, &logits, &[], i as f32 / 64.0).id)
        .collect();
    assert!(
        ids.contains(&0) && ids.contains(&1) && !ids.contains(&2),
        "{ids:?}"
    );
}

#[test]
fn penalties_follow_llama_cpp() {
    let logits = [2.0, -1.0, 1.5, 0.5];
    let greedy_with = |p: SamplingParams, history: &[u32]| reference(&p, &logits, history, 0.5).id;
    // Repetition: 2.0 / 2 = 1.0 < 1.5, once however often token 0 repeats.
    let rep = SamplingParams {
        repetition_penalty: 2.0,
        ..Default::default()
    };
    assert_eq!(greedy_with(rep.clone(), &[0, 0, 0]), 2);
    // A logit <= 0 is multiplied: -1 * 2 = -2, still not the best.
    assert_eq!(greedy_with(rep, &[1]), 0);
    // Frequency: 2.0 - 3 * 0.2 = 1.4 < 1.5; twice: 2.0 - 0.4 = 1.6 > 1.5.
    let freq = SamplingParams {
        frequency_penalty: 0.2,
        ..Default::default()
    };
    assert_eq!(greedy_with(freq.clone(), &[0, 0, 0]), 2);
    assert_eq!(greedy_with(freq, &[0, 0]), 0);
    // Presence: once per token present.
    let pres = SamplingParams {
        presence_penalty: 0.6,
        ..Default::default()
    };
    assert_eq!(greedy_with(pres, &[0, 0, 0, 2]), 0);
    // The sampler's own window is the last penalty_last_n tokens.
    let mut s = Sampler::new(SamplingParams {
        presence_penalty: 10.0,
        penalty_last_n: 2,
        ..Default::default()
    })
    .unwrap();
    let ids: Vec<u32> = (0..5).map(|_| s.sample(&logits)).collect();
    assert_eq!(ids, [0, 2, 3, 0, 2]);
    assert_eq!(s.history().collect::<Vec<_>>(), [0, 2]);
}

#[test]
fn logit_bias_adds_and_bans() {
    let logits = [2.0, 1.0, 0.0];
    let p = |logit_bias| SamplingParams {
        logit_bias,
        ..Default::default()
    };
    assert_eq!(
        reference(&p(vec![(0, f32::NEG_INFINITY)]), &logits, &[], 0.0).id,
        1
    );
    assert_eq!(
        reference(&p(vec![(2, 1.5), (2, 1.0)]), &logits, &[], 0.0).id,
        2
    );
    assert_eq!(reference(&p(vec![(9, 5.0)]), &logits, &[], 0.0).id, 0);
    assert_eq!(
        p(vec![(2, 1.5), (0, 1.0), (2, 1.0)]).merged_bias(),
        [(0, 1.0), (2, 2.5)]
    );
    // A banned token is never drawn.
    let hot = SamplingParams {
        logit_bias: vec![(0, f32::NEG_INFINITY)],
        ..temp(2.0)
    };
    assert!((0..32).all(|i| reference(&hot, &logits, &[], i as f32 / 32.0).id != 0));
}

#[test]
fn invalid_options_are_typed_errors() {
    let err = |p: SamplingParams| Sampler::new(p).err();
    assert_eq!(err(temp(-1.0)), Some(SamplingError::Temperature(-1.0)));
    for top_p in [0.0, 1.5, f32::NAN] {
        let e = err(SamplingParams {
            top_p,
            ..Default::default()
        });
        assert!(matches!(e, Some(SamplingError::TopP(_))), "{e:?}");
    }
    assert_eq!(
        err(SamplingParams {
            min_p: 2.0,
            ..Default::default()
        }),
        Some(SamplingError::MinP(2.0))
    );
    assert_eq!(
        err(SamplingParams {
            repetition_penalty: 0.0,
            ..Default::default()
        }),
        Some(SamplingError::RepetitionPenalty(0.0))
    );
    assert_eq!(
        err(SamplingParams {
            frequency_penalty: f32::INFINITY,
            ..Default::default()
        }),
        Some(SamplingError::FrequencyPenalty(f32::INFINITY))
    );
    assert_eq!(
        err(SamplingParams {
            presence_penalty: 1.0,
            penalty_last_n: 0,
            ..Default::default()
        }),
        Some(SamplingError::PenaltyWindow)
    );
    assert_eq!(
        err(SamplingParams {
            logit_bias: vec![(3, f32::INFINITY)],
            ..Default::default()
        }),
        Some(SamplingError::LogitBias {
            id: 3,
            bias: f32::INFINITY
        })
    );
    // A window of 0 is fine while the penalties are off.
    assert!(Sampler::new(SamplingParams {
        penalty_last_n: 0,
        ..Default::default()
    })
    .is_ok());
}

#[test]
fn a_mask_bans_what_it_does_not_allow_in_every_mode() {
    // 37 tokens (a partial second word); the best logits are at 36 and 35.
    let logits: Vec<f32> = (0..37).map(|i| i as f32 * 0.25).collect();
    let mask_of = |ids: &[u32]| {
        let mut m = vec![0u32; 2];
        for &i in ids {
            m[i as usize / 32] |= 1 << (i % 32);
        }
        m
    };
    let modes = [
        temp(0.0),
        temp(1.0),
        SamplingParams {
            top_k: 2,
            ..temp(1.0)
        },
        SamplingParams {
            top_p: 0.1,
            ..temp(1.0)
        },
        SamplingParams {
            min_p: 0.9,
            ..temp(1.0)
        },
    ];
    for p in &modes {
        // A single allowed token far outside every cut is always the pick.
        for u in [0.0, 0.5, 0.99] {
            let only_three = reference_masked(p, &logits, &[], u, &mask_of(&[3]));
            assert_eq!(only_three.id, 3, "{p:?}");
        }
        // The top two disallowed: the cuts act on what is left.
        let rest: Vec<u32> = (0..35).collect();
        let d = reference_masked(p, &logits, &[], 0.3, &mask_of(&rest));
        assert!(d.id < 35, "{p:?}: {}", d.id);
    }
    // Greedy and top-k 2 under the mask pick among 34 and 33.
    let rest: Vec<u32> = (0..35).collect();
    assert_eq!(
        reference_masked(&modes[0], &logits, &[], 0.7, &mask_of(&rest)).id,
        34
    );
    let draws: Vec<u32> = (0..16)
        .map(|i| reference_masked(&modes[2], &logits, &[], i as f32 / 16.0, &mask_of(&rest)).id)
        .collect();
    assert!(draws.iter().all(|&id| id == 33 || id == 34), "{draws:?}");
    assert!(draws.contains(&33) && draws.contains(&34), "{draws:?}");
    // The sampler's masked form takes the stream's numbers and keeps the window.
    let mut s = Sampler::new(temp(1.0)).unwrap();
    assert_eq!(s.sample_masked(&logits, &mask_of(&[7, 40])), 7);
    assert_eq!(s.history().collect::<Vec<_>>(), [7]);
    assert!(is_allowed(&mask_of(&[7]), 7) && !is_allowed(&mask_of(&[7]), 8));
    assert!(
        !is_allowed(&mask_of(&[7]), 64),
        "past the words: not allowed"
    );
}
