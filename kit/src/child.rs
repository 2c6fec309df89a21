//! The load, descriptor and construction cases for a provider in a child
//! process: a provider program (`provider.command`), or a library under
//! `isolation: process` (`guardhost conformance --isolation process`). Every
//! call into the provider happens in that child, so a crash, an `abort` or
//! an `exit` is a failed case naming what caused it, and the kit goes on.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::construction::{bad_values, key_list, name, with, UNKNOWN_KEY};
use super::measure::{self, Resident};
use super::report::shorten;
use crate::finding::{Finding, Recorder};
use crate::options::Options;
use crate::report::CaseId;
use guardhost::GuardrailProvider;
use guardhost::{BuildError, LoadedProvider, ProviderInfo, FRAMEWORK_KEY};
use guardhost::{Isolation, ProviderSpec, Transport};
use guardhost_isolation::{server_program, ProcessProvider};

/// How the loader's permission error ends (`LoadErrorKind::Permissions`).
const YAML_INSECURE_HINT: &str = "set `provider.allow_insecure_permissions: true`";

/// What runs in the child.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// A provider program and its arguments.
    Program(&'a [String]),
    /// A library (`use:`), run by `guardhost provider-server`.
    Library(&'a str),
}

impl Target<'_> {
    fn shown(&self) -> String {
        match self {
            Target::Program(command) => shorten(&command.join(" "), 200),
            Target::Library(use_) => shorten(use_, 200),
        }
    }
}

/// How a start went.
enum Start {
    /// It is ready.
    Ready(Box<(ProcessProvider, ProviderInfo)>),
    /// It refused the config cleanly: the message.
    Refused(String),
    /// Its constructor panicked (caught): the message.
    Panicked(String),
    /// It crashed, hung, spoke out of turn, or could not be run.
    Broken(String),
}

fn start(target: Target<'_>, config: Map<String, Value>, options: &Options) -> Start {
    start_over(target, config, options, None)
}

/// A second provider process for the thread check, for a library: over
/// the pipes, where the process evaluates every call in flight on a thread
/// of its own. Over shared memory a fast provider's calls are mostly taken
/// one after another by one thread, which would hide a race the host can
/// still meet (a slow call, or the pipes). `None` for a provider program,
/// whose calls take the pipes already.
pub(crate) fn concurrent(
    target: Target<'_>,
    config: &Map<String, Value>,
    options: &Options,
) -> Option<Result<Arc<dyn GuardrailProvider>, String>> {
    let Target::Library(_) = target else { return None };
    Some(match start_over(target, config.clone(), options, Some(Transport::Pipes)) {
        Start::Ready(ready) => Ok(Arc::new(ready.0)),
        Start::Refused(message) | Start::Panicked(message) | Start::Broken(message) => Err(format!(
            "a second provider process, over the pipes, could not be started: {}",
            shorten(&message, 500)
        )),
    })
}

fn start_over(
    target: Target<'_>,
    config: Map<String, Value>,
    options: &Options,
    transport: Option<Transport>,
) -> Start {
    let timeout_ms = Some(options.call_timeout.as_millis().max(1) as u64);
    let started = match target {
        Target::Program(command) => {
            let spec = ProviderSpec { timeout_ms, ..ProviderSpec::program(command.to_vec(), config) };
            ProcessProvider::start_program(&spec, Path::new("."))
        }
        Target::Library(use_) => {
            let spec = ProviderSpec {
                timeout_ms,
                isolation: Isolation::Process,
                transport,
                allow_insecure_permissions: options.allow_insecure_permissions,
                ..ProviderSpec::new(use_, config)
            };
            let program = options.server_program.clone().map_or_else(server_program, Ok);
            program.and_then(|program| ProcessProvider::start(&spec, Path::new("."), program))
        }
    };
    // The provider process words a permission refusal for YAML; the kit has
    // its own switch for it.
    let hint = |message: String| message.replace(YAML_INSECURE_HINT, options.caller.insecure_hint());
    match started {
        Ok(started) => Start::Ready(Box::new(started)),
        Err(BuildError::InProviderProcess { message, panicked: false })
            if message.contains(YAML_INSECURE_HINT) =>
        {
            Start::Refused(hint(message))
        }
        Err(BuildError::ProgramRefused { message, .. }) => Start::Refused(message),
        Err(BuildError::InProviderProcess { message, panicked: false }) => Start::Refused(message),
        Err(BuildError::InProviderProcess { message, panicked: true }) => Start::Panicked(message),
        Err(error) => Start::Broken(error.to_string()),
    }
}

/// Runs the load, descriptor and construction cases; returns the provider
/// started with `config`, and how to read its process's memory.
pub(crate) fn check(
    recorder: &mut Recorder,
    target: Target<'_>,
    config: &Map<String, Value>,
    options: &Options,
) -> Option<(LoadedProvider, Resident)> {
    let shown = target.shown();
    let mut started = None;
    recorder.check(CaseId::Load, || match start(target, config.clone(), options) {
        Start::Ready(ready) => {
            let finding = match target {
                Target::Program(_) => Finding::pass(format!(
                    "started `{shown}`, which speaks provider protocol {}",
                    ready.1.abi_version.0
                )),
                Target::Library(_) => {
                    Finding::pass(format!("loaded {} in a provider process", ready.1.source))
                }
            };
            started = Some(ready);
            finding
        }
        Start::Refused(message) if message.contains(options.caller.insecure_hint()) => {
            Finding::fail(shorten(&message, 800))
        }
        Start::Refused(message) | Start::Panicked(message) => Finding::fail(format!(
            "`{shown}` could not be started with the given config: {}; {}",
            shorten(&message, 500),
            options.caller.config_hint()
        )),
        Start::Broken(message) => Finding::fail(shorten(&message, 800)),
    });
    let (provider, info) = *started?;
    recorder.check(CaseId::DescriptorName, || name(&info.name));
    match target {
        Target::Program(_) => {
            recorder.check(CaseId::DescriptorKeys, || {
                Finding::skip(
                    "a provider program declares no keys: it checks its own (see construction.unknown_key)",
                )
            });
            recorder.check(CaseId::DescriptorFramework, || {
                Finding::skip(
                    "a provider program is told the framework in `init`; nothing is injected into its config",
                )
            });
        }
        Target::Library(_) => {
            recorder.check(CaseId::DescriptorKeys, || key_list(&info.accepted_keys, info.accepts_extra_keys));
            recorder.check(CaseId::DescriptorFramework, || {
                let takes = info.accepts_extra_keys || info.accepted_keys.iter().any(|k| k == FRAMEWORK_KEY);
                match (takes, info.framework_injected) {
                    (false, _) => Finding::pass("does not take `framework`, so the host does not inject it"),
                    (true, true) => Finding::pass("takes `framework` and accepted the injected \"deerflow\""),
                    (true, false) => Finding::pass(
                        "takes `framework`; the given config sets it, so the host does not inject it",
                    ),
                }
            });
        }
    }
    recorder.check(CaseId::ConstructionConfig, || {
        Finding::pass(format!("'{}' was constructed from the given config", shorten(&info.name, 80)))
    });
    recorder.check(CaseId::ConstructionUnknownKey, || unknown_key(target, &info, config, options));
    recorder.check(CaseId::ConstructionErrors, || bad_config_values(target, &info, config, options));
    let provider = Arc::new(provider);
    let resident = {
        let provider = provider.clone();
        measure::child_process(move || provider.pid())
    };
    Some((LoadedProvider { provider, info }, resident))
}

fn unknown_key(
    target: Target<'_>,
    info: &ProviderInfo,
    config: &Map<String, Value>,
    options: &Options,
) -> Finding {
    let library = matches!(target, Target::Library(_));
    match start(target, with(config, UNKNOWN_KEY, json!("x")), options) {
        Start::Ready(_) if library && info.accepts_extra_keys => {
            Finding::pass("takes any key, and an unknown one is accepted")
        }
        Start::Ready(_) if library => Finding::fail(format!(
            "the host did not refuse the unknown key `{UNKNOWN_KEY}`, although the provider declares its keys"
        )),
        Start::Ready(_) => Finding::warn(format!(
            "the program silently ignores the unknown key `{UNKNOWN_KEY}`; no host checks a program's keys, \
             so an operator's typo would go unnoticed; answer `init` with `failed` naming the key"
        )),
        Start::Refused(message) if message.contains(UNKNOWN_KEY) => {
            Finding::pass("an unknown key is refused with a message that names it")
        }
        Start::Refused(message) => Finding::warn(format!(
            "an unknown key is refused, but the message does not name `{UNKNOWN_KEY}` ({}); name the key, \
             so an operator can find the typo",
            shorten(&message, 300)
        )),
        Start::Panicked(message) => Finding::fail(format!(
            "given an unknown key, the constructor panicked ({}); it must return an error",
            shorten(&message, 300)
        )),
        Start::Broken(message) => Finding::fail(format!(
            "given an unknown key, the provider's process did not refuse it cleanly: {}",
            shorten(&message, 500)
        )),
    }
}

fn bad_config_values(
    target: Target<'_>,
    info: &ProviderInfo,
    config: &Map<String, Value>,
    options: &Options,
) -> Finding {
    // A library declares its keys; a program's are the ones it was given.
    let keys: Vec<String> = match target {
        Target::Library(_) => info.accepted_keys.iter().filter(|k| *k != FRAMEWORK_KEY).cloned().collect(),
        Target::Program(_) => config.keys().cloned().collect(),
    };
    if keys.is_empty() {
        return Finding::pass("there is no config key to give a wrong value");
    }
    let mut problems = Vec::new();
    let mut tried = 0;
    for key in &keys {
        for value in bad_values() {
            tried += 1;
            let shown = shorten(&value.to_string(), 60);
            match start(target, with(config, key, value), options) {
                Start::Ready(_) | Start::Refused(_) => {}
                Start::Panicked(message) => problems.push(format!(
                    "{} = {shown}: panicked: {}",
                    shorten(key, 60),
                    shorten(&message, 300)
                )),
                Start::Broken(message) => {
                    problems.push(format!("{} = {shown}: {}", shorten(key, 60), shorten(&message, 300)))
                }
            }
        }
    }
    if problems.is_empty() {
        Finding::pass(format!("{tried} wrongly typed values: each refused with an error or accepted"))
    } else {
        Finding::fail(format!(
            "{} of {tried} wrongly typed values made the provider panic, crash, hang or break the protocol; \
             validate the config and refuse it with an error that names the key",
            problems.len()
        ))
        .details(problems)
    }
    .metric("values_tried", tried)
}
