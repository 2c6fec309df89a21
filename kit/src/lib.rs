//! The conformance kit: proves a provider library is fit to sit in front of
//! every tool call, before an operator switches to it in YAML.
//!
//! [`run`] takes exactly what goes after `use:` in YAML, and the provider's
//! config, and runs the checks of [`CaseId::ALL`] in order: loading,
//! the descriptor, construction, a corpus of requests (every DeerFlow tool
//! and the edge cases of [`corpus`]), decision hygiene, sync/async
//! agreement, determinism, thread safety, latency and memory. Each check is
//! a [`Case`] that passes, warns or fails with a reason an author can act
//! on. A panic comes back as an error (the ABI catches it) and a call that
//! hangs is abandoned after [`Options::call_timeout`], so neither stops the
//! kit; a provider that aborts the process or segfaults takes the kit down
//! with it, as it would an in-process host.
//!
//! The `guardhost conformance` command runs this; so can a provider's own
//! `cargo test`:
//!
//! ```
//! # fn main() {
//! use guardhost_kit::{self as conformance, Options};
//!
//! guardhost_builtins::register();
//! let report = conformance::run("builtin:AllowlistProvider", &Default::default(), &Options::quick());
//! assert!(report.passed(), "{}", report.to_text());
//! # }
//! ```
//!
//! A crate that builds a provider tests its own `cdylib` with
//! [`assert_conforms`] and [`cdylib`] (see the provider authors' guide, `docs/authors.md`).
//!
//! # Map
//!
//! - [`run`] (module `run`): the entry points, and [`cdylib`];
//! - [`Options`] (module `options`): how the kit runs and who calls it;
//! - `construction`, `evaluation`, `measure` and `child`: the checks, in
//!   that order (`child` when the provider runs in a process of its own,
//!   through `guardhost-isolation`);
//! - [`corpus`], `fuzz` and `mix`: the requests the checks send;
//! - `call`: one call with a deadline; `outcome`: what it came to;
//!   `finding`: what a check found; [`Report`] (module `report`): the cases
//!   and their text, JSON and JUnit forms;
//! - `heap`: one call into glibc's `malloc_trim` before memory is measured,
//!   the crate's one `unsafe` block.

mod call;
mod child;
mod construction;
pub mod corpus;
mod evaluation;
mod finding;
mod fuzz;
mod heap;
mod measure;
mod mix;
mod options;
mod outcome;
mod report;
mod run;

pub use measure::memory_kib;
pub use options::{Caller, Options};
pub use report::{xml, Case, CaseId, Report, Reports, Status};
pub use run::{assert_conforms, cdylib, run, run_program};
