//! Pre-tokenizer regexes for byte-level BPE vocabs, chosen by GGUF
//! `tokenizer.ggml.pre` as llama.cpp chooses them (`llm_tokenizer_bpe` in
//! llama-vocab.cpp). Each regex splits every piece the previous one left,
//! keeping matches and the text between them as separate pieces.
//!
//! llama.cpp runs these through its own Unicode category tables and
//! std::regex; here they run through fancy-regex with Rust's Unicode tables.
//! The two agree except on code points whose category changed between the
//! Unicode versions of the two tables.

/// GPT-2's split. llama.cpp's hand-written matcher for it also takes `\s+`.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Llama 3 (tiktoken cl100k-style): digits in runs of up to three.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2: as Llama 3 but one digit per piece.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Mistral's Tekken, in llama.cpp's std::regex-friendly form ("a letter that is not a-z").
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GPT-4o / Llama 4 (o200k-style), in the same form.
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// BLOOM / Poro / GPT-3 Finnish.
const BLOOM: &str = r" ?[^(\s|.,!?…。，、।۔،)]+";

/// How one `tokenizer.ggml.pre` value pre-tokenizes and what it implies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PreTokenizer {
    pub regexes: &'static [&'static str],
    /// A piece that is itself a token is taken whole, without merging (Llama 3).
    pub ignore_merges: bool,
    /// The default for `add_bos_token` when the metadata does not say.
    pub add_bos: bool,
}

const fn pre(regexes: &'static [&'static str]) -> PreTokenizer {
    PreTokenizer {
        regexes,
        ignore_merges: false,
        add_bos: false,
    }
}

/// The pre-tokenizer llama.cpp uses for `name`; `None` for a name it would refuse
/// (or one this engine does not carry). A missing name means "default", as in llama.cpp.
pub(crate) fn lookup(name: &str) -> Option<PreTokenizer> {
    const DEFAULT: &[&str] = &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"];
    const FALCON: &[&str] = &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"];
    const STARCODER: &[&str] = &[r"\p{N}", GPT2];
    let llama3_like = PreTokenizer {
        regexes: &[LLAMA3],
        ignore_merges: true,
        add_bos: true,
    };
    Some(match name {
        "" | "default" => pre(DEFAULT),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" => llama3_like,
        "dbrx" | "smaug-bpe" => pre(&[LLAMA3]),
        "falcon" => pre(FALCON),
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b"
        | "mellum2" => pre(STARCODER),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais" | "trillion"
        | "granite-docling" | "exaone4" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => {
            pre(&[GPT2])
        }
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" | "stablelm2" | "hunyuan"
        | "solar-open" => pre(&[QWEN2]),
        "poro-chat" | "bloom" | "gpt3-finnish" => pre(&[BLOOM]),
        "tekken" => PreTokenizer {
            regexes: &[TEKKEN],
            ignore_merges: true,
            add_bos: true,
        },
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => pre(&[GPT4O]),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&str] = &[
        "default",
        "llama-bpe",
        "dbrx",
        "falcon",
        "smollm",
        "gpt-2",
        "qwen2",
        "bloom",
        "tekken",
        "gpt-4o",
    ];

    #[test]
    fn every_regex_compiles() {
        for name in NAMES {
            let pre = lookup(name).unwrap();
            super::super::gguf_vocab::byte_level_pre_tokenizer(pre)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn unknown_names_are_refused() {
        assert!(lookup("no-such-pre").is_none());
        assert!(lookup("").is_some());
    }
}
