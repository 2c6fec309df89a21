//! The `run` protocol's lines (`docs/protocol.md`), shared by the
//! `guardhost` command and the decision service:
//! - [`jsonl`]: tool calls read from JSON lines, a bad line answered with
//!   what is wrong, never dropped;
//! - [`answer`]: what a decided call is answered with (`run`'s output
//!   lines, the server's responses).
#![forbid(unsafe_code)]

pub mod answer;
pub mod jsonl;
