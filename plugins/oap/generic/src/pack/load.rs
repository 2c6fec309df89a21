//! A pack read from its `policy.json`: each part checked, the rules'
//! conditions parsed and their names bound once, and what was loaded.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::assurance::{assurance_rank, Assurance};
use crate::bind;
use crate::error::{err, PackError};
use crate::parser;
use crate::schema::ContextSchema;

use super::{GenericPack, Rule, RuleInfo, RuleSupport, SPEC_CODE_ALIASES};

fn string_list(doc: &Map<String, Value>, key: &str, id: &str) -> Result<Option<Vec<String>>, PackError> {
    match doc.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) if !s.is_empty() => Ok(s.clone()),
                _ => Err(err(id, format!("`{key}` must be an array of non-empty strings"))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(err(id, format!("`{key}` must be an array of non-empty strings"))),
    }
}

fn level(v: &Value, id: &str, what: &str) -> Result<(u8, String), PackError> {
    match v.as_str().and_then(|s| assurance_rank(s).map(|r| (r, s.to_owned()))) {
        Some(l) => Ok(l),
        None => Err(err(id, format!("{what} {v} is not an assurance level (L0 to L4)"))),
    }
}

impl GenericPack {
    /// Parses a pack's `policy.json`.
    pub fn from_json(text: &str) -> Result<Self, PackError> {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| PackError(format!("policy pack is not valid JSON: {e}")))?;
        let obj = doc.as_object().ok_or_else(|| err("", "the file must hold a JSON object"))?;
        let id = match obj.get("id") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => return Err(err("", "field `id` must be a non-empty string")),
        };
        let requires_capabilities = string_list(obj, "requires_capabilities", &id)?
            .ok_or_else(|| err(&id, "field `requires_capabilities` is missing"))?;
        let min_assurance = match obj.get("min_assurance") {
            None | Some(Value::Null) => None,
            Some(v) => Some(level(v, &id, "`min_assurance`")?),
        };
        let required_fields = string_list(obj, "required_fields", &id)?.unwrap_or_default();
        let context_schema = ContextSchema::compile(&id, obj.get("required_context"))?;
        let mut declared: HashSet<String> = required_fields.iter().cloned().collect();
        declared.extend(string_list(obj, "optional_fields", &id)?.unwrap_or_default());
        let props = obj.get("required_context").and_then(|c| c.get("properties")).and_then(Value::as_object);
        declared.extend(props.into_iter().flat_map(|p| p.keys().cloned()));
        let mut assurance_rules = Vec::new();
        if let Some(rules) = obj.get("assurance_rules").filter(|v| !v.is_null()) {
            let rules = rules.as_array().ok_or_else(|| err(&id, "`assurance_rules` must be an array"))?;
            for (i, r) in rules.iter().enumerate() {
                let lte = r.get("lte_minor").and_then(Value::as_f64).filter(|n| n.is_finite());
                let (Some(lte), Some(lvl)) = (lte, r.get("min_level")) else {
                    return Err(err(
                        &id,
                        format!("`assurance_rules[{i}]` needs a number `lte_minor` and a `min_level`"),
                    ));
                };
                assurance_rules.push((lte, level(lvl, &id, &format!("`assurance_rules[{i}].min_level`"))?.1));
            }
            assurance_rules.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let raw_rules = match obj.get("evaluation_rules") {
            Some(Value::Array(r)) => r,
            Some(_) => return Err(err(&id, "`evaluation_rules` must be an array")),
            None => return Err(err(&id, "field `evaluation_rules` is missing")),
        };
        let mut rules = Vec::with_capacity(raw_rules.len());
        let mut parsed = Vec::with_capacity(raw_rules.len());
        for (i, r) in raw_rules.iter().enumerate() {
            let r = r
                .as_object()
                .ok_or_else(|| err(&id, format!("`evaluation_rules[{i}]` must be an object")))?;
            let text = |k: &str| r.get(k).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
            let name =
                text("name").ok_or_else(|| err(&id, format!("`evaluation_rules[{i}]` has no `name`")))?;
            let pack_code = text("deny_code")
                .ok_or_else(|| err(&id, format!("`evaluation_rules[{i}]` (`{name}`) has no `deny_code`")))?;
            let code =
                SPEC_CODE_ALIASES.iter().find(|(from, _)| *from == pack_code).map_or(pack_code, |(_, to)| to);
            let condition = text("condition").map(str::to_owned);
            let (support, expr) = if r.get("type").and_then(Value::as_str) == Some("custom_validator") {
                (RuleSupport::CustomValidator(text("validator").unwrap_or("(unnamed)").to_owned()), None)
            } else {
                match condition.as_deref().map(parser::parse) {
                    Some(Ok(e)) => (RuleSupport::Evaluated, Some(e)),
                    Some(Err(why)) => {
                        (RuleSupport::Unsupported(format!("cannot parse the condition: {why}")), None)
                    }
                    None => (RuleSupport::Unsupported("no `condition`".into()), None),
                }
            };
            parsed.push(expr);
            rules.push(Rule {
                info: RuleInfo {
                    name: name.to_owned(),
                    deny_code: code.to_owned(),
                    pack_deny_code: pack_code.to_owned(),
                    condition,
                    support,
                },
                expr: None,
                message: text("message").map(str::to_owned),
                description: text("description").map(str::to_owned),
            });
        }
        let bound = bind::bind_pack(parsed, &declared);
        let stateful = !bound.vars.is_empty();
        for (rule, expr) in rules.iter_mut().zip(bound.exprs) {
            rule.expr = expr;
        }
        let mut limit_scopes = requires_capabilities.clone();
        let base = match id.rsplit_once('.') {
            Some((base, v))
                if v.len() > 1 && v.starts_with('v') && v[1..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                base
            }
            _ => id.as_str(),
        };
        if !limit_scopes.iter().any(|s| s == base) {
            limit_scopes.push(base.to_owned());
        }
        Ok(GenericPack {
            id,
            requires_capabilities,
            doc,
            assurance: Assurance { min: min_assurance, rules: assurance_rules },
            required_fields,
            context_schema,
            limit_scopes,
            rules,
            state_vars: bound.vars,
            updates: bound.updates,
            stateful,
        })
    }

    /// The pack's rules, in order, with whether each is evaluated.
    pub fn rules(&self) -> impl Iterator<Item = &RuleInfo> {
        self.rules.iter().map(|r| &r.info)
    }

    /// The stateful names the pack uses (see [`crate::pack`], *State*).
    pub fn state_names(&self) -> impl Iterator<Item = &str> {
        self.state_vars.iter().map(|v| &*v.name)
    }

    /// Whether evaluations read or write [`GenericState`](crate::GenericState).
    pub fn is_stateful(&self) -> bool {
        self.stateful
    }
}
