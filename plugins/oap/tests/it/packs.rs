//! The published OAP test data, replayed through the provider as the host
//! loads it: the spec's conformance cases and every policy pack's own
//! `tests/` (contexts in order → expected decisions), with the packs read
//! from `policies_dir`. The data is APort's, read from `GUARDHOST_OAP_DATA`
//! (see `tests/common/mod.rs`); without it these tests are skipped, with a
//! notice.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use guardhost::{GuardrailProvider, GuardrailRequest, ProviderSpec, ToolCallRequest};
use serde_json::{json, Map, Value};

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The provider with every published pack, a passport, and the tool
/// `pack_under_test` mapped to `pack`.
fn provider(data: &Path, passport: &Path, pack: &str) -> Arc<dyn GuardrailProvider> {
    let config = json!({
        "passport_path": passport,
        "policies_dir": common::path(data, "policies-repo"),
        "tool_mapping": { "pack_under_test": pack },
    });
    let use_ = format!("{}:OAPGuardrailProvider", guardhost_kit::cdylib("guardhost_oap").display());
    let spec = ProviderSpec::new(use_, config.as_object().cloned().unwrap());
    guardhost::instantiate(&spec, Path::new("/")).unwrap_or_else(|e| panic!("{e}")).provider
}

/// A fixture whose expectation contradicts its own pack's rules: the code
/// the provider returns instead, and why. Each is still asserted exactly;
/// a conflict that starts matching the fixture must leave this list.
const CONFLICTS: &[(&str, &str, &str, &str)] = &[
    (
        "finance.payment.charge.v1",
        "deny_daily_cap_exceeded_step1",
        "oap.limit_exceeded",
        "expects allow, but its amount 60000 exceeds the passport's USD max_per_tx of 20000",
    ),
    (
        "finance.transaction.execute.v1",
        "deny_counterparty_exposure_exceeded",
        "oap.limit_exceeded",
        "expects oap.counterparty_limit_exceeded, but 250000 also exceeds max_exposure_per_tx_usd 50000, \
         whose rule comes first in the pack",
    ),
    (
        "data.export.v1",
        "allow_users",
        "oap.invalid_context",
        "expects allow, but its context predates data.export.create.v1 and lacks the pack's \
         required_fields export_type, format, filters (governance.data.access.v1's own fixture \
         deny_missing_required_fields expects exactly this denial)",
    ),
    (
        "payments.refunds.v1",
        "deny_150usd",
        "oap.assurance_insufficient",
        "expects oap.limit_exceeded, but the pack's assurance_rules require L3 above 10000 minor units \
         for this L2 passport, and that rule comes before the amount cap",
    ),
];

/// What a case must decide: the fixture's expectation, unless it is a
/// known conflict.
fn wanted(suite: &str, case: &str, allow: bool, code: &str) -> (bool, String) {
    match CONFLICTS.iter().find(|(s, c, _, _)| *s == suite && *c == case) {
        Some((_, _, ours, _)) => (false, (*ours).to_owned()),
        None => (allow, code.to_owned()),
    }
}

/// `(allow, first code)` of one call of `pack_under_test` with `context`.
fn decide(provider: &dyn GuardrailProvider, context: &Value) -> (bool, String) {
    let call = ToolCallRequest::new("pack_under_test", context.as_object().cloned().unwrap_or_else(Map::new));
    let decision = provider.evaluate(&GuardrailRequest::from_tool_call(&call, None).unwrap()).unwrap();
    (decision.allow, decision.reasons.first().map(|r| r.code.to_string()).unwrap_or_default())
}

#[test]
fn the_spec_conformance_cases_decide_as_expected() {
    let Some(data) = common::root("the_spec_conformance_cases_decide_as_expected") else { return };
    let root = common::path(&data, "spec/conformance/cases");
    let mut checked = 0;
    for case in std::fs::read_dir(&root).unwrap().flatten() {
        let dir = case.path();
        let mut expectations: Vec<PathBuf> =
            std::fs::read_dir(dir.join("expected")).unwrap().flatten().map(|e| e.path()).collect();
        expectations.sort();
        for expected_path in expectations {
            let expected = read_json(&expected_path);
            let name = expected_path.file_name().unwrap().to_string_lossy().replace(".decision.json", "");
            let context = read_json(&dir.join("contexts").join(format!("{name}.json")));
            let pack = expected["policy_id"].as_str().unwrap();
            // A fresh provider per case: the cases are independent.
            let p = provider(&data, &dir.join("passports/template.json"), pack);
            let (allow, code) = decide(&*p, &context);
            let suite = dir.file_name().unwrap().to_string_lossy().into_owned();
            let want = wanted(
                &suite,
                &name,
                expected["allow"].as_bool().unwrap(),
                expected["reasons"][0]["code"].as_str().unwrap(),
            );
            assert_eq!((allow, code), want, "{suite}: {name}");
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} cases found");
}

#[test]
fn every_policy_packs_own_tests_replay_in_order() {
    let Some(data) = common::root("every_policy_packs_own_tests_replay_in_order") else { return };
    let root = common::path(&data, "policies-repo");
    let mut packs = 0;
    for entry in std::fs::read_dir(&root).unwrap().flatten() {
        let tests = entry.path().join("tests");
        let (contexts, expected) = (tests.join("contexts.jsonl"), tests.join("expected.jsonl"));
        if !contexts.is_file() || !expected.is_file() {
            continue;
        }
        let pack = entry.file_name().to_string_lossy().into_owned();
        let mut replayed = 0;
        for passport_name in ["passport.template.json", "passport.instance.json"] {
            if !tests.join(passport_name).is_file() {
                continue;
            }
            // The passport lives in a file of our own: a case with an
            // `overridePassport` patches it, and the provider re-reads it, as an
            // operator's edit would be picked up (state such as daily totals
            // carries over).
            let dir = tempfile::tempdir().unwrap();
            let passport_file = dir.path().join("passport.json");
            let template = read_json(&tests.join(passport_name));
            let write = |passport: &Value| {
                let aside = dir.path().join("passport.tmp");
                std::fs::write(&aside, passport.to_string()).unwrap();
                std::fs::rename(&aside, &passport_file).unwrap();
            };
            write(&template);
            let p = provider(&data, &passport_file, &pack);
            let expected: Vec<Value> = std::fs::read_to_string(&expected)
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let lines = std::fs::read_to_string(&contexts).unwrap();
            for (i, line) in lines.lines().filter(|l| !l.trim().is_empty()).enumerate() {
                let case: Value = serde_json::from_str(line).unwrap();
                let name = case["name"].as_str().unwrap();
                // Expectations are matched by name where they carry one, else by
                // line (one pack's expected.jsonl is bare decisions, in order).
                let want = match expected.iter().find(|e| e["name"] == name) {
                    Some(e) => e.get("expected").unwrap_or(e),
                    None => &expected[i],
                };
                let mut passport = template.clone();
                if let Some(Value::Object(patch)) = case.get("overridePassport") {
                    for (key, value) in patch {
                        passport[key] = value.clone();
                    }
                }
                write(&passport);
                let (allow, code) = decide(&*p, &case["context"]);
                let want = wanted(
                    &pack,
                    name,
                    want["allow"].as_bool().unwrap(),
                    want["reasons"][0]["code"].as_str().unwrap(),
                );
                assert_eq!((allow, code), want, "{pack} with {passport_name}: {name}");
                replayed += 1;
            }
        }
        assert!(replayed > 0, "{pack}");
        packs += 1;
    }
    assert!(packs >= 3, "only {packs} packs with tests found");
}
