//! `guardhost explain`: for one call, what every guard (authorization,
//! each chain entry) made of it, in order: not asked (its tools leave the
//! call out, or an entry before it decided), or its answer with every
//! reason, and for a Cedar entry (when the command is built with Cedar)
//! which policies decided, which could not be evaluated and which did not
//! match.

#[cfg(feature = "cedar")]
use std::path::Path;
use std::process::ExitCode;

use guardhost::outcome_of;
use guardhost::GuardrailDecision;
use guardhost::StepAnswer;
#[cfg(feature = "cedar")]
use guardhost::{GuardrailRequest, ProviderSpec};

use crate::error::CliError;
use crate::eval::CallArgs;
use crate::setup::load_guardrail;

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    call: CallArgs,
}

pub fn run(args: ExplainArgs) -> Result<ExitCode, CliError> {
    let call = args.call.call()?;
    let tool = &args.call.tool;
    let (config, guardrail) = load_guardrail(args.call.config.as_deref(), false)?;
    let Some(guardrail) = guardrail else {
        let why = config.unguarded_reason().unwrap_or("no provider");
        outln!("no guardrail is installed ({why}): every call runs unchecked")?;
        return Ok(ExitCode::SUCCESS);
    };
    let explained = guardrail.middleware.explain(&call).map_err(|e| CliError::Usage(e.to_string()))?;
    outln!("call: tool '{tool}' with {}", serde_json::Value::Object(call.tool_call.args.clone()))?;
    #[cfg(feature = "cedar")]
    let specs = config.guard_specs();
    for (number, (step, entry)) in explained.steps.iter().zip(guardrail.described()).enumerate() {
        // The entry's number finds its Cedar spec.
        #[cfg(not(feature = "cedar"))]
        let _ = number;
        let info = entry.provider;
        out!("  {} ({} provider at {}): ", step.entry, info.name, entry.written.place)?;
        match &step.answer {
            StepAnswer::NotSelected => outln!("not asked: its `tools:` leave '{tool}' out")?,
            StepAnswer::NotAsked => outln!("not asked: an entry before it decided the call")?,
            StepAnswer::Asked { decision, provider_error, request, cause } => {
                outln!("{}", said(decision, *provider_error))?;
                if let Some(cause) = cause {
                    outln!("       cause: {cause}")?;
                }
                for reason in decision.reasons.iter().skip(1) {
                    outln!("       also: {}: {}", reason.code, reason.message)?;
                }
                #[cfg(feature = "cedar")]
                if info.name == "cedar" {
                    if let Some(spec) = specs.get(number).copied() {
                        cedar(spec, &config.base_dir, request)?;
                    }
                }
                #[cfg(not(feature = "cedar"))]
                let _ = (request, info);
            }
        }
    }
    let by = explained.decision.metadata.get("decided_by").and_then(|v| v.as_str());
    let by = by.map_or_else(String::new, |by| format!(", decided by {by}"));
    outln!("result: {}{by}", said(&explained.decision, explained.provider_error))?;
    Ok(ExitCode::SUCCESS)
}

/// A decision in a line: its outcome, first reason and policy.
fn said(decision: &GuardrailDecision, provider_error: bool) -> String {
    let outcome = outcome_of(decision);
    let reason =
        decision.reasons.first().map_or_else(String::new, |r| format!(" ({}: {})", r.code, r.message));
    let policy = decision.policy_id.as_deref().map_or_else(String::new, |p| format!(", policy {p}"));
    let failed = if provider_error { ", the provider failed" } else { "" };
    format!("{outcome}{reason}{policy}{failed}")
}

#[cfg(feature = "cedar")]
/// What a Cedar entry's policies made of `request`, read again from its
/// config: the policies that decided, those that could not be evaluated,
/// those that did not match.
fn cedar(spec: &ProviderSpec, base_dir: &Path, request: &GuardrailRequest) -> Result<(), CliError> {
    let explained = compile_cedar(spec, base_dir)?
        .and_then(|cedar| guardhost::with_abi_request(request, |abi| cedar.explain(abi)));
    let explained = match explained {
        Ok(explained) => explained,
        Err(problem) => return outln!("       (the policies cannot be explained: {problem})"),
    };
    let list = |ids: &[String]| if ids.is_empty() { "none".to_owned() } else { ids.join(", ") };
    let how = match (explained.allow, explained.determining.is_empty()) {
        (true, _) => "a permit matched and no forbid did",
        (false, false) => "a forbid matched, and a forbid wins",
        (false, true) => "no permit matched",
    };
    outln!("       Cedar: {how}")?;
    outln!("       decided by: {}", list(&explained.determining))?;
    if !explained.errors.is_empty() {
        for (id, error) in &explained.errors {
            outln!("       could not be evaluated: {id}: {error}")?;
        }
    }
    outln!("       did not match (or were not needed): {}", list(&explained.not_matching))
}

#[cfg(feature = "cedar")]
/// A Cedar entry's policies, compiled from its config as the provider
/// compiles them (paths resolved from `base_dir`): what `explain` and
/// `test --coverage` ask which policies decided a request, and which there
/// are. The inner error says why the policies cannot be read.
pub fn compile_cedar(
    spec: &ProviderSpec,
    base_dir: &Path,
) -> Result<Result<guardhost_cedar::Cedar, String>, CliError> {
    let descriptor = guardhost::locate("builtin:CedarGuardrailProvider", base_dir)?;
    let config = descriptor.resolve_paths(&spec.config, base_dir);
    Ok(serde_json::from_value::<guardhost_cedar::Config>(serde_json::Value::Object(config))
        .map_err(|e| e.to_string())
        .and_then(|config| guardhost_cedar::Cedar::compile(&config)))
}
