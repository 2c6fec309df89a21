//! A guardhost provider to copy: denies the tools operators list, and
//! `bash` commands that contain a blocked pattern.
//!
//! Exported under the symbol `TemplateProvider`, so operators write:
//!
//! ```yaml
//! guardrails:
//!   enabled: true
//!   provider:
//!     use: target/release/lib<crate_name>.so:TemplateProvider
//!     config:
//!       denied_tools: [write_file]
//!       blocked_patterns: ["rm -rf", "curl | sh"]
//! ```
//!
//! Everything a provider needs is here: a config type (its fields are the
//! config keys), a constructor that validates, `evaluate`, and one
//! `export_provider!` line. `tests/conformance.rs` runs guardhost's
//! conformance kit on the built library; README.md says how to make it
//! yours.
//!
//! # Map
//!
//! One file, to copy: the config, [`Config`], and the provider,
//! [`Template`]; the tests at the bottom.
#![forbid(unsafe_code)]

use guardhost_abi::{Decision, Provider, ProviderError, Request};
use serde::Deserialize;

/// The config keys, exactly as operators write them under
/// `provider.config:`. `deny_unknown_fields` turns a typo into an error.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Tools that may never run.
    #[serde(default)]
    pub denied_tools: Vec<String>,
    /// `bash` commands containing one of these are denied.
    #[serde(default)]
    pub blocked_patterns: Vec<String>,
}

/// The provider: built once from its config, then asked before every call.
/// It must be `Send + Sync`: the host calls it from many threads at once.
#[derive(Debug)]
pub struct Template {
    config: Config,
}

impl Provider for Template {
    /// Shown in logs and `guardhost check`; also the namespace of your own
    /// reason codes (`template.<code>`).
    const NAME: &'static str = "template";
    type Config = Config;

    fn new(config: Config) -> Result<Self, ProviderError> {
        // Validate here, with an error the operator can act on; never panic.
        if let Some(i) = config.blocked_patterns.iter().position(|p| p.trim().is_empty()) {
            return Err(ProviderError::error(format!(
                "blocked_patterns[{i}] is empty, which would block every command; remove it"
            )));
        }
        Ok(Template { config })
    }

    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
        let tool = request.tool_name();
        if self.config.denied_tools.iter().any(|t| t == tool) {
            return Ok(Decision::deny()
                .with_reason("oap.tool_not_allowed", format!("tool '{tool}' is denied"))
                .with_policy_id("template.denied_tools"));
        }
        if tool == "bash" {
            // Arguments arrive as JSON text; parse only what you need.
            let input: serde_json::Value =
                request.tool_input().map_err(|e| ProviderError::error(format!("bad tool_input: {e}")))?;
            let command = input.get("command").and_then(|c| c.as_str()).unwrap_or_default();
            if let Some(pattern) = self.config.blocked_patterns.iter().find(|p| command.contains(p.as_str()))
            {
                return Ok(Decision::deny()
                    .with_reason(
                        "oap.blocked_pattern",
                        format!("command contains blocked pattern '{pattern}'"),
                    )
                    .with_policy_id("template.blocked_patterns"));
            }
        }
        Ok(Decision::allow().with_reason("oap.allowed", ""))
    }
}

guardhost_abi::export_provider!(TemplateProvider, Template);

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(command: &str) -> String {
        serde_json::json!({ "command": command }).to_string()
    }

    #[test]
    fn blocks_listed_tools_and_patterns() {
        let provider = Template::new(Config {
            denied_tools: vec!["write_file".into()],
            blocked_patterns: vec!["rm -rf".into()],
        })
        .unwrap();
        let input = bash("rm -rf /");
        let decision = provider.evaluate(&Request::for_tool("bash").with_tool_input_json(&input)).unwrap();
        assert!(!decision.allow);
        assert_eq!(decision.reasons[0].code.as_str(), "oap.blocked_pattern");

        let input = bash("ls");
        assert!(provider.evaluate(&Request::for_tool("bash").with_tool_input_json(&input)).unwrap().allow);
        assert!(!provider.evaluate(&Request::for_tool("write_file")).unwrap().allow);
    }

    #[test]
    fn an_empty_pattern_is_a_config_error() {
        let error =
            Template::new(Config { blocked_patterns: vec![" ".into()], ..Config::default() }).unwrap_err();
        assert!(error.message.contains("blocked_patterns[0] is empty"));
    }
}
