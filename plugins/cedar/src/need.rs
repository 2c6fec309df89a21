//! What of the context a set of policies can read, so that a call's
//! context carries only that (and the arguments are not read into
//! attributes no policy looks at).
//!
//! Cedar reads the context only through its variable, `context`. A policy
//! that reads `context.path.normal` or asks `context has path` reads the
//! attribute `path` of the context, and of it `normal` (or all of `path`);
//! a policy that uses `context` (or `context.args`) in any other way, as a
//! whole value, reads all of it. An attribute that no policy of the set
//! reads changes no decision of that set, nor any error a policy raises
//! (an evaluation error names the attribute it missed, never the others):
//! leaving it out of the context is only cheaper. The policies are read in
//! their JSON form (`Policy::to_json`); anything this module does not
//! recognise as a path from `context` that names `context` makes the whole
//! context needed, so a form it does not know can only keep more.

use std::collections::BTreeMap;

use cedar_policy::PolicySet;
use serde_json::Value;

/// What of a value the policies read: all of it, or some of its
/// attributes (each with what of it they read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// The whole value.
    All,
    /// Only these attributes of a record: any other value is kept whole.
    Attrs(BTreeMap<String, Need>),
}

/// The need of an attribute that is read whole.
static ALL: Need = Need::All;

impl Need {
    /// What `policies` read of the context.
    pub fn of(policies: &PolicySet) -> Need {
        let mut need = Need::Attrs(BTreeMap::new());
        for policy in policies.policies() {
            match policy.to_json() {
                Ok(json) => walk(&json, &mut need),
                Err(_) => return Need::All,
            }
            if need == Need::All {
                break;
            }
        }
        need
    }

    /// What the policies read of attribute `key` of this value: `None`
    /// when they never read it.
    pub fn get(&self, key: &str) -> Option<&Need> {
        match self {
            Need::All => Some(&ALL),
            Need::Attrs(attrs) => attrs.get(key),
        }
    }

    /// Whether the policies read attribute `key` (in part or whole).
    pub fn reads(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Notes that the policies read the value at `path` (whole).
    fn mark(&mut self, path: &[String]) {
        let Need::Attrs(attrs) = self else { return };
        match path.split_first() {
            None => *self = Need::All,
            Some((first, rest)) => {
                attrs.entry(first.clone()).or_insert_with(|| Need::Attrs(BTreeMap::new())).mark(rest)
            }
        }
    }
}

/// Notes in `need` every read of `context` in the JSON form of a policy
/// (or of any part of one).
fn walk(json: &Value, need: &mut Need) {
    match json {
        Value::Array(items) => items.iter().for_each(|item| walk(item, need)),
        Value::Object(map) => {
            if map.get("Var").and_then(Value::as_str) == Some("context") {
                // `context` as a whole value.
                need.mark(&[]);
                return;
            }
            for (key, value) in map {
                if key == "." || key == "has" {
                    if let Some(path) = read_path(value) {
                        need.mark(&path);
                        continue;
                    }
                }
                walk(value, need);
            }
        }
        _ => {}
    }
}

/// The attributes `context.a.b` reads, or `context.a has b` asks about
/// (`["a", "b"]`), from the operands of a `.` or `has` (`{"left": ...,
/// "attr": ...}`) whose left side is `context` or a path from it. With
/// `has a.b` (several attributes), the first one is read whole.
fn read_path(operands: &Value) -> Option<Vec<String>> {
    let operands = operands.as_object()?;
    let attr = match operands.get("attr")? {
        Value::String(attr) => attr.clone(),
        Value::Array(attrs) => attrs.first()?.as_str()?.to_owned(),
        _ => return None,
    };
    let mut path = context_path(operands.get("left")?)?;
    path.push(attr);
    Some(path)
}

/// The path from `context` an expression (in JSON form) is: `[]` for
/// `context`, `["a", "b"]` for `context.a.b`; `None` for anything else.
pub fn context_path(expr: &Value) -> Option<Vec<String>> {
    let expr = expr.as_object().filter(|expr| expr.len() == 1)?;
    if expr.get("Var").and_then(Value::as_str) == Some("context") {
        return Some(Vec::new());
    }
    let operands = expr.get(".")?;
    // `.` names one attribute.
    operands.get("attr")?.as_str()?;
    read_path(operands)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn need(text: &str) -> Need {
        Need::of(&PolicySet::from_str(text).unwrap())
    }

    fn attrs(pairs: &[(&str, Need)]) -> Need {
        Need::Attrs(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    #[test]
    fn paths_from_context_are_read_and_nothing_else() {
        assert_eq!(need("permit (principal, action, resource);"), attrs(&[]));
        assert_eq!(
            need(
                r#"permit (principal, action, resource) when {
                     context has path && context.path.normal like "/a/*" &&
                     context.args has path && context.args.path like "*..*"
                   };
                   forbid (principal, action, resource) when { context.is_subagent };"#
            ),
            attrs(&[
                ("path", Need::All),
                ("args", attrs(&[("path", Need::All)])),
                ("is_subagent", Need::All),
            ])
        );
        // `has a.b`: `a` is read whole.
        assert_eq!(
            need(r#"permit (principal, action, resource) when { context has a.b && context.a.b };"#),
            attrs(&[("a", Need::All)])
        );
        // Inside any other expression, a path is still a path.
        assert_eq!(
            need(
                r#"permit (principal, action, resource) when {
                     ["x"].contains(context.args.method) && resource.programs.containsAll(context.command.programs)
                   };"#
            ),
            attrs(&[
                ("args", attrs(&[("method", Need::All)])),
                ("command", attrs(&[("programs", Need::All)])),
            ])
        );
    }

    #[test]
    fn context_as_a_whole_value_is_read_whole() {
        assert_eq!(need(r#"permit (principal, action, resource) when { context == {} };"#), Need::All);
        assert_eq!(
            need(r#"permit (principal, action, resource) when { context.args == {"a": 1} };"#),
            attrs(&[("args", Need::All)])
        );
        assert_eq!(
            need(r#"permit (principal, action, resource) when { ({"a": context}).a has b };"#),
            Need::All
        );
        assert_eq!(
            need(r#"permit (principal, action, resource) when { (if true then context else {}).a };"#),
            Need::All
        );
        // A record literal's attribute is not the context's.
        assert_eq!(
            need(r#"permit (principal, action, resource) when { {"tool": context.tool}.tool == "x" };"#),
            attrs(&[("tool", Need::All)])
        );
        // Whole after in part, in part after whole: whole.
        assert_eq!(
            need(
                r#"permit (principal, action, resource) when { context.path.normal == "" };
                   permit (principal, action, resource) when { context.path == {} };
                   permit (principal, action, resource) when { context.path.lower == "" };"#
            ),
            attrs(&[("path", Need::All)])
        );
    }
}
