//! How the kit runs: [`Options`] and who is calling it ([`Caller`]).

use std::path::PathBuf;
use std::time::Duration;

use guardhost::Isolation;

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
    /// host's own search ([`guardhost_isolation::server_program`]).
    pub server_program: Option<PathBuf>,
}

/// Who runs the kit: its hints name that caller's own way of passing a
/// config or allowing an insecure library, never another's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Caller {
    /// Rust code calling [`run`](crate::run()) or [`run_program`](crate::run_program).
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
            Caller::Library => "set `Options::allow_insecure_permissions`",
            Caller::Cli => "pass --allow-insecure-permissions",
            Caller::Python => "pass `allow_insecure_permissions=True`",
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
