//! A pack's `required_context`: the JSON Schema of the tool call's
//! arguments, compiled once when the pack is loaded (by the `jsonschema`
//! crate, without its network and file resolvers: a `$ref` outside the
//! schema is a load error, never a fetch at decision time).
//!
//! What a call is checked against, and how it fails, follows APort:
//!
//! * The instance is the tool call's arguments, the `context` object the
//!   pack's rules and `required_fields` read (APort's hosted verifier
//!   validates the same object against the same schema).
//! * A value the schema forbids (a wrong type, a value outside an `enum`, a
//!   `pattern`, `minimum` or `maxLength` broken, a property that
//!   `additionalProperties: false` does not allow) denies with
//!   `oap.invalid_context` **before** the rules: APort's generic evaluator
//!   denies malformed context with that code ahead of its allowlist rules,
//!   and a rule comparing a malformed value proves nothing.
//! * A property the schema's top level `required`s and the call does not
//!   send joins `required_fields` in APort's `Missing required fields: a, b`
//!   (`oap.invalid_context`), **after** the rules, where APort's own
//!   fixtures put it.
//! * `required` below the top level (inside an array's items or a nested
//!   object) is not enforced: APort's published fixtures for
//!   `finance.payment.charge.v1` allow charges whose `items` lack the
//!   `price` its schema requires, so enforcing it would change published
//!   decisions. Every other keyword applies at every depth.

use serde_json::Value;

use crate::error::{err, PackError};

/// The longest deny message: a schema error quotes the offending value,
/// which may be the whole of a long string.
const MAX_MESSAGE: usize = 300;

/// A compiled `required_context`.
pub(super) struct ContextSchema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for ContextSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContextSchema")
    }
}

/// What the schema says about one call.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Findings {
    /// The first value the schema forbids, as a deny message.
    pub invalid: Option<String>,
    /// Top-level `required` properties the call does not send, in the
    /// schema's order.
    pub missing: Vec<String>,
}

impl ContextSchema {
    /// Compiles `required_context`; `Ok(None)` when the pack has none
    /// (absent or `null`). The schema's own `$schema` picks the draft.
    pub(super) fn compile(id: &str, schema: Option<&Value>) -> Result<Option<Self>, PackError> {
        let schema = match schema {
            None | Some(Value::Null) => return Ok(None),
            Some(s @ (Value::Object(_) | Value::Bool(_))) => s,
            Some(_) => return Err(err(id, "`required_context` must be a JSON Schema (an object)")),
        };
        jsonschema::options()
            .build(schema)
            .map(|validator| Some(ContextSchema { validator }))
            .map_err(|e| err(id, format!("`required_context` is not a valid JSON Schema: {e}")))
    }

    /// Checks `context`. A valid call (the common case) costs one pass of
    /// the compiled schema and allocates nothing.
    pub(super) fn check(&self, context: &Value) -> Findings {
        let mut findings = Findings::default();
        if self.validator.is_valid(context) {
            return findings;
        }
        for error in self.validator.iter_errors(context) {
            let at = error.instance_path().as_str();
            match error.kind() {
                jsonschema::error::ValidationErrorKind::Required { property } if at.is_empty() => {
                    let name = property.as_str().map_or_else(|| property.to_string(), str::to_owned);
                    if !findings.missing.contains(&name) {
                        findings.missing.push(name);
                    }
                }
                // Below the top level, presence is not enforced (module docs).
                jsonschema::error::ValidationErrorKind::Required { .. } => {}
                _ if findings.invalid.is_none() => {
                    let field = at.trim_start_matches('/').replace('/', ".");
                    let message = if field.is_empty() {
                        format!("Invalid context: {error}")
                    } else {
                        format!("Invalid context field {field}: {error}")
                    };
                    findings.invalid = Some(truncate(message));
                }
                _ => {}
            }
        }
        findings
    }
}

fn truncate(mut text: String) -> String {
    if text.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(s: Value) -> ContextSchema {
        ContextSchema::compile("t.v1", Some(&s)).unwrap().unwrap()
    }

    #[test]
    fn findings_split_values_from_top_level_presence() {
        let s = schema(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "integer", "minimum": 1},
                "items": {"type": "array", "items": {"type": "object", "required": ["price"],
                          "properties": {"qty": {"type": "integer"}}}}
            }
        }));
        assert_eq!(s.check(&json!({"a": 1, "b": 2})), Findings::default());
        assert_eq!(s.check(&json!({"a": 1})).missing, ["b"]);
        assert_eq!(s.check(&json!({})).missing, ["a", "b"]);
        let f = s.check(&json!({"a": "1", "b": 2}));
        assert_eq!(f.invalid.as_deref(), Some(r#"Invalid context field a: "1" is not of type "integer""#));
        // Nested presence is not enforced (see the module docs); nested values are.
        assert_eq!(s.check(&json!({"a": 1, "b": 2, "items": [{"qty": 1}]})), Findings::default());
        let f = s.check(&json!({"a": 1, "b": 2, "items": [{"qty": "x"}]}));
        assert!(f.invalid.unwrap().starts_with("Invalid context field items.0.qty: "));
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let s = schema(json!({"properties": {"a": {"type": "integer"}}}));
        let f = s.check(&json!({"a": "é".repeat(1000)}));
        let message = f.invalid.unwrap();
        assert!(message.len() <= MAX_MESSAGE + '…'.len_utf8(), "{}", message.len());
        assert!(message.ends_with('…'));
    }

    #[test]
    fn bad_schemas_are_load_errors_naming_the_pack() {
        for bad in [json!({"type": 5}), json!({"$ref": "https://example.com/s.json"}), json!("object")] {
            let e = ContextSchema::compile("t.v1", Some(&bad)).unwrap_err();
            assert!(e.0.starts_with("policy pack `t.v1`: `required_context`"), "{bad}: {e}");
        }
        assert!(ContextSchema::compile("t.v1", None).unwrap().is_none());
        assert!(ContextSchema::compile("t.v1", Some(&Value::Null)).unwrap().is_none());
    }
}
