//! DeerFlow's built-in role-based authorization provider (name `rbac`),
//! `deerflow.authz.rbac:RbacAuthorizationProvider`, with its semantics and
//! its error wording.
//!
//! The config is one key, `roles`: each role maps resource keys (`tools`,
//! `models`, `skills`, `sandbox`, `mcp_servers`, `routes`, or any other
//! name) to `{allow: "*" | true | false | [names], deny: [names]}`. Deny
//! always wins; a missing `allow` allows everything not denied; a known role
//! with no policy for a resource is unrestricted for it. Everything is
//! checked when the provider is built: an unknown policy key (`alow`), a
//! `null` list, a request alias used as a config key (`tool` for `tools`)
//! are errors, never a silent grant.
//!
//! Deciding a tool call, the role is the request's `user_role` (guardhost's
//! `authorization:` section puts `default_role` there when the context has
//! none) and the target is the tool's name, on resource `tool`. A missing or
//! unknown role is an error, not a denial, so that `fail_closed` decides, as
//! in DeerFlow.
//!
//! This crate is both guardhost's built-in provider
//! (`builtin:RbacAuthorizationProvider`, or DeerFlow's class path) and a
//! provider library exporting the symbol `RbacAuthorizationProvider`.
//!
//! # Example
//!
//! ```
//! use guardhost_rbac::Rbac;
//! use serde_json::json;
//!
//! let rbac = Rbac::compile(&json!({
//!     "user": {"tools": {"allow": "*", "deny": ["update_agent"]}},
//!     "guest": {"tools": {"allow": ["web_search", "read_file"]}},
//! }))?;
//! assert!(rbac.authorize(Some("user"), "tool", "bash")?.allow);
//! let denied = rbac.authorize(Some("guest"), "tool", "bash")?;
//! assert_eq!(denied.message, "role 'guest' is denied 'bash' on resource 'tool'");
//! assert_eq!(rbac.filter(Some("guest"), "tool", &["bash", "read_file"])?, ["read_file"]);
//! # Ok::<(), String>(())
//! ```
//!
//! # Map
//!
//! One file: the compiled roles, [`Rbac`], and what they grant,
//! [`Authorized`]; the provider, [`struct@RbacAuthorizationProvider`], and its
//! config, [`RbacConfig`]. Its tests are in `tests.rs`.
#![forbid(unsafe_code)]

use std::collections::{BTreeSet, HashMap, HashSet};

use guardhost_abi::{Decision, Provider, ProviderError, Request};
use serde::Deserialize;
use serde_json::Value;

/// Request resource types and the config keys that hold their policies
/// (`tool` is configured under `tools`).
const RESOURCE_POLICY_KEYS: [(&str, &str); 6] = [
    ("tool", "tools"),
    ("model", "models"),
    ("skill", "skills"),
    ("sandbox", "sandbox"),
    ("mcp_server", "mcp_servers"),
    ("route", "routes"),
];

/// The keys a resource policy may hold.
const POLICY_KEYS: [&str; 2] = ["allow", "deny"];

/// The config key a request's resource type is looked up under.
fn policy_key(resource: &str) -> &str {
    RESOURCE_POLICY_KEYS.iter().find(|(alias, _)| *alias == resource).map_or(resource, |(_, key)| key)
}

/// What Python calls the type of a JSON value, as DeerFlow's messages do.
fn python_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `repr` of a string (`'bash'`).
fn repr(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Python's `repr` of a JSON value, as far as DeerFlow's messages need it.
fn repr_value(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => repr(s),
        other => other.to_string(),
    }
}

/// A sorted list of names as Python prints it: `['admin', 'user']`.
fn list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let sorted: BTreeSet<&str> = names.into_iter().collect();
    format!("[{}]", sorted.into_iter().map(repr).collect::<Vec<_>>().join(", "))
}

/// `value` when it is a non-empty string; DeerFlow's boundary error if not.
fn non_empty<'a>(value: Option<&'a str>, field: &str) -> Result<&'a str, String> {
    match value {
        Some(text) if !text.is_empty() => Ok(text),
        Some(text) => Err(format!("{field} must be a non-empty string, got {}", repr(text))),
        None => Err(format!("{field} must be a non-empty string, got None")),
    }
}

/// One role's policy for one resource type, checked and compiled.
#[derive(Debug, Clone)]
struct Policy {
    /// `None`: every name not denied.
    allowed: Option<HashSet<String>>,
    denied: HashSet<String>,
}

impl Policy {
    fn is_allowed(&self, target: &str) -> bool {
        !self.denied.contains(target) && self.allowed.as_ref().is_none_or(|allowed| allowed.contains(target))
    }

    fn compile(role: &str, resource: &str, policy: &serde_json::Map<String, Value>) -> Result<Self, String> {
        let at = format!("role '{role}' resource '{resource}'");
        let unknown: Vec<&str> =
            policy.keys().map(String::as_str).filter(|k| !POLICY_KEYS.contains(k)).collect();
        if !unknown.is_empty() {
            return Err(format!(
                "{at}: unknown policy keys {}; supported: {}",
                list(unknown),
                list(POLICY_KEYS)
            ));
        }
        let names = |key: &str, items: &[Value]| -> Result<HashSet<String>, String> {
            items
                .iter()
                .map(|item| match item {
                    Value::String(s) if !s.is_empty() => Ok(s.clone()),
                    other => Err(format!(
                        "{at}: {key} list contains non-string or empty item {}",
                        repr_value(other)
                    )),
                })
                .collect()
        };
        let allowed = match policy.get("allow") {
            None | Some(Value::Bool(true)) => None,
            Some(Value::Null) => {
                return Err(format!("{at}: allow must not be null; omit the key, or use '*' / bool / list"))
            }
            Some(Value::Bool(false)) => Some(HashSet::new()),
            Some(Value::String(s)) if s == "*" => None,
            Some(Value::String(s)) => return Err(format!("{at}: allow string must be '*', got {}", repr(s))),
            Some(Value::Array(items)) => Some(names("allow", items)?),
            Some(other) => {
                return Err(format!(
                    "{at}: allow must be '*', bool, or list of strings, got {}",
                    python_type(other)
                ))
            }
        };
        let denied = match policy.get("deny") {
            None => HashSet::new(),
            Some(Value::Null) => {
                return Err(format!("{at}: deny must not be null; omit the key for no deny list"))
            }
            Some(Value::Array(items)) => names("deny", items)?,
            Some(other) => {
                return Err(format!("{at}: deny must be a list of strings, got {}", python_type(other)))
            }
        };
        Ok(Policy { allowed, denied })
    }
}

/// An RBAC decision, before it becomes the ABI's [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized {
    /// Whether the principal may.
    pub allow: bool,
    /// `authz.allowed`, `authz.denied` or `authz.no_policy`.
    pub code: &'static str,
    /// The reason's message (empty for `authz.allowed`).
    pub message: String,
    /// `rbac:allow`, `rbac:deny` or `rbac:unrestricted`.
    pub policy_id: &'static str,
}

/// A compiled role → resource → policy table.
#[derive(Debug, Clone)]
pub struct Rbac {
    policies: HashMap<(String, String), Policy>,
    roles: HashSet<String>,
}

impl Rbac {
    /// Checks and compiles the `roles` mapping, with DeerFlow's errors.
    pub fn compile(roles: &Value) -> Result<Self, String> {
        let Value::Object(roles) = roles else {
            return Err(format!("roles must be a dict, got {}", python_type(roles)));
        };
        let mut policies = HashMap::new();
        for (role, config) in roles {
            if role.is_empty() {
                return Err(format!("role name must be a non-empty string, got {}", repr(role)));
            }
            let Value::Object(config) = config else {
                return Err(format!("role '{role}' config must be a dict, got {}", python_type(config)));
            };
            for (resource, policy) in config {
                if resource.is_empty() {
                    return Err(format!("role '{role}' has invalid resource key {}", repr(resource)));
                }
                let mapped = policy_key(resource);
                if mapped != resource {
                    return Err(format!(
                        "role '{role}' resource key '{resource}' is a reserved request alias; use '{mapped}' in RBAC config"
                    ));
                }
                let Value::Object(policy) = policy else {
                    return Err(format!(
                        "role '{role}' resource '{resource}' must be a dict, got {}",
                        python_type(policy)
                    ));
                };
                policies.insert((role.clone(), resource.clone()), Policy::compile(role, resource, policy)?);
            }
        }
        Ok(Rbac { policies, roles: roles.keys().cloned().collect() })
    }

    /// The roles the table defines.
    pub fn roles(&self) -> impl Iterator<Item = &str> {
        self.roles.iter().map(String::as_str)
    }

    /// An error unless `role` is defined; `field` names it in the message
    /// (`role`, or `authorization.default_role`).
    pub fn validate_role(&self, role: &str, field: &str) -> Result<(), String> {
        let role = non_empty(Some(role), field)?;
        if self.roles.contains(role) {
            return Ok(());
        }
        let known = list(self.roles());
        Err(if field == "role" {
            format!("Unknown role '{role}'; known roles: {known}")
        } else {
            format!("{field} '{role}' is not defined; known roles: {known}")
        })
    }

    /// The host's check of `authorization.default_role` against a
    /// provider config's `roles`, as DeerFlow makes it when it builds the
    /// provider: an error when the table compiles and lacks the role (a
    /// table that does not compile fails the constructor instead).
    pub fn check_default_role(config: &serde_json::Map<String, Value>, role: &str) -> Result<(), String> {
        let Some(roles) = config.get("roles") else { return Ok(()) };
        let Ok(rbac) = Rbac::compile(roles) else { return Ok(()) };
        rbac.validate_role(role, "authorization.default_role")
    }

    /// The policy for `role` on `resource`; `None` when unrestricted.
    fn policy(&self, role: Option<&str>, resource: &str, field: &str) -> Result<Option<&Policy>, String> {
        let role = match role {
            Some(role) if !role.is_empty() => role,
            _ => return Err("Principal has no role; cannot evaluate RBAC policy".into()),
        };
        self.validate_role(role, "role")?;
        let resource = non_empty(Some(resource), field)?;
        Ok(self.policies.get(&(role.to_owned(), policy_key(resource).to_owned())))
    }

    /// Whether `role` may act on `target` of type `resource` (`tool`,
    /// `model` ...). A missing or unknown role, or an empty resource or
    /// target, is an error.
    pub fn authorize(&self, role: Option<&str>, resource: &str, target: &str) -> Result<Authorized, String> {
        let policy = self.policy(role, resource, "resource")?;
        let target = non_empty(Some(target), "target")?;
        let role = role.unwrap_or_default();
        Ok(match policy {
            None => Authorized {
                allow: true,
                code: "authz.no_policy",
                message: "no policy configured".into(),
                policy_id: "rbac:unrestricted",
            },
            Some(policy) if policy.is_allowed(target) => Authorized {
                allow: true,
                code: "authz.allowed",
                message: String::new(),
                policy_id: "rbac:allow",
            },
            Some(_) => Authorized {
                allow: false,
                code: "authz.denied",
                message: format!("role '{role}' is denied '{target}' on resource '{resource}'"),
                policy_id: "rbac:deny",
            },
        })
    }

    /// The candidates `role` may see, in their order, duplicates kept;
    /// the same errors as [`Rbac::authorize`], and an empty candidate is
    /// one.
    pub fn filter<'c>(
        &self,
        role: Option<&str>,
        resource_type: &str,
        candidates: &[&'c str],
    ) -> Result<Vec<&'c str>, String> {
        let policy = self.policy(role, resource_type, "resource_type")?;
        for (index, candidate) in candidates.iter().enumerate() {
            non_empty(Some(candidate), &format!("candidates[{index}]"))?;
        }
        Ok(candidates.iter().copied().filter(|c| policy.is_none_or(|p| p.is_allowed(c))).collect())
    }
}

/// The constructor's one keyword. `framework` is not among them, so the
/// host never injects it (DeerFlow does not either).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RbacConfig {
    /// Role → resource key → `{allow, deny}`.
    #[serde(default)]
    pub roles: Option<Value>,
}

/// The provider: [`Rbac`] deciding tool calls by the request's role.
#[derive(Debug, Clone)]
pub struct RbacAuthorizationProvider {
    rbac: Rbac,
}

impl RbacAuthorizationProvider {
    /// The compiled table.
    pub fn rbac(&self) -> &Rbac {
        &self.rbac
    }
}

impl Provider for RbacAuthorizationProvider {
    const NAME: &'static str = "rbac";
    // Its messages quote the role and the tool's name only: audited as
    // written.
    const MESSAGES_QUOTE_INPUT: bool = false;
    type Config = RbacConfig;

    fn new(config: RbacConfig) -> Result<Self, ProviderError> {
        let roles = config
            .roles
            .ok_or_else(|| ProviderError::error("missing required provider config key 'roles'"))?;
        Ok(RbacAuthorizationProvider { rbac: Rbac::compile(&roles).map_err(ProviderError::error)? })
    }

    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
        let decided = self
            .rbac
            .authorize(request.user_role(), "tool", request.tool_name())
            .map_err(ProviderError::error)?;
        let decision = if decided.allow { Decision::allow() } else { Decision::deny() };
        Ok(decision.with_reason(decided.code, decided.message).with_policy_id(decided.policy_id))
    }
}

guardhost_abi::export_provider!(RbacAuthorizationProvider, RbacAuthorizationProvider);

#[cfg(test)]
mod tests;
