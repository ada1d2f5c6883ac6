//! The `wick` binary driven as a user drives it, in one test binary (one
//! link, not one per file): each module runs the built `wick` on real
//! models, fixtures or malformed files and reads what it prints.

mod common;

mod bench_kernels;
mod chat;
mod chat_tools;
mod cli;
mod cli_hf;
mod embed;
mod malformed;
mod split;
mod template;
