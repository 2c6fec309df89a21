//! Deciding a suite's calls with a guardrail and comparing each with what
//! its case expects.

use std::time::Instant;

use guardhost::outcome_of;
use guardhost::StepAnswer;
use guardhost::{Approval, Ask, GuardrailDecision, GuardrailMiddleware, ToolCallRequest};
use serde_json::Value;

use crate::coverage::Recorder;
use crate::report::{Got, TestResult};
use crate::suite::{Approve, Expect, Suite, TestCase};

/// Decides every case of `suite` with `middleware` (on the sync path; the
/// async path decides alike, as the middleware's own tests check).
pub fn run_suite(suite: &Suite, middleware: &GuardrailMiddleware) -> Vec<TestResult> {
    suite.tests.iter().enumerate().map(|(index, case)| run_case(index, case, middleware, None)).collect()
}

/// [`run_suite`], each case explained ([`GuardrailMiddleware::explain`]:
/// the same decision, with every entry's answer) and recorded in
/// `coverage`.
pub fn run_suite_covered(
    suite: &Suite,
    middleware: &GuardrailMiddleware,
    coverage: &mut Recorder,
) -> Vec<TestResult> {
    suite
        .tests
        .iter()
        .enumerate()
        .map(|(index, case)| run_case(index, case, middleware, Some(&mut *coverage)))
        .collect()
}

fn run_case(
    index: usize,
    case: &TestCase,
    middleware: &GuardrailMiddleware,
    coverage: Option<&mut Recorder>,
) -> TestResult {
    let started = Instant::now();
    let mut call =
        ToolCallRequest::new(case.tool.clone(), case.args.clone()).with_id(format!("test-{}", index + 1));
    call.context = case.context.clone();
    let decided = match (&case.approve, coverage) {
        (Some(approve), _) => decide_approved(middleware, call.clone(), approve),
        (None, None) => middleware.decide(&call).map_err(|e| e.to_string()),
        (None, Some(coverage)) => middleware
            .explain(&call)
            .map(|explained| {
                coverage.record(&explained);
                (explained.decision, explained.provider_error)
            })
            .map_err(|e| e.to_string()),
    };
    let got = match decided {
        Ok((decision, provider_error)) => Got {
            outcome: if provider_error { "error".to_owned() } else { outcome_of(&decision).to_owned() },
            code: decision.reasons.first().map(|r| r.code.to_string()),
            message: decision.reasons.first().map(|r| r.message.to_string()),
            policy: decision.policy_id.clone(),
            decided_by: decision.metadata.get("decided_by").and_then(Value::as_str).map(str::to_owned),
            cause: provider_error.then(|| cause(middleware, &call)).flatten(),
        },
        Err(error) => Got { outcome: "error".to_owned(), message: Some(error), ..Got::default() },
    };
    let problems = compare(case, &got);
    TestResult { name: case.name.clone(), got, problems, seconds: started.elapsed().as_secs_f64() }
}

/// Why the provider that failed on `call` fails, in its own words.
fn cause(middleware: &GuardrailMiddleware, call: &ToolCallRequest) -> Option<String> {
    let explained = middleware.explain(call).ok()?;
    explained.steps.into_iter().find_map(|step| match step.answer {
        StepAnswer::Asked { cause, .. } => cause.map(|cause| format!("{}: {cause}", step.entry)),
        _ => None,
    })
}

/// The most asks one case answers: one for each asking entry of a chain.
const MAX_ASKS: usize = 16;

/// Decides `call`, and, while the decision is an `ask`, answers it as a
/// runtime does (the approval of exactly this call, in its context, with
/// the approvals before it) and decides again: the last decision. A call
/// that is never asked about is an error: the case says it is.
fn decide_approved(
    middleware: &GuardrailMiddleware,
    mut call: ToolCallRequest,
    approve: &Approve,
) -> Result<(GuardrailDecision, bool), String> {
    let mut approvals = Vec::new();
    for _ in 0..MAX_ASKS {
        let (decision, provider_error) = middleware.decide(&call).map_err(|e| e.to_string())?;
        let Some(ask) = Ask::of(&decision) else {
            if approvals.is_empty() {
                return Err(format!(
                    "`approve` answers an ask, and the call was not held for approval (it got {})",
                    outcome_of(&decision)
                ));
            }
            return Ok((decision, provider_error));
        };
        let approval = Approval {
            approved: approve.approved,
            entry: ask.entry,
            digest: ask.digest,
            deadline: ask.deadline,
            approved_by: approve.by.clone(),
        };
        approvals.push(serde_json::to_value(approval).map_err(|e| e.to_string())?);
        call.context
            .get_or_insert_with(Default::default)
            .insert("approval".into(), Value::Array(approvals.clone()));
    }
    Err(format!("the call was still held for approval after {MAX_ASKS} answers"))
}

/// What differs between `case` and what it `got`, in words.
fn compare(case: &TestCase, got: &Got) -> Vec<String> {
    let mut problems = Vec::new();
    if got.outcome != case.expect.as_str() {
        problems.push(format!("expected {}, got {}", case.expect.as_str(), got.outcome));
    }
    let mut check = |what: &str, want: &Option<String>, have: &Option<String>| {
        if let Some(want) = want {
            if have.as_ref() != Some(want) {
                problems.push(format!(
                    "expected {what} `{want}`, got {}",
                    have.as_deref().map_or_else(|| "none".to_owned(), |h| format!("`{h}`"))
                ));
            }
        }
    };
    check("code", &case.code, &got.code);
    check("policy", &case.policy, &got.policy);
    check("decided_by", &case.decided_by, &got.decided_by);
    // An expected error is a provider error whatever its code.
    if case.expect == Expect::Error {
        problems.retain(|p| !p.starts_with("expected code"));
    }
    problems
}
