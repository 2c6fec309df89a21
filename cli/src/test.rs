//! `guardhost test FILE...`: policy tests for any config. Each test file
//! lists calls and the outcome each must get (guardhost-policytest reads
//! and runs them); the report is text, JSON or JUnit XML. Exit 0 when
//! every case passed, 1 when one failed, 2 when a file or its config could
//! not be used.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use guardhost::{install, Guardrail, LoadedConfig};
use guardhost_policytest::{run_suite, FileReport, Report, Suite};

use crate::conformance::Format;
use crate::error::CliError;

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test files (YAML): `tests:`, a list of {name, tool, args, context,
    /// expect: allow|deny|ask|rewrite|error, code, policy, decided_by}, and
    /// `config:`, the config under test (from the file's folder).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The config under test, instead of each file's `config:`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// How to report: `text`, `json` or `junit`.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

pub fn run(args: TestArgs) -> Result<ExitCode, CliError> {
    let mut guardrails: HashMap<PathBuf, Guardrail> = HashMap::new();
    let mut report = Report::default();
    for file in &args.files {
        let suite = Suite::read(file).map_err(|e| CliError::Usage(e.to_string()))?;
        let config = match (&args.config, &suite.config) {
            (Some(config), _) | (None, Some(config)) => config.clone(),
            (None, None) => {
                return Err(CliError::Usage(format!(
                    "{} names no config: add `config: path/to/config.yaml` to it, or pass --config",
                    file.display()
                )))
            }
        };
        if !guardrails.contains_key(&config) {
            guardrails.insert(config.clone(), guardrail(&config)?);
        }
        let tests = run_suite(&suite, &guardrails[&config].middleware);
        report.files.push(FileReport { file: file.clone(), config, tests });
    }
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => report.to_json(),
        Format::Junit => report.to_junit(),
    };
    crate::error::write_report(args.output.as_deref(), &text)?;
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The guardrail `config` installs; a config that installs none cannot be
/// tested.
fn guardrail(config: &Path) -> Result<Guardrail, CliError> {
    let loaded = LoadedConfig::from_path(config)?;
    install(&loaded)?.ok_or_else(|| {
        CliError::Usage(format!(
            "{} installs no guardrail ({}): there is nothing to test",
            config.display(),
            loaded.unguarded_reason().unwrap_or("no provider")
        ))
    })
}
