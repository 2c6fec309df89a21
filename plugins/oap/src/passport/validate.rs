//! A passport document validated: the fields evaluation needs, typed, the
//! schema's other fields type-checked when present, and the limits as
//! APort's evaluator reads them (flat keys, capability aliases).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::RwLock;

use serde_json::{Map, Value};

/// The spec version this provider evaluates.
pub const SPEC_VERSION: &str = "oap/1.0";

/// A passport's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not yet in force.
    Draft,
    /// In force.
    Active,
    /// Stopped for now (the kill switch).
    Suspended,
    /// Stopped for good.
    Revoked,
}

impl Status {
    fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "draft" => Status::Draft,
            "active" => Status::Active,
            "suspended" => Status::Suspended,
            "revoked" => Status::Revoked,
            _ => return None,
        })
    }

    /// Its name in the passport.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Draft => "draft",
            Status::Active => "active",
            Status::Suspended => "suspended",
            Status::Revoked => "revoked",
        }
    }
}

/// A validated passport. The fields the checks use are typed; the whole
/// document stays available for generic policy packs.
#[derive(Debug)]
pub struct Passport {
    /// `passport_id`.
    pub id: String,
    /// `owner_id`.
    pub owner_id: String,
    /// `spec_version` (checked at evaluation, not at load: an unsupported
    /// version is a denial, `oap.passport_version_mismatch`, not a broken
    /// file).
    pub spec_version: String,
    /// `status`.
    pub status: Status,
    /// `assurance_level`.
    pub assurance_level: String,
    /// `capabilities[].id`.
    pub capabilities: Vec<String>,
    /// `limits`, keyed by capability id (values of any type: APort's
    /// generator also writes flat keys here, see [`FLAT_LIMITS`]).
    pub limits: Map<String, Value>,
    /// The limits of each pack in [`FLAT_LIMITS`] that has no object of its
    /// own in `limits`, gathered from the flat keys (built once per version
    /// of the passport).
    flat_limits: HashMap<&'static str, Map<String, Value>>,
    /// The whole document.
    pub document: Value,
    /// Paths named in the limits (`allowed_paths`, `blocked_paths`),
    /// resolved once per passport version: resolving follows symlinks,
    /// which costs system calls.
    resolved_paths: RwLock<HashMap<String, PathBuf>>,
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The fields evaluation needs: a passport without one is unusable.
const REQUIRED: &[(&str, &str)] =
    &[("spec_version", "string"), ("status", "string"), ("capabilities", "list"), ("limits", "object")];

/// The schema's other required fields. APort's own test passports leave
/// some out (`regions`, `created_at`, `updated_at`, `version`) and its
/// evaluator accepts them, so these are type-checked only when present.
const TYPED: &[(&str, &str)] = &[
    ("passport_id", "string"),
    ("kind", "string"),
    ("owner_id", "string"),
    ("owner_type", "string"),
    ("assurance_level", "string"),
    ("regions", "list"),
    ("created_at", "string"),
    ("updated_at", "string"),
    ("version", "string"),
];

/// Packs whose limits APort's evaluator also reads from flat keys at the top
/// of `limits` when the passport has no `limits[<pack>]` object: its
/// generator (`aport setup`, `aport-create-passport.sh`) writes messaging
/// limits that way (`"msgs_per_min": 5, "allowed_recipients": ["*"]`), and
/// its API accepts the others so. Per pack, the keys it gathers.
pub const FLAT_LIMITS: &[(&str, &[&str])] = &[
    ("messaging.message.send", &["msgs_per_min", "msgs_per_day", "allowed_recipients", "approval_required"]),
    (
        "code.repository.merge",
        &[
            "max_prs_per_day",
            "max_merges_per_day",
            "max_pr_size_kb",
            "allowed_repos",
            "allowed_base_branches",
            "allowed_paths",
            "require_review",
            "daily_repo_pushes",
        ],
    ),
    ("code.release.publish", &["allowed_repos", "allowed_extensions"]),
    ("mcp.tool.execute", &["allowed_servers", "allowed_tools", "allowed_tool_prefixes", "max_timeout"]),
    (
        "media.image.generate",
        &[
            "allowed_providers",
            "max_prompt_length",
            "max_referenced_images",
            "max_output_images",
            "allowed_output_formats",
        ],
    ),
    (
        "web.fetch",
        &[
            "allowed_domains",
            "blocked_domains",
            "allowed_methods",
            "max_requests_per_min",
            "max_requests_per_minute",
        ],
    ),
    (
        "web.browser",
        &[
            "allowed_domains",
            "blocked_domains",
            "allowed_actions",
            "max_screenshots_per_hour",
            "allow_form_submission",
        ],
    ),
];

/// Capabilities APort's evaluator accepts for another: a pack requiring the
/// first is satisfied by a passport listing the second.
const CAPABILITY_ALIASES: &[(&str, &str)] =
    &[("messaging.send", "messaging.message.send"), ("repo.release", "release")];

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "string" => value.is_string(),
        "list" => value.is_array(),
        _ => value.is_object(),
    }
}

impl Passport {
    /// Validates a passport document. Fields the schema does not list
    /// (`agent_id`, `never_expires`, `expires_at`, `metadata` ...) are
    /// accepted. The error names the first field that is wrong.
    pub fn from_value(document: Value) -> Result<Passport, String> {
        let Value::Object(map) = &document else {
            return Err(format!("the document must be a JSON object, found {}", json_type(&document)));
        };
        if let Some((field, _)) = REQUIRED.iter().find(|(field, _)| !map.contains_key(*field)) {
            return Err(format!("required field `{field}` is missing"));
        }
        for (field, expected) in REQUIRED.iter().chain(TYPED) {
            if let Some(value) = map.get(*field).filter(|v| !has_type(v, expected)) {
                let article = if expected.starts_with('o') { "an" } else { "a" };
                return Err(format!(
                    "field `{field}` must be {article} {expected}, found {}",
                    json_type(value)
                ));
            }
        }
        let text = |field: &str| map.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        let status = Status::parse(&text("status")).ok_or_else(|| {
            format!(
                "field `status` is {:?}; it must be one of draft, active, suspended, revoked",
                text("status")
            )
        })?;
        let mut capabilities = Vec::new();
        for (i, capability) in map["capabilities"].as_array().into_iter().flatten().enumerate() {
            match capability.get("id") {
                Some(Value::String(id)) if !id.is_empty() => capabilities.push(id.clone()),
                Some(other) => {
                    return Err(format!(
                        "field `capabilities[{i}].id` must be a non-empty string, found {}",
                        json_type(other)
                    ))
                }
                None => return Err(format!("field `capabilities[{i}].id` is missing")),
            }
            if let Some(params) = capability.get("params") {
                if !params.is_object() {
                    return Err(format!(
                        "field `capabilities[{i}].params` must be an object, found {}",
                        json_type(params)
                    ));
                }
            }
        }
        // As in APort's evaluator, an entry of `limits` may be of any type:
        // its generator writes flat keys (a number, a list) next to the
        // per-capability objects. A pack reads `limits[<pack>]` when it is
        // an object, else its flat keys ([`FLAT_LIMITS`]), else nothing.
        let limits = map["limits"].as_object().cloned().unwrap_or_default();
        let flat_limits = FLAT_LIMITS
            .iter()
            .filter(|(pack, _)| !limits.get(*pack).is_some_and(Value::is_object))
            .filter_map(|(pack, keys)| {
                let found: Map<String, Value> = keys
                    .iter()
                    .filter_map(|k| {
                        limits.get(*k).filter(|v| !v.is_null()).map(|v| ((*k).to_owned(), v.clone()))
                    })
                    .collect();
                (!found.is_empty()).then_some((*pack, found))
            })
            .collect();
        if let Some((i, region)) = map
            .get("regions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .find(|(_, r)| !r.is_string())
        {
            return Err(format!("field `regions[{i}]` must be a string, found {}", json_type(region)));
        }
        let id = text("passport_id");
        Ok(Passport {
            id: if id.is_empty() { "(no passport_id)".to_owned() } else { id },
            owner_id: text("owner_id"),
            spec_version: text("spec_version"),
            status,
            assurance_level: text("assurance_level"),
            capabilities,
            limits,
            flat_limits,
            document,
            resolved_paths: RwLock::default(),
        })
    }

    /// `path` (from this passport's limits) resolved with `resolve`, cached
    /// for as long as this version of the passport is in use.
    pub fn resolved_path(&self, path: &str, resolve: impl FnOnce(&str) -> PathBuf) -> PathBuf {
        if let Some(found) = self.resolved_paths.read().unwrap_or_else(|e| e.into_inner()).get(path) {
            return found.clone();
        }
        let resolved = resolve(path);
        self.resolved_paths
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_owned(), resolved.clone());
        resolved
    }

    /// Whether the passport lists a capability, or one APort accepts for it
    /// (`messaging.message.send` for `messaging.send`, `release` for
    /// `repo.release`).
    pub fn has_capability(&self, id: &str) -> bool {
        let alias = CAPABILITY_ALIASES.iter().find(|(wanted, _)| *wanted == id).map(|(_, alias)| *alias);
        self.capabilities.iter().any(|c| c == id || Some(c.as_str()) == alias)
    }

    /// The limits of one capability: `limits[<id>]` when it is an object,
    /// else, for the packs of [`FLAT_LIMITS`], the flat keys at the top of
    /// `limits`; `None` when the passport sets neither.
    pub fn limits_of(&self, capability: &str) -> Option<&Map<String, Value>> {
        self.limits.get(capability).and_then(Value::as_object).or_else(|| self.flat_limits.get(capability))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn valid() -> Value {
        json!({
            "passport_id": "p-1", "kind": "template", "spec_version": "oap/1.0", "owner_id": "o",
            "owner_type": "org", "status": "active", "assurance_level": "L2",
            "capabilities": [{"id": "system.command.execute", "params": {}}],
            "limits": {"system.command.execute": {"allowed_commands": ["ls"]}},
            "regions": ["US"], "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "version": "1.0.0", "never_expires": true
        })
    }

    #[test]
    fn a_valid_passport_with_extra_fields_loads() {
        let p = Passport::from_value(valid()).unwrap();
        assert_eq!(p.status, Status::Active);
        assert!(p.has_capability("system.command.execute"));
        assert_eq!(p.limits_of("system.command.execute").unwrap()["allowed_commands"], json!(["ls"]));
    }

    #[test]
    fn errors_name_the_field() {
        let cases: &[(&str, Value, &str)] = &[
            ("status", Value::Null, "field `status` must be a string, found null"),
            ("status", json!("paused"), "field `status` is \"paused\"; it must be one of"),
            ("capabilities", json!([{"x": 1}]), "field `capabilities[0].id` is missing"),
            (
                "capabilities",
                json!([{"id": "a", "params": 3}]),
                "field `capabilities[0].params` must be an object",
            ),
            ("limits", json!([]), "field `limits` must be an object, found a list"),
            ("regions", json!(["US", 1]), "field `regions[1]` must be a string, found a number"),
        ];
        for (field, value, expected) in cases {
            let mut doc = valid();
            doc[*field] = value.clone();
            let error = Passport::from_value(doc).unwrap_err();
            assert!(error.starts_with(expected), "{field}: {error}");
        }
        let mut doc = valid();
        doc.as_object_mut().unwrap().remove("limits");
        assert_eq!(Passport::from_value(doc).unwrap_err(), "required field `limits` is missing");
        let mut doc = valid();
        for field in ["regions", "created_at", "updated_at", "version", "passport_id"] {
            doc.as_object_mut().unwrap().remove(field);
        }
        assert_eq!(Passport::from_value(doc).unwrap().id, "(no passport_id)");
        assert!(Passport::from_value(json!([1])).unwrap_err().contains("must be a JSON object"));
    }

    /// A passport as APort's generator writes it for DeerFlow (`aport setup
    /// --framework deerflow`): messaging limits as flat keys, a number and a
    /// list among the per-capability objects, an empty object for sessions.
    pub(crate) fn generated() -> Value {
        json!({
            "passport_id": "0b6c2a8e-generated", "agent_id": "0b6c2a8e-generated", "kind": "template",
            "spec_version": "oap/1.0", "owner_id": "dev@example.com", "owner_type": "user",
            "assurance_level": "L0", "status": "active",
            "capabilities": [{"id": "repo.pr.create"}, {"id": "repo.merge"}, {"id": "system.command.execute"},
                             {"id": "messaging.send"}, {"id": "data.file.read"}, {"id": "data.file.write"},
                             {"id": "web.fetch"}, {"id": "agent.session.create"}, {"id": "mcp.tool.execute"}],
            "limits": {
                "code.repository.merge": {"max_prs_per_day": 10, "max_merges_per_day": 5, "max_pr_size_kb": 500,
                                          "allowed_repos": ["*"], "allowed_base_branches": ["*"], "require_review": false},
                "system.command.execute": {"allowed_commands": ["*"],
                                           "blocked_patterns": ["rm -rf", "sudo", "chmod 777", "dd if=", "mkfs"]},
                "msgs_per_min": 5, "msgs_per_day": 100, "allowed_recipients": ["*"], "approval_required": false,
                "data.file.read": {"allowed_paths": ["*"], "max_file_size_mb": 100},
                "data.file.write": {"allowed_paths": ["*"], "max_file_size_mb": 50},
                "web.fetch": {"allowed_domains": ["*"], "blocked_domains": [], "max_requests_per_min": 60},
                "agent.session.create": {},
                "mcp.tool.execute": {"allowed_servers": ["*"]}
            },
            "regions": ["US", "CA"],
            "metadata": {"name": "DeerFlow Agent", "created_by": "aport-create-passport.sh"},
            "never_expires": true, "created_at": "2026-11-01T00:00:00Z", "updated_at": "2026-11-01T00:00:00Z",
            "version": "1.0.0"
        })
    }

    #[test]
    fn a_generated_passport_loads_with_flat_limits_as_aport_reads_them() {
        let p = Passport::from_value(generated()).unwrap();
        let messaging = p.limits_of("messaging.message.send").unwrap();
        assert_eq!(messaging["msgs_per_min"], json!(5));
        assert_eq!(messaging["allowed_recipients"], json!(["*"]));
        assert_eq!(messaging.len(), 4);
        // A pack with an object of its own reads only that object.
        assert_eq!(p.limits_of("web.fetch").unwrap()["max_requests_per_min"], json!(60));
        assert!(!p.limits_of("web.fetch").unwrap().contains_key("allowed_recipients"));
        // Flat keys serve only the packs APort gathers them for.
        assert!(p.limits_of("msgs_per_min").is_none());
        assert!(p.limits_of("system.command.execute").unwrap().contains_key("blocked_patterns"));
        assert!(p.limits_of("web.browser").is_none());
        assert!(p.limits_of("agent.session.create").unwrap().is_empty());
        // APort's capability aliases.
        assert!(p.has_capability("messaging.send"));
        let mut doc = generated();
        doc["capabilities"] = json!([{"id": "messaging.message.send"}, {"id": "release"}]);
        let p = Passport::from_value(doc).unwrap();
        assert!(p.has_capability("messaging.send") && p.has_capability("repo.release"));
        assert!(!p.has_capability("messaging.message") && !p.has_capability("web.fetch"));
        // A nested object wins over flat keys.
        let mut doc = generated();
        doc["limits"]["messaging.message.send"] = json!({"allowed_recipients": ["ops"]});
        let p = Passport::from_value(doc).unwrap();
        assert_eq!(p.limits_of("messaging.message.send").unwrap().len(), 1);
    }
}
