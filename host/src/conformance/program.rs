//! The load, descriptor and construction cases for a provider program
//! (`provider.command`): it is started as the host starts it, and its
//! answers to `init` are checked where a library's declarations would be.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::construction::{bad_values, name, with, UNKNOWN_KEY};
use super::measure::{self, Resident};
use super::report::shorten;
use super::{CaseId, Finding, Options, Recorder};
use crate::config::ProviderSpec;
use crate::instantiate::{BuildError, LoadedProvider};
use crate::isolation::ProcessProvider;

/// How a start went.
enum Start {
    /// It said `ready`.
    Ready(Box<(ProcessProvider, crate::instantiate::ProviderInfo)>),
    /// It answered `init` with `failed`: its message.
    Refused(String),
    /// It crashed, hung, spoke out of turn, or could not be run.
    Broken(String),
}

fn start(command: &[String], config: Map<String, Value>, options: &Options) -> Start {
    let mut spec = ProviderSpec::program(command.to_vec(), config);
    spec.timeout_ms = Some(options.call_timeout.as_millis().max(1) as u64);
    match ProcessProvider::start_program(&spec, Path::new(".")) {
        Ok(started) => Start::Ready(Box::new(started)),
        Err(BuildError::ProgramRefused { message, .. }) => Start::Refused(message),
        Err(error) => Start::Broken(error.to_string()),
    }
}

/// Runs the load, descriptor and construction cases; returns the provider
/// started with `config`, and how to read its process's memory.
pub(crate) fn check(
    recorder: &mut Recorder,
    command: &[String],
    config: &Map<String, Value>,
    options: &Options,
) -> Option<(LoadedProvider, Resident)> {
    let shown = shorten(&command.join(" "), 200);
    let mut started = None;
    recorder.check(CaseId::Load, || match start(command, config.clone(), options) {
        Start::Ready(ready) => {
            let finding = Finding::pass(format!(
                "started `{shown}`, which speaks provider protocol {}",
                ready.1.abi_version.0
            ));
            started = Some(ready);
            finding
        }
        Start::Refused(message) => Finding::fail(format!(
            "`{shown}` refused the given config: {}; {}",
            shorten(&message, 500),
            options.caller.config_hint()
        )),
        Start::Broken(message) => Finding::fail(shorten(&message, 800)),
    });
    let (provider, info) = *started?;
    recorder.check(CaseId::DescriptorName, || name(&info.name));
    recorder.check(CaseId::DescriptorKeys, || {
        Finding::skip("a provider program declares no keys: it checks its own (see construction.unknown_key)")
    });
    recorder.check(CaseId::DescriptorFramework, || {
        Finding::skip(
            "a provider program is told the framework in `init`; nothing is injected into its config",
        )
    });
    recorder.check(CaseId::ConstructionConfig, || {
        Finding::pass(format!("'{}' said ready to the given config", shorten(&info.name, 80)))
    });
    recorder.check(CaseId::ConstructionUnknownKey, || unknown_key(command, config, options));
    recorder.check(CaseId::ConstructionErrors, || bad_config_values(command, config, options));
    let provider = Arc::new(provider);
    let resident = {
        let provider = provider.clone();
        measure::child_process(move || provider.pid())
    };
    Some((LoadedProvider { provider, info }, resident))
}

fn unknown_key(command: &[String], config: &Map<String, Value>, options: &Options) -> Finding {
    match start(command, with(config, UNKNOWN_KEY, json!("x")), options) {
        Start::Refused(message) if message.contains(UNKNOWN_KEY) => {
            Finding::pass("an unknown key is refused with a message that names it")
        }
        Start::Refused(message) => Finding::warn(format!(
            "an unknown key is refused, but the message does not name `{UNKNOWN_KEY}` ({}); name the key, \
             so an operator can find the typo",
            shorten(&message, 300)
        )),
        Start::Ready(_) => Finding::warn(format!(
            "the program silently ignores the unknown key `{UNKNOWN_KEY}`; no host checks a program's keys, \
             so an operator's typo would go unnoticed; answer `init` with `failed` naming the key"
        )),
        Start::Broken(message) => Finding::fail(format!(
            "given an unknown key, the program did not answer `init` with `failed`: {}",
            shorten(&message, 500)
        )),
    }
}

fn bad_config_values(command: &[String], config: &Map<String, Value>, options: &Options) -> Finding {
    if config.is_empty() {
        return Finding::pass("the given config has no keys, so there is no value to get wrong");
    }
    let mut problems = Vec::new();
    let mut tried = 0;
    for key in config.keys() {
        for value in bad_values() {
            tried += 1;
            let shown = shorten(&value.to_string(), 60);
            if let Start::Broken(message) = start(command, with(config, key, value), options) {
                problems.push(format!("{} = {shown}: {}", shorten(key, 60), shorten(&message, 300)));
            }
        }
    }
    if problems.is_empty() {
        Finding::pass(format!(
            "{tried} wrongly typed values of the given keys: each refused with `failed` or accepted"
        ))
    } else {
        Finding::fail(format!(
            "{} of {tried} wrongly typed values made the program crash, hang or break the protocol; \
             validate the config and answer `init` with `failed` naming the key",
            problems.len()
        ))
        .details(problems)
    }
    .metric("values_tried", tried)
}
