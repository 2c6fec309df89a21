//! The one place that knows YAML: text in, a JSON value out.
//!
//! Everything else in the host works on `serde_json::Value`, so swapping the
//! YAML parser touches only this file.

use serde_json::Value;

/// A YAML text that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    message: String,
}

/// Parses YAML into a JSON value. Mapping keys must be strings; an empty
/// document is `null`.
pub(crate) fn parse(text: &str) -> Result<Value, YamlError> {
    let value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| YamlError { message: format!("invalid YAML: {e}") })?;
    to_json(value, "")
}

fn to_json(value: serde_yaml::Value, path: &str) -> Result<Value, YamlError> {
    use serde_yaml::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                serde_json::Number::from_f64(f).map(Value::Number).ok_or_else(|| YamlError {
                    message: format!("`{path}`: the number {f} has no JSON form (NaN or infinite)"),
                })?
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| to_json(v, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    other => {
                        return Err(YamlError {
                            message: format!(
                                "`{path}`: mapping keys must be strings, found {}",
                                serde_yaml::to_string(&other).unwrap_or_default().trim()
                            ),
                        })
                    }
                };
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                out.insert(key, to_json(v, &child)?);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => to_json(tagged.value, path)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_scalars_and_sequences() {
        let v = parse("a: 1\nb: [x, true, null, 2.5]\nc: {d: e}\n").unwrap();
        assert_eq!(v, json!({"a": 1, "b": ["x", true, null, 2.5], "c": {"d": "e"}}));
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse("").unwrap(), Value::Null);
    }

    #[test]
    fn non_string_keys_are_named() {
        let err = parse("provider:\n  config:\n    1: x\n").unwrap_err().to_string();
        assert!(err.contains("`provider.config`: mapping keys must be strings, found 1"), "{err}");
    }

    #[test]
    fn syntax_errors_carry_a_location() {
        let err = parse("a: [1, 2\n").unwrap_err().to_string();
        assert!(err.starts_with("invalid YAML:") && err.contains("line"), "{err}");
    }
}
