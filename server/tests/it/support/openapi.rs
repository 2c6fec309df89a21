//! Every response the tests get is checked against the service's own
//! OpenAPI document (`server/openapi.json`, served at `/openapi.json`): the
//! route and method must be there, the status must be one it lists, and a
//! JSON body must match the schema it gives for that status. The checker
//! knows the parts of JSON Schema the document uses: `$ref`, `type`,
//! `nullable`, `enum`, `required`, `properties`, `additionalProperties:
//! false`, `items` and `minimum`; meeting any other keyword fails, so the
//! document cannot outgrow what is checked.

use serde_json::{Map, Value};

use super::Response;

fn document() -> Value {
    serde_json::from_str(guardhost_server::OPENAPI).expect("the OpenAPI document is JSON")
}

/// Checks `response` to `method path` against the document.
pub fn check(method: &str, path: &str, response: &Response) {
    let doc = document();
    let path = path.split('?').next().unwrap_or(path);
    let path = template_of(&doc, path);
    let path = path.as_str();
    let operation = doc["paths"][path][method.to_lowercase()].clone();
    assert!(operation.is_object(), "{method} {path} is not in the OpenAPI document");
    let status = response.status.to_string();
    let mut declared = operation["responses"][&status].clone();
    assert!(declared.is_object(), "{method} {path} answered {status}, which the document does not list");
    if let Some(reference) = declared.get("$ref").and_then(Value::as_str) {
        declared = resolve(&doc, reference).clone();
    }
    let content =
        declared["content"].as_object().unwrap_or_else(|| panic!("{method} {path} {status}: no content"));
    let content_type = response.header("content-type").unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let entry = content.get(media).unwrap_or_else(|| {
        panic!(
            "{method} {path} {status}: content type {content_type:?}, the document lists {:?}",
            content.keys()
        )
    });
    if media == "application/json" {
        let body = response.json();
        if let Err(error) = validate(&doc, &entry["schema"], &body, "$") {
            panic!("{method} {path} {status}: {error}\nbody: {body}");
        }
    }
}

/// The document's path that `path` is an instance of: itself, or a
/// template whose `{name}` segments stand for any one segment.
fn template_of(doc: &Value, path: &str) -> String {
    let paths = doc["paths"].as_object().expect("the document has paths");
    if paths.contains_key(path) {
        return path.to_owned();
    }
    let segments: Vec<&str> = path.split('/').collect();
    paths
        .keys()
        .find(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            parts.len() == segments.len()
                && parts.iter().zip(&segments).all(|(part, segment)| part == segment || part.starts_with('{'))
        })
        .cloned()
        .unwrap_or_else(|| path.to_owned())
}

fn resolve<'a>(doc: &'a Value, reference: &str) -> &'a Value {
    let pointer = reference.strip_prefix('#').unwrap_or_else(|| panic!("only local references: {reference}"));
    doc.pointer(pointer).unwrap_or_else(|| panic!("no {reference} in the document"))
}

/// Whether `value` matches `schema`; where it does not, and why.
pub fn validate(doc: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => resolve(doc, reference),
        None => schema,
    };
    let Some(keywords) = schema.as_object() else {
        return Err(format!("{at}: a schema that is not an object"));
    };
    const KNOWN: [&str; 11] = [
        "type",
        "nullable",
        "enum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minimum",
        "description",
        "$ref",
        "format",
    ];
    if let Some(unknown) = keywords.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(format!("{at}: the checker does not know the keyword `{unknown}`"));
    }
    if value.is_null() && keywords.get("nullable") == Some(&Value::Bool(true)) {
        return Ok(());
    }
    if let Some(allowed) = keywords.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            return Err(format!("{at}: {value} is not one of {allowed:?}"));
        }
    }
    match keywords.get("type").and_then(Value::as_str) {
        None => Ok(()),
        Some("string") => expect(value.is_string(), at, "a string", value),
        Some("boolean") => expect(value.is_boolean(), at, "a boolean", value),
        Some("integer") => {
            expect(value.is_i64() || value.is_u64(), at, "an integer", value)?;
            match keywords.get("minimum").and_then(Value::as_i64) {
                Some(minimum) if value.as_i64().is_some_and(|v| v < minimum) => {
                    Err(format!("{at}: {value} is below the minimum {minimum}"))
                }
                _ => Ok(()),
            }
        }
        Some("array") => {
            let Some(items) = value.as_array() else { return expect(false, at, "an array", value) };
            match keywords.get("items") {
                Some(schema) => items
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, item)| validate(doc, schema, item, &format!("{at}[{i}]"))),
                None => Ok(()),
            }
        }
        Some("object") => {
            let Some(object) = value.as_object() else { return expect(false, at, "an object", value) };
            object_matches(doc, keywords, object, at)
        }
        Some(other) => Err(format!("{at}: the checker does not know the type `{other}`")),
    }
}

fn object_matches(
    doc: &Value,
    keywords: &Map<String, Value>,
    object: &Map<String, Value>,
    at: &str,
) -> Result<(), String> {
    let properties = keywords.get("properties").and_then(Value::as_object);
    for required in keywords.get("required").and_then(Value::as_array).into_iter().flatten() {
        let name = required.as_str().unwrap_or_default();
        if !object.contains_key(name) {
            return Err(format!("{at}: the required `{name}` is missing"));
        }
    }
    for (name, field) in object {
        match properties.and_then(|p| p.get(name)) {
            Some(schema) => validate(doc, schema, field, &format!("{at}.{name}"))?,
            None if keywords.get("additionalProperties") == Some(&Value::Bool(false)) => {
                return Err(format!("{at}: `{name}` is not a property the document allows"));
            }
            None => {}
        }
    }
    Ok(())
}

fn expect(ok: bool, at: &str, what: &str, value: &Value) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{at}: expected {what}, found {value}"))
    }
}

#[test]
fn the_checker_finds_what_does_not_match() {
    let doc = document();
    let decision = serde_json::json!({"$ref": "#/components/schemas/Decision"});
    let good = serde_json::json!({"line": 1, "outcome": "allow", "tool_call_id": null, "name": "ls"});
    assert_eq!(validate(&doc, &decision, &good, "$"), Ok(()));
    for (bad, why) in [
        (
            serde_json::json!({"line": 0, "outcome": "allow", "tool_call_id": null, "name": "ls"}),
            "below the minimum",
        ),
        (
            serde_json::json!({"line": 1, "outcome": "maybe", "tool_call_id": null, "name": "ls"}),
            "is not one of",
        ),
        (serde_json::json!({"line": 1, "outcome": "allow", "name": "ls"}), "required `tool_call_id`"),
        (
            serde_json::json!({"line": 1, "outcome": "allow", "tool_call_id": 3, "name": "ls"}),
            "expected a string",
        ),
        (
            serde_json::json!({"line": 1, "outcome": "allow", "tool_call_id": null, "name": "ls", "x": 1}),
            "`x` is not a property",
        ),
        (
            serde_json::json!({"line": 1, "outcome": "allow", "tool_call_id": null, "name": "ls", "reasons": [{"code": "c"}]}),
            "required `message`",
        ),
    ] {
        let error = validate(&doc, &decision, &bad, "$").unwrap_err();
        assert!(error.contains(why), "{bad}: {error}");
    }
}
