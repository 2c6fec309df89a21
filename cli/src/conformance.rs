//! `guardhost conformance`: the conformance kit on one provider.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use guardhost::{provider_config_from_path, provider_config_from_yaml};
use guardhost_kit::{self as conformance, Options};

use crate::error::CliError;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table for people.
    Text,
    /// One JSON document.
    Json,
    /// JUnit XML, for CI systems.
    Junit,
}

#[derive(Debug, clap::Args)]
pub struct ConformanceArgs {
    /// The provider, exactly as after `use:` in YAML: `path/to/libfoo.so:Symbol`
    /// (relative to the current directory) or `builtin:AllowlistProvider`.
    /// Or, instead, a provider program after `--`:
    /// `guardhost conformance -- python3 my_provider.py`.
    #[arg(value_name = "USE", required_unless_present = "command")]
    use_: Option<String>,
    /// A provider program and its arguments, as `provider.command` gives
    /// them (after `--`), run in the current directory.
    #[arg(last = true, value_name = "PROGRAM", conflicts_with = "use_")]
    command: Vec<String>,
    /// The provider's config (what goes under `provider.config:`), as JSON or
    /// YAML flow text, e.g. '{"denied_tools": ["bash"]}'. Default: {}. Give
    /// it (or --config-file) more than once to run the kit under each config
    /// in turn: a race or a crash may show under one config only.
    #[arg(long, value_name = "JSON")]
    config: Vec<String>,
    /// A YAML or JSON file holding the provider's config (what goes under
    /// `provider.config:`); may be given more than once, as --config.
    #[arg(long, value_name = "FILE")]
    config_file: Vec<PathBuf>,
    /// Where the provider's code runs: `process` (a provider process, where
    /// a crash, an abort or an exit is a failed case naming the request or
    /// config that caused it, and the run goes on) or `in_process` (in the
    /// kit's own process: a crash ends the run). Default: `process` when the
    /// environment says CI=true (or 1), `in_process` otherwise. A provider
    /// program always runs in a process of its own.
    #[arg(long, value_enum, value_name = "WHERE")]
    isolation: Option<KitIsolation>,
    /// How to print the report.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the report here instead of to stdout.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Threads evaluating at once in the thread-safety check.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(2..=1024))]
    threads: u16,
    /// Evaluations in each of the thread-safety, latency and memory checks.
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(10..=100_000_000))]
    iterations: u64,
    /// The latency check fails when p99 of one evaluation exceeds this.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    latency_budget_us: u64,
    /// The memory check fails when resident memory grows by more than half
    /// of this in each half of the run (so by about this much in all).
    #[arg(long, value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=(u64::MAX >> 10)))]
    memory_budget_kib: u64,
    /// Load the library even when another user could change it, a
    /// directory or a link on its path (refused by default, as the host
    /// refuses it without `provider.allow_insecure_permissions`).
    #[arg(long)]
    allow_insecure_permissions: bool,
    /// How long the fuzz case sends random requests, each of which must be
    /// decided (0: not at all).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0,
          value_parser = parse_seconds)]
    fuzz_seconds: f64,
    /// The seed of the random requests (the fuzz case and the thread-safety
    /// check); default: a fresh one, printed in the report. The same seed
    /// sends the same requests, to reproduce a failure.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// A call that takes longer is abandoned and reported as hung.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    call_timeout_ms: u64,
}

/// `--fuzz-seconds`: a finite number of seconds, 0 to 86400.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if (0.0..=86_400.0).contains(&seconds) => Ok(seconds),
        _ => Err(format!("expected a number of seconds from 0 to 86400, found {text:?}")),
    }
}

/// `--isolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KitIsolation {
    /// In the kit's process.
    #[value(name = "in_process")]
    InProcess,
    /// In a provider process.
    Process,
}

/// Whether the environment says this is a CI run (`CI=true` or `CI=1`, as
/// GitHub Actions, GitLab CI and most others set it).
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

pub fn run(args: ConformanceArgs) -> Result<ExitCode, CliError> {
    // Each config with a label that names where it came from, never what it says.
    let mut configs = Vec::new();
    for (i, text) in args.config.iter().enumerate() {
        let origin =
            if args.config.len() > 1 { format!("--config #{}", i + 1) } else { "--config".to_owned() };
        configs.push((origin.clone(), provider_config_from_yaml(text, &origin)?));
    }
    for path in &args.config_file {
        configs.push((format!("--config-file {}", path.display()), provider_config_from_path(path)?));
    }
    if configs.is_empty() {
        configs.push(("{}".to_owned(), Default::default()));
    }
    let isolation = match args.isolation {
        Some(KitIsolation::Process) => guardhost::Isolation::Process,
        Some(KitIsolation::InProcess) => guardhost::Isolation::InProcess,
        None if in_ci() => guardhost::Isolation::Process,
        None => guardhost::Isolation::InProcess,
    };
    let options = Options {
        threads: usize::from(args.threads),
        iterations: args.iterations as usize,
        latency_budget: Duration::from_micros(args.latency_budget_us),
        memory_budget: args.memory_budget_kib << 10,
        call_timeout: Duration::from_millis(args.call_timeout_ms.max(1)),
        allow_insecure_permissions: args.allow_insecure_permissions,
        caller: conformance::Caller::Cli,
        isolation,
        fuzz: Duration::from_secs_f64(args.fuzz_seconds),
        seed: args.seed,
        ..Options::default()
    };
    // Open the output first: a kit run is wasted if its report cannot be kept.
    let output =
        match &args.output {
            Some(path) => Some(std::fs::File::create(path).map_err(|source| CliError::Io {
                what: format!("cannot write {}", path.display()),
                source,
            })?),
            None => None,
        };
    let count = configs.len();
    let reports = configs
        .iter()
        .enumerate()
        .map(|(i, (origin, config))| {
            let mut report = match &args.use_ {
                Some(use_) => conformance::run(use_, config, &options),
                None => conformance::run_program(&args.command, config, &options),
            };
            if count > 1 {
                report.config = Some(format!("config {} of {count} ({origin})", i + 1));
            }
            report
        })
        .collect();
    let report = conformance::Reports(reports);
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => report.to_json(),
        Format::Junit => report.to_junit(),
    };
    match (output, &args.output) {
        (Some(mut file), Some(path)) => file
            .write_all(text.as_bytes())
            .map_err(|source| CliError::Io { what: format!("cannot write {}", path.display()), source })?,
        _ => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(crate::error::stdout_error)?;
        }
    }
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
