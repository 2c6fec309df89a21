//! `guardhost explain`: for one call, what every guard (authorization,
//! each chain entry) made of it, in order: not asked (its tools leave the
//! call out, or an entry before it decided), or its answer with every
//! reason (a Cedar entry's reasons are the policies that decided).

use std::process::ExitCode;

use guardhost::middleware::StepAnswer;
use guardhost::outcome::outcome_of;
use guardhost::GuardrailDecision;

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
    for (number, (step, info)) in explained.steps.iter().zip(&guardrail.entries).enumerate() {
        let kind = match step.kind {
            guardhost::GuardKind::Authorization => "authorization",
            _ => "guardrail",
        };
        out!("{:>3}. {} ({} provider, {kind}): ", number + 1, step.entry, info.name)?;
        match &step.answer {
            StepAnswer::NotSelected => outln!("not asked: its `tools:` leave '{tool}' out")?,
            StepAnswer::NotAsked => outln!("not asked: an entry before it decided the call")?,
            StepAnswer::Asked { decision, provider_error, .. } => {
                outln!("{}", said(decision, *provider_error))?;
                for reason in decision.reasons.iter().skip(1) {
                    outln!("       also: {}: {}", reason.code, reason.message)?;
                }
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
