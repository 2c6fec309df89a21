//! An example custom guardrail provider (`my-policy`), exported under the
//! symbol `MyGuardrailProvider`: it denies every tool whose name starts with
//! one of `blocked_prefixes` (code `custom.blocked`) and allows the rest
//! (`custom.allowed`).
//!
//! Like a Python provider whose constructor takes `**kwargs`, it accepts
//! config keys it does not know, so the host injects
//! `framework: "deerflow"`; the provider echoes the `framework` it received
//! in every decision's metadata, which makes the injection visible.
//!
//! ```yaml
//! guardrails:
//!   enabled: true
//!   provider:
//!     use: target/release/blocked_prefixes:MyGuardrailProvider
//!     config:
//!       blocked_prefixes: ["bash", "write_"]
//! ```
//!
//! # Example
//!
//! ```
//! use blocked_prefixes::{MyConfig, MyGuardrailProvider};
//! use guardhost_abi::{Provider, Request};
//!
//! let provider = MyGuardrailProvider::new(MyConfig {
//!     blocked_prefixes: vec!["write_".into()],
//!     framework: Some("deerflow".into()),
//! })?;
//! let decision = provider.evaluate(&Request::for_tool("write_file"))?;
//! assert!(!decision.allow);
//! assert_eq!(decision.reasons[0].code.as_str(), "custom.blocked");
//! assert_eq!(decision.metadata_json.as_str(), r#"{"framework":"deerflow"}"#);
//! # Ok::<(), guardhost_abi::ProviderError>(())
//! ```
//!
//! # Map
//!
//! One file: the config, [`MyConfig`], and the provider,
//! [`struct@MyGuardrailProvider`]; the tests at the bottom.
#![forbid(unsafe_code)]

use guardhost_abi::{Decision, Provider, ProviderError, Request};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The constructor's keywords; any other key is accepted and ignored.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MyConfig {
    /// Tools whose name starts with one of these are denied.
    #[serde(default)]
    pub blocked_prefixes: Vec<String>,
    /// The agent framework the host runs in (injected by the host).
    #[serde(default)]
    pub framework: Option<String>,
}

/// Denies tools by name prefix.
#[derive(Debug, Clone)]
pub struct MyGuardrailProvider {
    blocked: Vec<String>,
    metadata: Map<String, Value>,
}

impl MyGuardrailProvider {
    fn decision(&self, decision: Decision) -> Decision {
        decision.with_metadata(self.metadata.clone())
    }
}

impl Provider for MyGuardrailProvider {
    const NAME: &'static str = "my-policy";
    const ACCEPTS_EXTRA_KEYS: bool = true;
    type Config = MyConfig;

    fn new(config: MyConfig) -> Result<Self, ProviderError> {
        if let Some(empty) = config.blocked_prefixes.iter().position(String::is_empty) {
            return Err(ProviderError::error(format!(
                "blocked_prefixes[{empty}] is empty, which would block every tool; remove it or use the allowlist provider's `allowed_tools: []`"
            )));
        }
        let mut metadata = Map::new();
        if let Some(framework) = config.framework {
            metadata.insert("framework".into(), Value::String(framework));
        }
        Ok(MyGuardrailProvider { blocked: config.blocked_prefixes, metadata })
    }

    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
        let name = request.tool_name();
        if self.blocked.iter().any(|prefix| name.starts_with(prefix.as_str())) {
            return Ok(
                self.decision(Decision::deny().with_reason("custom.blocked", format!("{name} blocked")))
            );
        }
        Ok(self.decision(Decision::allow().with_reason("custom.allowed", "")))
    }
}

guardhost_abi::export_provider!(MyGuardrailProvider, MyGuardrailProvider);

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(prefixes: &[&str]) -> MyGuardrailProvider {
        let blocked_prefixes = prefixes.iter().map(|p| p.to_string()).collect();
        MyGuardrailProvider::new(MyConfig { blocked_prefixes, framework: None }).unwrap()
    }

    #[test]
    fn blocks_by_prefix_and_allows_the_rest() {
        let p = provider(&["bash", "write_"]);
        for (tool, allow) in
            [("bash", false), ("bash_tool", false), ("write_file", false), ("read_file", true), ("", true)]
        {
            let d = p.evaluate(&Request::for_tool(tool)).unwrap();
            assert_eq!(d.allow, allow, "{tool}");
            let code = if allow { "custom.allowed" } else { "custom.blocked" };
            assert_eq!(d.reasons[0].code.as_str(), code);
        }
        assert_eq!(
            p.evaluate(&Request::for_tool("bash")).unwrap().reasons[0].message.as_str(),
            "bash blocked"
        );
    }

    #[test]
    fn without_framework_metadata_is_empty() {
        assert_eq!(provider(&[]).evaluate(&Request::for_tool("x")).unwrap().metadata_json.as_str(), "");
    }

    #[test]
    fn an_empty_prefix_is_refused() {
        let err = MyGuardrailProvider::new(MyConfig { blocked_prefixes: vec!["".into()], framework: None })
            .unwrap_err();
        assert!(err.message.contains("blocked_prefixes[0] is empty"));
    }

    #[test]
    fn declares_its_keys_and_accepts_others() {
        assert_eq!(MyGuardrailProvider::accepted_keys(), ["blocked_prefixes", "framework"]);
        assert!(MyGuardrailProvider.factory.accepts_extra_keys());
    }
}
