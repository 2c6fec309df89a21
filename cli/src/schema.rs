//! `guardhost schema`: a JSON Schema (draft 2020-12) of the config file,
//! read from the types the host reads it into (see `probe`): the
//! `guardrails:` section (one `provider:` or a chain of `providers:`, with
//! `mode`, `decision_log`, `passport`), `authorization:`, `mcp:`, and the
//! `config:` of each built-in provider (allowlist, approvals, RBAC, Cedar,
//! OAP), chosen by the symbol its `use:` names. Editors validate and
//! complete a config with it (`# yaml-language-server: $schema=...`).

mod probe;

use std::process::ExitCode;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::error::CliError;

/// What a config file may hold, as the host, the MCP proxy and DeerFlow
/// read it (each section optional).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // Only its `Deserialize` is read.
struct Sections {
    guardrails: Option<guardhost::GuardrailsConfig>,
    authorization: Option<guardhost::AuthorizationConfig>,
    mcp: Option<guardhost_mcp::config::McpConfig>,
}

/// The keys of the `guardrails:` section that make a file whose top level
/// holds one of them the section itself (as the host reads it).
const SECTION_KEYS: [&str; 5] = ["enabled", "fail_closed", "passport", "provider", "providers"];

/// Every key of the section: one at the top level of an application
/// config was meant to be under `guardrails:`.
const ALL_SECTION_KEYS: [&str; 7] =
    ["enabled", "fail_closed", "passport", "provider", "providers", "mode", "decision_log"];

/// The built-in providers: the symbol `use:` names, and the schema of
/// their `config:`.
fn providers(defs: &mut Map<String, Value>) -> Vec<(&'static str, Value)> {
    let mut add = |(schema, more): (Value, Map<String, Value>)| {
        defs.extend(more);
        schema
    };
    // Without Cedar built in, a Cedar library's `config:` is left open.
    #[cfg_attr(not(feature = "cedar"), allow(unused_mut))]
    let mut list = vec![
        ("AllowlistProvider", add(probe::schema_of::<guardhost_allowlist::AllowlistConfig>("allowlist."))),
        ("ApprovalGuardrailProvider", add(probe::schema_of::<guardhost_approvals::Config>("approvals."))),
        ("RbacAuthorizationProvider", add(probe::schema_of::<guardhost_rbac::RbacConfig>("rbac."))),
        ("OAPGuardrailProvider", add(oap())),
    ];
    #[cfg(feature = "cedar")]
    list.push(("CedarGuardrailProvider", add(probe::schema_of::<guardhost_cedar::Config>("cedar."))));
    list
}

/// The sections whose booleans and enums may be `$NAME` (the host
/// resolves the variable, then reads its text as DeerFlow reads a boolean):
/// `guardrails:`, `authorization:` and their provider entries. Elsewhere
/// (`decision_log`, a provider's `config:`) a `$NAME` is only a string.
const ENV_RESOLVED: [&str; 3] = ["GuardrailsConfig", "AuthorizationConfig", "ProviderSpec"];

/// Lets the booleans and enums of [`ENV_RESOLVED`] be `$NAME` or
/// `${NAME}`, an environment variable read when the config is loaded.
fn environment_references(defs: &mut Map<String, Value>) {
    let reference = json!({"$ref": "#/$defs/EnvironmentVariable"});
    for name in ENV_RESOLVED {
        let Some(Value::Object(properties)) = defs.get_mut(name).map(|d| d["properties"].take()) else {
            continue;
        };
        let properties: Map<String, Value> = properties
            .into_iter()
            .map(|(key, schema)| {
                let scalar = |s: &Value| s.get("type") == Some(&json!("boolean")) || s.get("enum").is_some();
                let schema = match schema.get("anyOf").and_then(Value::as_array) {
                    Some(options) if options.iter().any(scalar) => {
                        let mut options = options.clone();
                        options.push(reference.clone());
                        json!({"anyOf": options})
                    }
                    _ if scalar(&schema) => json!({"anyOf": [schema, reference]}),
                    _ => schema,
                };
                (key, schema)
            })
            .collect();
        defs[name]["properties"] = Value::Object(properties);
    }
    defs.insert(
        "EnvironmentVariable".into(),
        json!({
            "type": "string",
            "pattern": "^\\$([A-Za-z_][A-Za-z0-9_]*|\\{[A-Za-z_][A-Za-z0-9_]*\\})$",
            "description": "an environment variable, read when the config is loaded",
        }),
    );
}

/// The schema, as one JSON document.
pub fn schema() -> Value {
    let (sections, mut defs) = probe::schema_of::<Sections>("");
    let _ = sections; // `{"$ref": "#/$defs/Sections"}`: taken apart below.
    let mut defs_sections = defs.remove("Sections").unwrap_or_else(|| json!({}));
    // A provider's `config:` follows the built-in provider its `use:` names
    // (by its symbol, whatever the path or module before it).
    let conditions: Vec<Value> = providers(&mut defs)
        .into_iter()
        .map(|(symbol, config)| {
            json!({
                "if": {"properties": {"use": {"type": "string", "pattern": format!(":{symbol}$")}}, "required": ["use"]},
                "then": {"properties": {"config": config}},
            })
        })
        .collect();
    if let Some(spec) = defs.get_mut("ProviderSpec") {
        spec["allOf"] = Value::Array(conditions);
    }
    environment_references(&mut defs);
    let mut properties = defs_sections["properties"].take();
    // `guardrails: null` and `authorization: null` are refused (nothing
    // indented under them), though `Option` reads them as absent.
    for (key, def) in [("guardrails", "GuardrailsConfig"), ("authorization", "AuthorizationConfig")] {
        properties[key] = json!({"$ref": format!("#/$defs/{def}")});
    }
    // A whole application config: the sections guardhost reads, beside
    // whatever else the application keeps (DeerFlow's other sections).
    // The section's keys belong under `guardrails:`, never beside it.
    let misplaced: Vec<Value> = ALL_SECTION_KEYS.iter().map(|k| json!({"required": [k]})).collect();
    let application = json!({"properties": properties, "not": {"anyOf": misplaced}});
    // A file whose top level is the `guardrails:` section (and, beside it,
    // `authorization:`).
    let mut section = defs.get("GuardrailsConfig").cloned().unwrap_or_else(|| json!({}));
    section["properties"]["authorization"] = json!({"$ref": "#/$defs/AuthorizationConfig"});
    let any_section_key: Vec<Value> = SECTION_KEYS.iter().map(|k| json!({"required": [k]})).collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "guardhost config",
        "description": "A guardhost config file: a DeerFlow-style config.yaml (its `guardrails:`, `authorization:` and `mcp:` sections; other sections are the application's), or a file whose top level is the `guardrails:` section. Printed by `guardhost schema`.",
        "type": "object",
        "if": {"not": {"required": ["guardrails"]}, "anyOf": any_section_key},
        "then": section,
        "else": application,
        "$defs": defs,
    })
}

pub fn run() -> Result<ExitCode, CliError> {
    let text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    outln!("{text}")?;
    Ok(ExitCode::SUCCESS)
}

/// The OAP provider's config schema. The command does not link that
/// provider (it is a library of its own, with a JSON Schema engine the
/// command does not need), so its schema is kept here, and a test checks it
/// against the one read from `guardhost_oap::Config`.
const OAP_SCHEMA: &str = include_str!("schema/oap.json");

fn oap() -> (Value, Map<String, Value>) {
    let value: Value = serde_json::from_str(OAP_SCHEMA).unwrap_or_default();
    let root = value["root"].clone();
    let defs = value["defs"].as_object().cloned().unwrap_or_default();
    (root, defs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_oap_schema_is_the_one_its_config_type_gives() {
        let (root, defs) = probe::schema_of::<guardhost_oap::Config>("oap.");
        let derived = json!({"root": root, "defs": defs});
        let kept: Value = serde_json::from_str(OAP_SCHEMA).expect("schema/oap.json is JSON");
        assert_eq!(
            kept,
            derived,
            "cli/src/schema/oap.json is out of date: replace it with\n{}",
            serde_json::to_string_pretty(&derived).unwrap()
        );
    }

    #[test]
    fn the_config_types_give_their_keys_and_required_ones() {
        let (_, defs) = probe::schema_of::<Sections>("");
        let spec = &defs["ProviderSpec"];
        assert_eq!(spec["additionalProperties"], json!(false), "{spec}");
        assert!(spec["properties"]["use"].is_object(), "{spec}");
        let log = &defs["DecisionLogConfig"];
        assert_eq!(log["required"], json!(["path"]), "{log}");
        assert_eq!(
            defs["GuardrailsConfig"]["properties"]["mode"]["enum"],
            json!(["enforce", "warn", "observe"])
        );
    }
}
