//! The OAP provider as the host runs it, shared by the provider's cases:
//! the real cdylib loaded by guardhost, a call made to it, and the
//! passports the cases write.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use guardhost::{GuardrailDecision, GuardrailProvider, GuardrailRequest, ProviderSpec, ToolCallRequest};
use serde_json::{json, Map, Value};

pub(crate) fn example_passport() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/oap/passport.json")
}

pub(crate) fn use_() -> String {
    format!("{}:OAPGuardrailProvider", guardhost_kit::cdylib("guardhost_oap").display())
}

pub(crate) fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

pub(crate) fn try_provider(config: Value) -> Result<Arc<dyn GuardrailProvider>, String> {
    guardhost::instantiate(&ProviderSpec::new(use_(), object(config)), Path::new("/"))
        .map(|loaded| loaded.provider)
        .map_err(|e| e.to_string())
}

pub(crate) fn provider(config: Value) -> Arc<dyn GuardrailProvider> {
    try_provider(config).unwrap_or_else(|e| panic!("{e}"))
}

pub(crate) fn with_passport(path: &Path) -> Arc<dyn GuardrailProvider> {
    provider(json!({ "passport_path": path }))
}

pub(crate) fn request(tool: &str, args: Value) -> GuardrailRequest {
    GuardrailRequest::from_tool_call(&ToolCallRequest::new(tool, object(args)), None).unwrap()
}

pub(crate) fn decide(provider: &dyn GuardrailProvider, tool: &str, args: Value) -> GuardrailDecision {
    provider.evaluate(&request(tool, args)).unwrap()
}

/// `"allow"`, or the first reason code of a denial.
pub(crate) fn code(provider: &dyn GuardrailProvider, tool: &str, args: Value) -> String {
    let d = decide(provider, tool, args);
    if d.allow {
        "allow".into()
    } else {
        d.reasons[0].code.to_string()
    }
}

/// A passport of our own with `capabilities` and `limits`, in `dir`.
pub(crate) fn own_passport(dir: &Path, name: &str, capabilities: &[&str], limits: Value) -> PathBuf {
    let passport = json!({
        "passport_id": name, "kind": "template", "spec_version": "oap/1.0", "owner_id": "org_test",
        "owner_type": "org", "status": "active", "assurance_level": "L1",
        "capabilities": capabilities.iter().map(|c| json!({"id": c})).collect::<Vec<_>>(),
        "limits": limits, "regions": ["US"], "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "version": "1.0.0", "never_expires": true
    });
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, passport.to_string()).unwrap();
    path
}

/// A copy of the example passport with `edit` applied, in `dir`.
pub(crate) fn passport_with(dir: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut passport: Value =
        serde_json::from_str(&std::fs::read_to_string(example_passport()).unwrap()).unwrap();
    edit(&mut passport);
    let path = dir.join("passport.json");
    std::fs::write(&path, passport.to_string()).unwrap();
    path
}
