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
//! use guardhost::conformance::{self, Options};
//!
//! let report = conformance::run("builtin:AllowlistProvider", &Default::default(), &Options::quick());
//! assert!(report.passed(), "{}", report.to_text());
//! # }
//! ```
//!
//! A crate that builds a provider tests its own `cdylib` with
//! [`assert_conforms`] and [`cdylib`] (see the provider authors' guide, `docs/authors.md`).

mod call;
mod child;
mod construction;
pub mod corpus;
mod evaluation;
mod fuzz;
mod heap;
mod measure;
mod mix;
mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::config::Isolation;
use crate::instantiate::{locate_checked, BuildError};
use crate::loader::{FileChecks, LoadError, LoadErrorKind};

pub use measure::memory_kib;
pub use report::{Case, CaseId, Report, Reports, Status};

/// How hard the kit pushes.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Threads evaluating at once in `thread_safety`.
    pub threads: usize,
    /// Evaluations in each of `thread_safety`, `latency` and `memory`.
    pub iterations: usize,
    /// `latency` fails when the 99th percentile exceeds this.
    pub latency_budget: Duration,
    /// `memory` fails when resident memory grows by more than half this many
    /// bytes in each half of `iterations` evaluations (a steady leak of
    /// about this much in all; a one-off jump in one half is not a leak).
    pub memory_budget: u64,
    /// A call that takes longer is abandoned and reported as hung.
    pub call_timeout: Duration,
    /// `thread_safety`, `latency` and `memory` stop early (and say so) when
    /// they run longer than this, so a slow provider cannot stall the kit.
    pub case_time_limit: Duration,
    /// Load a library even when another user could change it (refused by
    /// default, as the host refuses it).
    pub allow_insecure_permissions: bool,
    /// Who runs the kit, so that its hints name options that exist there.
    pub caller: Caller,
    /// Where a library's code runs: in the kit's process (the default), or
    /// in a provider process (`Isolation::Process`), where a segfault, an
    /// `abort` or an `exit` is a failed case naming what caused it, and the
    /// kit goes on. A provider program always runs in a process of its own.
    pub isolation: Isolation,
    /// How long the `fuzz` case sends random requests (zero: not at all).
    pub fuzz: Duration,
    /// The seed of the random requests (`fuzz`, and the distinct requests
    /// of `thread_safety`); `None`: a fresh one, printed in the report, so
    /// a failure can be reproduced.
    pub seed: Option<u64>,
    /// The program that runs a library's provider process under
    /// `Isolation::Process` (`guardhost provider-server`); `None`: the
    /// host's own search ([`crate::isolation::server_program`]).
    pub server_program: Option<PathBuf>,
}

/// Who runs the kit: its hints name that caller's own way of passing a
/// config or allowing an insecure library, never another's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Caller {
    /// Rust code calling [`run`] or [`run_program`].
    #[default]
    Library,
    /// The `guardhost conformance` command.
    Cli,
    /// The Python package's `guardhost.conformance`.
    Python,
}

impl Caller {
    /// How to pass another config.
    pub(crate) fn config_hint(self) -> &'static str {
        match self {
            Caller::Library => "pass a config the provider accepts (the `config` argument)",
            Caller::Cli => "pass a config the provider accepts with --config or --config-file",
            Caller::Python => "pass a config the provider accepts (`config=`)",
        }
    }

    /// How to accept a library that others could change.
    pub(crate) fn insecure_hint(self) -> &'static str {
        match self {
            Caller::Library => "or set `Options::allow_insecure_permissions`",
            Caller::Cli => "or pass --allow-insecure-permissions",
            Caller::Python => "or pass `allow_insecure_permissions=True`",
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: 4,
            iterations: 10_000,
            latency_budget: Duration::from_millis(1),
            memory_budget: 4 << 20,
            call_timeout: Duration::from_secs(2),
            case_time_limit: Duration::from_secs(10),
            allow_insecure_permissions: false,
            caller: Caller::Library,
            isolation: Isolation::InProcess,
            fuzz: Duration::from_secs(2),
            seed: None,
            server_program: None,
        }
    }
}

impl Options {
    /// Fewer iterations and shorter limits, for a provider's unit tests.
    /// A debug build on a busy CI machine must not fail a good provider on
    /// time, so the latency budget is 50 ms: it still catches a provider
    /// that does slow work on every call, and `guardhost conformance` on a
    /// release build holds it to the real budget.
    pub fn quick() -> Self {
        Options {
            iterations: 2_000,
            case_time_limit: Duration::from_secs(3),
            latency_budget: Duration::from_millis(50),
            fuzz: Duration::from_millis(500),
            ..Options::default()
        }
    }
}

/// What a check found, before it is timed into a [`Case`].
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    status: Status,
    reason: String,
    details: Vec<String>,
    metrics: Map<String, Value>,
}

impl Finding {
    fn new(status: Status, reason: impl Into<String>) -> Self {
        Finding { status, reason: reason.into(), details: Vec::new(), metrics: Map::new() }
    }
    pub(crate) fn pass(reason: impl Into<String>) -> Self {
        Finding::new(Status::Pass, reason)
    }
    pub(crate) fn warn(reason: impl Into<String>) -> Self {
        Finding::new(Status::Warn, reason)
    }
    pub(crate) fn fail(reason: impl Into<String>) -> Self {
        Finding::new(Status::Fail, reason)
    }
    pub(crate) fn skip(reason: impl Into<String>) -> Self {
        Finding::new(Status::Skip, reason)
    }
    /// Adds particulars (at most [`MAX_DETAILS`], then a count of the rest).
    pub(crate) fn details(mut self, details: Vec<String>) -> Self {
        let extra = details.len().saturating_sub(MAX_DETAILS);
        self.details = details.into_iter().take(MAX_DETAILS).collect();
        if extra > 0 {
            self.details.push(format!("and {extra} more"));
        }
        self
    }
    pub(crate) fn metric(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.metrics.insert(name.to_owned(), value.into());
        self
    }
}

/// Detail lines kept per case.
const MAX_DETAILS: usize = 8;

/// The cases found so far.
pub(crate) struct Recorder {
    cases: Vec<Case>,
}

impl Recorder {
    /// Runs one check and records it, timed.
    pub(crate) fn check(&mut self, id: CaseId, check: impl FnOnce() -> Finding) -> Status {
        let started = Instant::now();
        let finding = check();
        let status = finding.status;
        self.cases.push(Case {
            id,
            status,
            reason: finding.reason,
            details: finding.details,
            metrics: finding.metrics,
            seconds: report::seconds(started.elapsed()),
        });
        status
    }

    /// Records every case not run yet as skipped, because of `why`.
    fn skip_rest(&mut self, why: &str) {
        for &id in CaseId::ALL {
            if !self.cases.iter().any(|c| c.id == id) {
                self.check(id, || Finding::skip(why));
            }
        }
    }
}

/// Runs every check against the provider that `use_` names (a library path
/// and symbol, or `builtin:Name`; relative paths are taken from the current
/// directory), constructed from `config`.
pub fn run(use_: &str, config: &Map<String, Value>, options: &Options) -> Report {
    let started = Instant::now();
    let mut recorder = Recorder { cases: Vec::new() };
    let mut report = Report {
        use_: use_.to_owned(),
        config: None,
        provider: None,
        abi_version: None,
        cases: Vec::new(),
        seconds: 0.0,
    };
    if options.isolation == Isolation::Process {
        return run_in_child(child::Target::Library(use_), use_.to_owned(), config, options);
    }
    let mut located = None;
    let checks =
        FileChecks { allow_insecure_permissions: options.allow_insecure_permissions, ..Default::default() };
    recorder.check(CaseId::Load, || match locate_checked(use_, Path::new("."), &checks) {
        Ok(descriptor) => {
            let finding = Finding::pass(format!("loaded {}", descriptor.source));
            located = Some(descriptor);
            finding
        }
        // The loader's hint names the YAML key, which the kit has not.
        Err(BuildError::Load(LoadError { path, symbol, kind: LoadErrorKind::Permissions(problem) })) => {
            Finding::fail(format!(
                "cannot load provider `{symbol}` from {}: {problem}, {}",
                path.display(),
                options.caller.insecure_hint()
            ))
        }
        Err(error) => Finding::fail(error.to_string()),
    });
    match located {
        None => recorder.skip_rest("the provider could not be loaded (see load)"),
        Some(descriptor) => {
            let (major, minor) = descriptor.abi_version();
            report.provider = Some(report::shorten(descriptor.name(), 80));
            report.abi_version = Some(format!("{major}.{minor}"));
            match construction::check(&mut recorder, &descriptor, config, options) {
                None => recorder.skip_rest("the provider could not be constructed (see construction.config)"),
                Some(loaded) => {
                    evaluation::check(&mut recorder, &loaded, config, options, &measure::this_process(), None)
                }
            }
        }
    }
    report.cases = recorder.cases;
    report.seconds = report::seconds(started.elapsed());
    report
}

/// Runs every check against the provider program `command` (its argv, as
/// `provider.command` gives it), started as the host starts it with
/// `isolation: process`, in the current directory, with `config`. The
/// descriptor cases that concern a library's declarations are skipped (a
/// program checks its own keys); the construction cases start it with an
/// unknown key and with wrongly typed values, and a program that crashes or
/// hangs instead of answering `failed` fails them; the memory case measures
/// the program's process.
pub fn run_program(command: &[String], config: &Map<String, Value>, options: &Options) -> Report {
    run_in_child(child::Target::Program(command), format!("command: {}", command.join(" ")), config, options)
}

/// Every check, with the provider's code in a child process: a provider
/// program, or a library under `Isolation::Process`.
fn run_in_child(
    target: child::Target<'_>,
    shown: String,
    config: &Map<String, Value>,
    options: &Options,
) -> Report {
    let started = Instant::now();
    let mut recorder = Recorder { cases: Vec::new() };
    let mut report = Report {
        use_: shown,
        config: None,
        provider: None,
        abi_version: None,
        cases: Vec::new(),
        seconds: 0.0,
    };
    match child::check(&mut recorder, target, config, options) {
        None => recorder.skip_rest("the provider could not be started (see load)"),
        Some((loaded, resident)) => {
            let (major, minor) = loaded.info.abi_version;
            report.provider = Some(report::shorten(&loaded.info.name, 80));
            report.abi_version = Some(match target {
                child::Target::Program(_) => format!("protocol {major}"),
                child::Target::Library(_) => format!("{major}.{minor}"),
            });
            let concurrent = child::concurrent(target, config, options);
            evaluation::check(&mut recorder, &loaded, config, options, &resident, concurrent);
        }
    }
    report.cases = recorder.cases;
    report.seconds = report::seconds(started.elapsed());
    report
}

/// Runs [`run`] and panics with the text report when a case fails: one
/// line in a provider crate's `cargo test`.
pub fn assert_conforms(use_: &str, config: &Map<String, Value>) -> Report {
    let report = run(use_, config, &Options::quick());
    assert!(report.passed(), "the provider does not conform:\n{}", report.to_text());
    report
}

/// The `cdylib` that cargo built for the crate being tested, by its library
/// name (`my_provider` for `libmy_provider.so`): integration tests run from
/// `target/<profile>/deps/`, and the library sits there or one level up.
/// Panics, saying where it looked, when the library is not there.
pub fn cdylib(lib_name: &str) -> PathBuf {
    let file = format!("{}{lib_name}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let exe = std::env::current_exe().expect("the path of the running test executable");
    let deps = exe.parent().expect("the test executable's directory");
    let candidates = [deps.to_path_buf(), deps.parent().unwrap_or(deps).to_path_buf()];
    for dir in &candidates {
        let candidate = dir.join(&file);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "{file} is not in {} or {}; is the crate's `crate-type` `[\"cdylib\", \"rlib\"]` and the test run by cargo?",
        candidates[0].display(),
        candidates[1].display()
    );
}
