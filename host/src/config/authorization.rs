//! DeerFlow's `authorization:` section: the guard asked before the
//! guardrails, with its own `fail_closed` and the role given to callers
//! without one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ConfigError;
use super::lax::lax_booleans_in;
use super::secrets::resolve_env;
use super::types::{default_true, ProviderSpec};
use crate::json::json_type;

/// The `authorization:` section, as DeerFlow's `AuthorizationConfig` reads
/// it, and `infrastructure_tools`, guardhost's way to name the framework
/// tools DeerFlow lets through (`authz.infrastructure_tool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationConfig {
    /// Ask the authorization provider before every tool call (default
    /// `false`).
    #[serde(default)]
    pub enabled: bool,
    /// Block the call when the provider errors, an unknown role among
    /// other causes (default `true`).
    #[serde(default = "default_true")]
    pub fail_closed: bool,
    /// The role of a caller whose context has no `user_role` (or an empty
    /// one), default `user`. An unknown role is not replaced.
    #[serde(default = "default_role")]
    pub default_role: String,
    /// The provider: `use:` (DeerFlow's
    /// `deerflow.authz.rbac:RbacAuthorizationProvider`, guardhost's
    /// `builtin:RbacAuthorizationProvider`, or a library) and `config:`;
    /// the other keys of a guardrail provider (`isolation`, `timeout_ms`,
    /// `sha256` ...) work here too.
    #[serde(default)]
    pub provider: Option<ProviderSpec>,
    /// Tools allowed without asking the provider, with reason
    /// `authz.infrastructure_tool`: framework tools made from an
    /// already-authorized set (DeerFlow's `tool_search`). Exact names.
    #[serde(default)]
    pub infrastructure_tools: Vec<String>,
}

fn default_role() -> String {
    "user".into()
}

impl Default for AuthorizationConfig {
    fn default() -> Self {
        AuthorizationConfig {
            enabled: false,
            fail_closed: true,
            default_role: default_role(),
            provider: None,
            infrastructure_tools: Vec::new(),
        }
    }
}

/// Reads the `authorization:` value of a document (absent: disabled), its
/// `$ENV_VAR` strings resolved as in `guardrails:`.
pub(super) fn read_authorization(
    value: Option<Value>,
    origin: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<AuthorizationConfig, ConfigError> {
    let section_error = |message: String| ConfigError::Authorization { origin: origin.to_owned(), message };
    let mut value =
        match value {
            None => return Ok(AuthorizationConfig::default()),
            Some(Value::Object(map)) => Value::Object(map),
            Some(Value::Null) => return Err(section_error(
                "`authorization` has nothing under it (null); indent its keys under it (`enabled: true`, \
                 `provider:` ...), or remove it to run without authorization"
                    .into(),
            )),
            Some(other) => {
                return Err(section_error(format!(
            "`authorization` must be a mapping of its keys (enabled, fail_closed, default_role, provider), \
                 found {}",
            json_type(&other)
        )))
            }
        };
    resolve_env(&mut value, "authorization", lookup).map_err(|(key, var)| ConfigError::MissingEnvVar {
        origin: origin.to_owned(),
        key,
        var,
    })?;
    lax_booleans_in(&mut value, "authorization", origin);
    let config: AuthorizationConfig = guardhost_abi::deserialize_config(value).map_err(section_error)?;
    if config.default_role.is_empty() {
        return Err(section_error(
            "`default_role` is empty; name the role callers without one get (DeerFlow's default is `user`)"
                .into(),
        ));
    }
    if let Some(spec) = &config.provider {
        spec.validate().map_err(section_error)?;
        let chain_keys = [
            ("name", spec.name.is_some()),
            ("tools", !spec.tools.is_empty()),
            ("except_tools", !spec.except_tools.is_empty()),
            ("fail_closed", spec.fail_closed.is_some()),
            ("mode", spec.mode.is_some()),
        ];
        if let Some((key, _)) = chain_keys.iter().find(|(_, set)| *set) {
            return Err(section_error(format!(
                "`provider.{key}` is a key of a `guardrails:` chain entry; the authorization provider decides \
                 every call (set `fail_closed` on the section, and list framework tools to let through in \
                 `infrastructure_tools`)"
            )));
        }
    } else if config.enabled {
        // DeerFlow's resolve_authorization_provider raises this.
        return Err(section_error(
            "authorization.enabled is true but no provider is configured; set authorization.provider.use to \
             a class path (`deerflow.authz.rbac:RbacAuthorizationProvider`, or a provider library)"
                .into(),
        ));
    }
    if config.infrastructure_tools.iter().any(|t| t.is_empty()) {
        return Err(section_error("`infrastructure_tools` holds an empty name; list tool names".into()));
    }
    Ok(config)
}
