//! Deciding a suite's calls with a guardrail and comparing each with what
//! its case expects.

use std::time::Instant;

use guardhost::middleware::StepAnswer;
use guardhost::outcome::outcome_of;
use guardhost::{GuardrailMiddleware, ToolCallRequest};
use serde_json::Value;

use crate::coverage::Recorder;
use crate::report::{Got, TestResult};
use crate::suite::{Expect, Suite, TestCase};

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
    let decided = match coverage {
        None => middleware.decide(&call),
        Some(coverage) => middleware.explain(&call).map(|explained| {
            coverage.record(&explained);
            (explained.decision, explained.provider_error)
        }),
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
        Err(error) => Got { outcome: "error".to_owned(), message: Some(error.to_string()), ..Got::default() },
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
