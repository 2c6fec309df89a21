//! `guardhost test FILE...`: policy tests for any config. Each test file
//! lists calls and the outcome each must get (guardhost-policytest reads
//! and runs them); the report is text, JSON or JUnit XML. Exit 0 when
//! every case passed, 1 when one failed, 2 when a file or its config could
//! not be used.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use guardhost::{install, Guardrail, LoadedConfig};
#[cfg(feature = "cedar")]
use guardhost_policytest::Policies;
use guardhost_policytest::{run_suite, run_suite_covered, FileReport, PolicyLister, Recorder, Report, Suite};

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
    /// After the results, what the tests exercised of each config: the
    /// chain entries asked and never asked, the policies that decided a
    /// test and, for Cedar entries, the policies no test reached (text and
    /// JSON reports).
    #[arg(long)]
    coverage: bool,
}

pub fn run(args: TestArgs) -> Result<ExitCode, CliError> {
    if args.coverage && args.format == Format::Junit {
        return Err(CliError::Usage(
            "--coverage reports in the text and JSON formats, not in JUnit XML: use --format text or json"
                .into(),
        ));
    }
    let mut guardrails: HashMap<PathBuf, Guardrail> = HashMap::new();
    // With --coverage, a recorder a config, in the order first used.
    let mut recorders: Vec<(PathBuf, Recorder)> = Vec::new();
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
            let (loaded, built) = guardrail(&config)?;
            if args.coverage {
                let listers = listers(&loaded, &built)?;
                recorders.push((config.clone(), Recorder::new(config.clone(), &built, listers)));
            }
            guardrails.insert(config.clone(), built);
        }
        let middleware = &guardrails[&config].middleware;
        let tests = match recorders.iter_mut().find(|(c, _)| *c == config) {
            Some((_, recorder)) => run_suite_covered(&suite, middleware, recorder),
            None => run_suite(&suite, middleware),
        };
        report.files.push(FileReport { file: file.clone(), config, tests });
    }
    report.coverage = recorders.into_iter().map(|(_, recorder)| recorder.finish()).collect();
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => report.to_json(),
        Format::Junit => report.to_junit(),
    };
    crate::error::write_report(args.output.as_deref(), &text)?;
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// For each guard of `guardrail`, what lists its policies: the Cedar
/// entries' policies, compiled as `explain` compiles them.
fn listers(
    config: &LoadedConfig,
    guardrail: &Guardrail,
) -> Result<Vec<Option<Box<dyn PolicyLister>>>, CliError> {
    #[cfg(feature = "cedar")]
    {
        let specs = config.guard_specs();
        let mut listers: Vec<Option<Box<dyn PolicyLister>>> = Vec::new();
        for (info, spec) in guardrail.entries.iter().zip(specs) {
            let lister = match info.name.as_str() {
                "cedar" => match crate::explain::compile_cedar(spec, &config.base_dir)? {
                    Ok(cedar) => Some(Box::new(CedarLister(cedar)) as Box<dyn PolicyLister>),
                    Err(_) => None,
                },
                _ => None,
            };
            listers.push(lister);
        }
        Ok(listers)
    }
    #[cfg(not(feature = "cedar"))]
    {
        let _ = (config, guardrail);
        Ok(Vec::new())
    }
}

#[cfg(feature = "cedar")]
/// A Cedar entry's policies: every id, and those that decide a request
/// (what `explain` prints as `decided by`).
struct CedarLister(guardhost_cedar::Cedar);

#[cfg(feature = "cedar")]
impl PolicyLister for CedarLister {
    fn all(&self) -> Vec<String> {
        self.0.policy_ids()
    }

    fn deciding(&self, request: &guardhost::GuardrailRequest) -> Result<Policies, String> {
        let explained = guardhost::with_abi_request(request, |abi| self.0.explain(abi))?;
        Ok(Policies { deciding: explained.determining })
    }
}

/// The guardrail `config` installs; a config that installs none cannot be
/// tested.
fn guardrail(config: &Path) -> Result<(LoadedConfig, Guardrail), CliError> {
    let loaded = LoadedConfig::from_path(config)?;
    let built = install(&loaded)?.ok_or_else(|| {
        CliError::Usage(format!(
            "{} installs no guardrail ({}): there is nothing to test",
            config.display(),
            loaded.unguarded_reason().unwrap_or("no provider")
        ))
    })?;
    Ok((loaded, built))
}
