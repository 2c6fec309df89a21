//! The checks that read a command's structure ([`Script`](crate::shell::Script)):
//! which program each simple command really runs once wrappers are
//! unwrapped by their grammars (`env`, `exec`, `sudo`, `timeout`, `nice`,
//! `xargs`, `strace`, `unshare` ...: [`effective`]), the code that shells,
//! `eval` and exec vectors are handed ([`expand`]), and the built-in
//! dangerous operations on what runs, not on the text ([`check`]).
//!
//! Unknowns are [`Code::Unresolved`]: a command word known
//! only when the command runs (a variable, a substitution, `$IFS` tricks, a
//! function defined in the same command) under an allowlist, or, under
//! `*`, when it feeds or wraps an interpreter or looks like a dangerous
//! operation; code handed to a shell or `eval` that cannot be read first.
//!
//! One module per check, over what they share:
//!
//! - `programs`: which programs are shells, interpreters, downloaders and
//!   decoders, and where an interpreter takes its program from;
//! - `wrappers`: wrappers unwrapped ([`effective`]);
//! - `pipes`: what flows through pipes from one stage to the next
//!   ([`Fed`]);
//! - `expansion`: the code commands hand on, added to the script
//!   ([`expand`]);
//! - `checks`: the checks run over a whole script ([`check`]);
//! - `danger`: the built-in dangerous operations ([`dangerous`]).

use crate::finding::Code;

mod checks;
mod danger;
mod expansion;
mod pipes;
mod programs;
mod wrappers;

pub use checks::{check, Mode};
pub use danger::{block_device, dangerous, top_level};
pub use expansion::{expand, unreadable};
pub use pipes::Fed;
pub(crate) use pipes::{gives, Pipes};
pub use programs::{basename, is_foreign_interpreter};
pub(crate) use programs::{is_downloader, is_interpreter, program, Program};
pub use wrappers::{effective, Effective};

/// A finding for what cannot be known before the command runs.
const UNRESOLVED: Code = Code::Unresolved;
/// A finding for a dangerous operation.
const DANGEROUS: Code = Code::Dangerous;
