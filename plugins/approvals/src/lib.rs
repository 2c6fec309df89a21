//! A provider (name `approvals`) that answers with guardhost's outcomes
//! beyond allow and deny: it holds the calls of chosen tools for a human's
//! approval (`ask`) and forces chosen arguments (`rewrite`).
//!
//! ```yaml
//! guardrails:
//!   enabled: true
//!   provider:
//!     use: builtin:ApprovalGuardrailProvider   # or plugins/libguardhost_approvals.so:ApprovalGuardrailProvider
//!     config:
//!       ask: ["bash", "write_*"]   # these tools wait for a human's approval
//!       approvers: ["admin"]       # who may approve (anyone when absent)
//!       timeout_s: 600             # how long approval may take (default 300)
//!       set:                       # arguments forced per tool
//!         web_fetch: {max_bytes: 100000}
//! ```
//!
//! For each call: when a `set` pattern matches its tool and changes an
//! argument, the decision is a rewrite with those values; otherwise, when an
//! `ask` pattern matches, an ask; otherwise an allow. (To rewrite and then
//! ask for the same tool, chain two entries: the second sees the rewritten
//! arguments, and its approval covers them.) Patterns are tool names, with
//! `*` for any run of characters and `?` for one, as in a chain entry's
//! `tools:` ([`guardhost_abi::glob`]).
//!
//! This crate is both a built-in provider of guardhost
//! (`builtin:ApprovalGuardrailProvider`) and a provider library exporting
//! the symbol `ApprovalGuardrailProvider`.
//!
//! # Example
//!
//! ```
//! use guardhost_abi::{Provider, Request};
//! use guardhost_approvals::{Approvals, Config};
//!
//! let config: Config = serde_json::from_value(serde_json::json!({"ask": ["bash"]})).unwrap();
//! let approvals = Approvals::new(config)?;
//! let decision = approvals.evaluate(&Request::for_tool("bash"))?;
//! assert!(!decision.allow); // held: the host turns this into an ask
//! assert!(approvals.evaluate(&Request::for_tool("read_file"))?.allow);
//! # Ok::<(), guardhost_abi::ProviderError>(())
//! ```
//!
//! # Map
//!
//! One file: the config, [`Config`], and the provider, [`Approvals`]; the
//! tests at the bottom.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use guardhost_abi::{glob, Decision, Provider, ProviderError, Request};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The longest `timeout_s` the host accepts: one day.
const MAX_TIMEOUT_S: u32 = 86_400;

/// The provider's config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Tool-name patterns whose calls need approval.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Who may approve; anyone the runtime lets approve when empty.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// How long approval may take, in seconds (1 to 86,400; default 300).
    #[serde(default = "default_timeout")]
    pub timeout_s: u32,
    /// Tool-name pattern → arguments forced on its calls.
    #[serde(default)]
    pub set: BTreeMap<String, Map<String, Value>>,
    /// Injected by hosts that say which framework they serve; unused.
    #[serde(default)]
    pub framework: Option<String>,
}

fn default_timeout() -> u32 {
    300
}

/// The provider: see the crate documentation.
#[derive(Debug)]
pub struct Approvals {
    ask: Vec<String>,
    approvers: Vec<String>,
    timeout_s: u32,
    set: Vec<(String, Map<String, Value>)>,
}

impl Provider for Approvals {
    const NAME: &'static str = "approvals";
    type Config = Config;

    fn new(config: Config) -> Result<Self, ProviderError> {
        if !(1..=MAX_TIMEOUT_S).contains(&config.timeout_s) {
            return Err(ProviderError::error(format!(
                "`timeout_s` must be 1 to {MAX_TIMEOUT_S} seconds; it is {}",
                config.timeout_s
            )));
        }
        if let Some(empty) = config.ask.iter().chain(config.set.keys()).find(|p| p.is_empty()) {
            return Err(ProviderError::error(format!(
                "an empty tool pattern ({empty:?}) in `ask` or `set` matches no tool: remove it"
            )));
        }
        if config.ask.is_empty() && config.set.is_empty() {
            return Err(ProviderError::error(
                "neither `ask` nor `set` names a tool: this provider would allow every call; give at least one",
            ));
        }
        Ok(Approvals {
            ask: config.ask,
            approvers: config.approvers,
            timeout_s: config.timeout_s,
            set: config.set.into_iter().collect(),
        })
    }

    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
        let tool = request.tool_name();
        let forced: Vec<&Map<String, Value>> =
            self.set.iter().filter(|(pattern, _)| glob(pattern, tool)).map(|(_, args)| args).collect();
        if !forced.is_empty() {
            let mut args: Map<String, Value> = request
                .tool_input()
                .map_err(|e| ProviderError::error(format!("the arguments are not a JSON object: {e}")))?;
            let mut changed = Vec::new();
            for (key, value) in forced.into_iter().flatten() {
                if args.get(key) != Some(value) {
                    args.insert(key.clone(), value.clone());
                    changed.push(key.as_str());
                }
            }
            if !changed.is_empty() {
                changed.sort_unstable();
                changed.dedup();
                let message = format!("arguments of tool '{tool}' set by policy: {}", changed.join(", "));
                return Ok(Decision::rewrite(args).with_reason("approvals.set", message));
            }
        }
        if self.ask.iter().any(|pattern| glob(pattern, tool)) {
            let message = format!("tool '{tool}' needs a human's approval");
            return Ok(Decision::ask(self.approvers.iter().cloned(), self.timeout_s)
                .with_reason("approvals.ask", message));
        }
        Ok(Decision::allow().with_reason("approvals.allowed", ""))
    }
}

guardhost_abi::export_provider!(ApprovalGuardrailProvider, Approvals);

#[cfg(test)]
mod tests {
    use super::*;
    use guardhost_abi::OUTCOME_KEY;
    use serde_json::json;

    fn provider(config: Value) -> Result<Approvals, ProviderError> {
        Approvals::new(serde_json::from_value(config).expect("config"))
    }

    fn outcome(decision: &Decision) -> Value {
        let metadata: Value = serde_json::from_str(decision.metadata_json.as_str()).unwrap_or_default();
        metadata[OUTCOME_KEY].clone()
    }

    #[test]
    fn listed_tools_are_held_for_approval_by_the_approvers() {
        let p =
            provider(json!({"ask": ["bash", "write_*"], "approvers": ["admin"], "timeout_s": 60})).unwrap();
        let held = p.evaluate(&Request::for_tool("write_file")).unwrap();
        assert!(!held.allow, "a host that knows no asks refuses the call");
        assert_eq!(outcome(&held), json!({"ask": {"approvers": ["admin"], "timeout_s": 60}}));
        assert_eq!(held.reasons[0].code.as_str(), "approvals.ask");
        let free = p.evaluate(&Request::for_tool("read_file")).unwrap();
        assert!(free.allow);
        assert_eq!(outcome(&free), Value::Null);
    }

    #[test]
    fn set_rewrites_only_what_differs() {
        let p = provider(json!({"set": {"web_*": {"max_bytes": 1000}}})).unwrap();
        let request =
            Request::for_tool("web_fetch").with_tool_input_json(r#"{"url": "https://x", "max_bytes": 9}"#);
        let rewritten = p.evaluate(&request).unwrap();
        assert_eq!(
            outcome(&rewritten),
            json!({"rewrite": {"tool_input": {"url": "https://x", "max_bytes": 1000}}})
        );
        assert_eq!(
            rewritten.reasons[0].message.as_str(),
            "arguments of tool 'web_fetch' set by policy: max_bytes"
        );
        let already = Request::for_tool("web_fetch").with_tool_input_json(r#"{"max_bytes": 1000}"#);
        assert!(p.evaluate(&already).unwrap().allow, "nothing to change: an allow");
    }

    #[test]
    fn a_config_that_would_do_nothing_or_wait_forever_is_refused() {
        let error = |config| provider(config).unwrap_err().message.to_string();
        assert!(error(json!({})).contains("neither `ask` nor `set`"));
        assert!(error(json!({"ask": ["bash"], "timeout_s": 0})).contains("must be 1 to 86400"));
        assert!(error(json!({"ask": ["bash"], "timeout_s": 86401})).contains("must be 1 to 86400"));
        assert!(error(json!({"ask": [""]})).contains("empty tool pattern"));
        assert!(serde_json::from_value::<Config>(json!({"ask": ["bash"], "aprovers": []})).is_err());
    }
}
