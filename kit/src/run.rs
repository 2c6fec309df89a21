//! The kit's entry points: [`run`] a library or built-in, [`run_program`] a
//! provider program, [`assert_conforms`] in an author's `cargo test`, and
//! [`cdylib`] to find the library cargo built.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use guardhost::GuardrailProvider;
use guardhost::Isolation;
use guardhost::{locate_checked, BuildError, Descriptor, LoadedProvider, FRAMEWORK_KEY, FRAMEWORK_VALUE};
use guardhost::{FileChecks, LoadError, LoadErrorKind};

use crate::call::with_deadline;
use crate::finding::{Finding, Recorder};
use crate::options::Options;
use crate::report::{self, CaseId, Report};
use crate::{child, construction, evaluation, measure};

/// Runs every check against the provider that `use_` names (a library path
/// and symbol, or `builtin:Name`; relative paths are taken from the current
/// directory), constructed from `config`.
pub fn run(use_: &str, config: &Map<String, Value>, options: &Options) -> Report {
    let started = Instant::now();
    let mut recorder = Recorder::new();
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
                "cannot load provider `{symbol}` from {}: {problem}{}",
                path.display(),
                problem.accept_hint(options.caller.insecure_hint())
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
                    let twin = reading_everything(&descriptor, &loaded, config, options);
                    let through_evaluate = through_evaluate(&descriptor, &loaded, config, options);
                    let extra =
                        evaluation::Extra { concurrent: None, reading_everything: twin, through_evaluate };
                    evaluation::check(
                        &mut recorder,
                        &loaded,
                        config,
                        options,
                        &measure::this_process(),
                        extra,
                    )
                }
            }
        }
    }
    report.cases = recorder.cases;
    report.seconds = report::seconds(started.elapsed());
    report
}

/// A second instance of the provider, constructed from the same config as
/// `loaded`, decided through `evaluate` rather than its library's `decide`.
fn through_evaluate(
    descriptor: &Descriptor,
    loaded: &LoadedProvider,
    config: &Map<String, Value>,
    options: &Options,
) -> evaluation::ThroughEvaluate {
    if !descriptor.has_decide() {
        return evaluation::ThroughEvaluate::NoDecide;
    }
    let config = handed_config(loaded, config);
    let descriptor = descriptor.clone();
    evaluation::ThroughEvaluate::Instance(
        match with_deadline(options.call_timeout, move || descriptor.construct_raw_through_evaluate(&config))
        {
            Ok(Ok(provider)) => Ok(provider),
            Ok(Err(failure)) => Err(format!("constructing it again failed: {failure}")),
            Err(no_answer) => Err(format!("constructing it again {no_answer}")),
        },
    )
}

/// `config` as the host handed it to the provider (with the injected
/// `framework`, where it was).
fn handed_config(loaded: &LoadedProvider, config: &Map<String, Value>) -> Map<String, Value> {
    let mut config = config.clone();
    if loaded.info.framework_injected {
        config.insert(FRAMEWORK_KEY.to_owned(), Value::from(FRAMEWORK_VALUE));
    }
    config
}

/// A second instance of the provider, constructed from the same config as
/// `loaded`, that is handed every part of a request, when the provider
/// declares it does not read some (`None` when it reads everything).
fn reading_everything(
    descriptor: &Descriptor,
    loaded: &LoadedProvider,
    config: &Map<String, Value>,
    options: &Options,
) -> Option<Result<Arc<dyn GuardrailProvider>, String>> {
    if loaded.info.unread_inputs.is_empty() {
        return None;
    }
    let config = handed_config(loaded, config);
    let descriptor = descriptor.clone();
    Some(
        match with_deadline(options.call_timeout, move || {
            descriptor.construct_raw_reading_everything(&config)
        }) {
            Ok(Ok(provider)) => Ok(provider),
            Ok(Err(failure)) => Err(format!("constructing it again failed: {failure}")),
            Err(no_answer) => Err(format!("constructing it again {no_answer}")),
        },
    )
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
    let mut recorder = Recorder::new();
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
            let extra = evaluation::Extra {
                concurrent,
                reading_everything: None,
                through_evaluate: evaluation::ThroughEvaluate::Isolated,
            };
            evaluation::check(&mut recorder, &loaded, config, options, &resident, extra);
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
