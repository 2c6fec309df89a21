//! Lax booleans: the spellings DeerFlow accepts for a boolean key
//! (PyYAML's `yes`/`on`, pydantic's `"true"`, `1`, `0` ...) read as
//! booleans, with a warning that names the key.

use serde_json::Value;

use crate::json::json_type;

/// A section's boolean keys, and those of each provider entry.
const BOOLEAN_KEYS: [&str; 2] = ["enabled", "fail_closed"];

const ENTRY_BOOLEAN_KEYS: [&str; 2] = ["allow_insecure_permissions", "fail_closed"];

/// Reads the boolean spellings DeerFlow accepts (PyYAML's `yes`/`on`,
/// pydantic's `"true"`, `1`, `0` ...) as booleans, with a warning that
/// names the key (never the value, which may come from the environment),
/// in the section `name` (`guardrails`, `authorization`) and its
/// providers.
pub(super) fn lax_booleans_in(section: &mut Value, name: &str, origin: &str) {
    fn lax(holder: &mut Value, keys: &[&str], at: &str, origin: &str) {
        for key in keys {
            let Some(value) = holder.get_mut(*key) else { continue };
            if value.is_boolean() {
                continue;
            }
            if let Some(b) = pydantic_bool(value) {
                tracing::warn!(
                    "{origin}: `{at}.{key}` is {}, read as {b} the way DeerFlow reads it; write `{b}`",
                    json_type(value)
                );
                *value = Value::Bool(b);
            }
        }
    }
    lax(section, &BOOLEAN_KEYS, name, origin);
    if let Some(provider) = section.get_mut("provider") {
        lax(provider, &ENTRY_BOOLEAN_KEYS, &format!("{name}.provider"), origin);
    }
    if let Some(Value::Array(entries)) = section.get_mut("providers") {
        for (index, entry) in entries.iter_mut().enumerate() {
            lax(entry, &ENTRY_BOOLEAN_KEYS, &format!("{name}.providers[{index}]"), origin);
        }
    }
}

pub(super) fn lax_booleans(section: &mut Value, origin: &str) {
    lax_booleans_in(section, "guardrails", origin);
}

/// pydantic's lax boolean: the strings `true/false, yes/no, on/off, t/f,
/// y/n, 1/0` (any case, PyYAML's YAML 1.1 booleans among them), and the
/// numbers 0 and 1. `None` for anything else, which is then refused.
fn pydantic_bool(value: &Value) -> Option<bool> {
    match value {
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "t" | "y" | "1" => Some(true),
            "false" | "no" | "off" | "f" | "n" | "0" => Some(false),
            _ => None,
        },
        Value::Number(n) => match n.as_f64() {
            Some(1.0) => Some(true),
            Some(0.0) => Some(false),
            _ => None,
        },
        _ => None,
    }
}
