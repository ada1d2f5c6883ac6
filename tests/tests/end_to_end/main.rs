//! wick end to end, in one test binary: one link, one GPU context
//! (`wick_tests::gpu`) shared by the tests that need no device of their
//! own. Each module is one subject: llama.cpp goldens, the f64 reference,
//! generation, constraints, loading, embeddings, GPU errors.
//! `out_of_memory.rs` is its own binary: it caps the process's address space.

mod allocations;
mod constrain_vocab;
mod constrained_json;
mod conversation;
mod device_limits;
mod device_lost;
mod embed_gemma;
mod embed_minilm;
mod embed_nomic;
mod generation;
mod golden_gemma3;
mod golden_llama3;
mod golden_moe;
mod golden_qwen15;
mod golden_qwen2;
mod golden_smollm2;
mod golden_tiny_archs;
mod gpu_errors;
mod hf_layout;
mod kernel_variants;
mod loading;
mod loading_rope;
mod quant_real_models;
mod reference_moe;
mod reference_qwen3;
mod reference_smollm2;
mod reference_tiny_archs;
mod reference_yarn;
mod speculative;
mod split;
mod stop_strings;
mod tool_calls;
mod tool_grammars;
