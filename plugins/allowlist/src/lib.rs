//! The allowlist guardrail provider (name `allowlist`): allows or denies a
//! tool call by the tool's name alone.
//!
//! This crate is both guardhost's built-in provider (linked statically, named
//! `builtin:AllowlistProvider` in YAML) and a reference provider library
//! exporting the symbol `AllowlistProvider`, so the two paths run the very
//! same code.
//!
//! Rules, in order:
//! 1. `allowed_tools` set (even to `[]`) and the tool not in it → deny,
//!    `oap.tool_not_allowed`, `tool '<name>' not in allowlist`;
//! 2. the tool in `denied_tools` → deny, `oap.tool_not_allowed`,
//!    `tool '<name>' is denied`;
//! 3. otherwise allow, `oap.allowed`.
//!
//! # Example
//!
//! ```
//! use guardhost_abi::{Provider, Request};
//! use guardhost_allowlist::{AllowlistConfig, AllowlistProvider};
//!
//! let provider = AllowlistProvider::new(AllowlistConfig {
//!     allowed_tools: None,
//!     denied_tools: Some(vec!["bash".into()]),
//! })?;
//! let decision = provider.evaluate(&Request::for_tool("bash"))?;
//! assert!(!decision.allow);
//! assert_eq!(decision.reasons[0].message.as_str(), "tool 'bash' is denied");
//! # Ok::<(), guardhost_abi::ProviderError>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::HashSet;

use guardhost_abi::{Decision, Provider, ProviderError, Request};
use serde::Deserialize;

/// The constructor's keywords. Neither is `framework` and there is no
/// catch-all, so the host never injects `framework` here.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowlistConfig {
    /// When set (even to an empty list), only these tools may run.
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    /// These tools may never run.
    #[serde(default)]
    pub denied_tools: Option<Vec<String>>,
}

/// Allows or denies tool calls by name.
#[derive(Debug, Clone)]
pub struct AllowlistProvider {
    allowed: Option<HashSet<String>>,
    denied: HashSet<String>,
}

impl Provider for AllowlistProvider {
    const NAME: &'static str = "allowlist";
    type Config = AllowlistConfig;

    fn new(config: AllowlistConfig) -> Result<Self, ProviderError> {
        Ok(AllowlistProvider {
            allowed: config.allowed_tools.map(|tools| tools.into_iter().collect()),
            denied: config.denied_tools.unwrap_or_default().into_iter().collect(),
        })
    }

    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
        let name = request.tool_name();
        if self.allowed.as_ref().is_some_and(|allowed| !allowed.contains(name)) {
            return Ok(Decision::deny()
                .with_reason("oap.tool_not_allowed", format!("tool '{name}' not in allowlist")));
        }
        if self.denied.contains(name) {
            return Ok(
                Decision::deny().with_reason("oap.tool_not_allowed", format!("tool '{name}' is denied"))
            );
        }
        Ok(Decision::allow().with_reason("oap.allowed", ""))
    }
}

guardhost_abi::export_provider!(AllowlistProvider, AllowlistProvider);

#[cfg(test)]
mod tests;
