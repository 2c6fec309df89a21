//! `$ENV_VAR` secrets: a string that is a whole `$NAME` or `${NAME}` is
//! replaced by the variable's value; a missing variable is an error that
//! names the key and the variable, never a value.

use serde_json::{Map, Value};

use super::error::ConfigError;

/// Resolves `$ENV_VAR` strings anywhere in a provider config given on its
/// own.
pub(super) fn resolve_env_vars(
    config: &mut Map<String, Value>,
    origin: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    for (key, value) in config.iter_mut() {
        resolve_env(value, key, lookup).map_err(|(key, var)| ConfigError::MissingEnvVar {
            origin: origin.to_owned(),
            key,
            var,
        })?;
    }
    Ok(())
}

pub(super) fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The variable a string refers to when the whole string is `$NAME` or
/// `${NAME}` (NAME: letters, digits, `_`, not starting with a digit).
fn env_reference(s: &str) -> Option<&str> {
    let name = s.strip_prefix('$')?;
    let name = name.strip_prefix('{').and_then(|n| n.strip_suffix('}')).unwrap_or(name);
    let mut chars = name.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() || first == '_')
        .then_some(())
        .filter(|_| chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(|_| name)
}

/// Replaces `$NAME` strings anywhere inside `value`; on a missing variable
/// returns (dotted key path, variable).
pub(super) fn resolve_env(
    value: &mut Value,
    path: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<(), (String, String)> {
    match value {
        Value::String(s) => {
            if let Some(var) = env_reference(s) {
                *s = lookup(var).ok_or_else(|| (path.to_owned(), var.to_owned()))?;
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                resolve_env(item, &format!("{path}[{i}]"), lookup)?;
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                resolve_env(v, &format!("{path}.{k}"), lookup)?;
            }
        }
        _ => {}
    }
    Ok(())
}
