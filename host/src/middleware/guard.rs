//! One guard of a [`super::GuardrailMiddleware`]: a provider, how its
//! answers are taken (`fail_closed`, `mode`), what it is told (the
//! passport) and which calls it sees (`tools` / `except_tools`).
//!
//! A middleware asks its guards in order: DeerFlow's `authorization:`
//! provider first, then each entry of `guardrails.providers` (or the one
//! `guardrails.provider`). The first denial wins.

use std::sync::Arc;

use serde::Serialize;

use crate::audit::AuditProvider;
use crate::config::{AuditMessages, Mode};
use crate::provider::GuardrailProvider;

/// What part of a config a guard comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardKind {
    /// The `authorization:` section (asked first; filters tool lists).
    Authorization,
    /// An entry of the `guardrails:` section.
    Guardrail,
}

/// A provider and how the middleware takes its answers.
#[derive(Clone)]
pub struct Guard {
    pub(crate) name: String,
    pub(crate) kind: GuardKind,
    pub(crate) provider: Arc<dyn GuardrailProvider>,
    pub(crate) fail_closed: bool,
    pub(crate) mode: Mode,
    pub(crate) passport: Option<String>,
    pub(crate) audit_provider: AuditProvider,
    pub(crate) selector: Option<ToolSelector>,
    /// Audit events record its reason messages as written.
    pub(crate) verbatim_messages: bool,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("provider", &self.provider.name())
            .field("fail_closed", &self.fail_closed)
            .field("mode", &self.mode)
            .field("passport", &self.passport)
            .field("selector", &self.selector)
            .field("verbatim_messages", &self.verbatim_messages)
            .finish()
    }
}

impl Guard {
    /// A guardrail guard around `provider`, named as the provider is,
    /// failing closed, in `enforce` mode, seeing every call.
    pub fn new(provider: Arc<dyn GuardrailProvider>) -> Self {
        let name = provider.name().to_owned();
        let audit_provider = AuditProvider { name: name.clone(), sha256: None };
        let verbatim_messages = !provider.messages_quote_input();
        Guard {
            name,
            kind: GuardKind::Guardrail,
            provider,
            fail_closed: true,
            mode: Mode::Enforce,
            passport: None,
            audit_provider,
            selector: None,
            verbatim_messages,
        }
    }

    /// Sets how audit events record the provider's reason messages
    /// (`guardrails.audit_messages`): as written when the provider declares
    /// they never quote a call's input ([`AuditMessages::Declared`], the
    /// default), always a fixed text per code, or always as written.
    pub fn with_audit_messages(mut self, messages: AuditMessages) -> Self {
        self.verbatim_messages = match messages {
            AuditMessages::Declared => !self.provider.messages_quote_input(),
            AuditMessages::Fixed => false,
            AuditMessages::AsWritten => true,
        };
        self
    }

    /// Whether audit events record its reason messages as written (else a
    /// fixed text per code).
    pub fn audits_messages_as_written(&self) -> bool {
        self.verbatim_messages
    }

    /// Names the guard (the decision's `decided_by`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets what part of the config the guard comes from.
    pub fn with_kind(mut self, kind: GuardKind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets whether an error of the provider blocks the call.
    pub fn with_fail_closed(mut self, fail_closed: bool) -> Self {
        self.fail_closed = fail_closed;
        self
    }

    /// Sets what a denial of this guard does (see [`super::shadowed`]).
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the passport (the requests' `agent_id`).
    pub fn with_passport(mut self, passport: Option<String>) -> Self {
        self.passport = passport;
        self
    }

    /// Sets the SHA-256 of the provider's library, named in audit events.
    pub fn with_library_sha256(mut self, sha256: Option<String>) -> Self {
        self.audit_provider.sha256 = sha256;
        self
    }

    /// Lets the guard see only the calls `selector` selects.
    pub fn with_selector(mut self, selector: Option<ToolSelector>) -> Self {
        self.selector = selector.filter(|s| !s.selects_all());
        self
    }

    /// The guard's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What part of the config it comes from.
    pub fn kind(&self) -> GuardKind {
        self.kind
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn GuardrailProvider> {
        &self.provider
    }

    /// Why this guard's provider fails on `request`, in its own words: it
    /// is asked again, and its error (or why its answer cannot be read)
    /// is returned; `None` when it now decides the request. For the
    /// operator's tools only (`explain`, `test`): the text may quote what
    /// the provider was given, so it never goes to audit events.
    pub fn cause_of_failure(&self, request: &crate::GuardrailRequest) -> Option<String> {
        match crate::provider::evaluate_here_with_args_text(&*self.provider, request, None, false) {
            Err(error) => Some(error.to_string()),
            Ok(mut decision) => crate::outcome::take_requested(&mut decision)
                .err()
                .map(|problem| format!("its answer cannot be read: {problem}")),
        }
    }

    /// Whether an error of the provider blocks the call.
    pub fn fail_closed(&self) -> bool {
        self.fail_closed
    }

    /// What a denial does.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The passport.
    pub fn passport(&self) -> Option<&str> {
        self.passport.as_deref()
    }

    /// Which calls it sees (`None`: all).
    pub fn selector(&self) -> Option<&ToolSelector> {
        self.selector.as_ref()
    }

    /// Whether the guard decides calls of `tool`.
    pub fn selects(&self, tool: &str) -> bool {
        self.selector.as_ref().is_none_or(|s| s.selects(tool))
    }
}

/// `tools:` and `except_tools:`: the calls a guard sees, by the tool's
/// name, with glob patterns (`*` any run of characters, `?` any one,
/// anything else itself; case matters).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSelector {
    tools: Vec<String>,
    except_tools: Vec<String>,
}

impl ToolSelector {
    /// Selects the tools matching a pattern of `tools` (every tool when it
    /// is empty) and none of `except_tools`.
    pub fn new(tools: Vec<String>, except_tools: Vec<String>) -> Self {
        ToolSelector { tools, except_tools }
    }

    /// Whether it selects every tool.
    pub fn selects_all(&self) -> bool {
        self.tools.is_empty() && self.except_tools.is_empty()
    }

    /// Whether calls of `tool` are selected.
    pub fn selects(&self, tool: &str) -> bool {
        (self.tools.is_empty() || self.tools.iter().any(|p| glob(p, tool)))
            && !self.except_tools.iter().any(|p| glob(p, tool))
    }

    /// `tools`, as configured.
    pub fn tools(&self) -> &[String] {
        &self.tools
    }

    /// `except_tools`, as configured.
    pub fn except_tools(&self) -> &[String] {
        &self.except_tools
    }
}

impl std::fmt::Display for ToolSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.tools.is_empty(), self.except_tools.is_empty()) {
            (true, true) => f.write_str("every tool"),
            (false, true) => write!(f, "tools {}", self.tools.join(", ")),
            (true, false) => write!(f, "every tool except {}", self.except_tools.join(", ")),
            (false, false) => {
                write!(f, "tools {}, except {}", self.tools.join(", "), self.except_tools.join(", "))
            }
        }
    }
}

use guardhost_abi::glob;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn except_tools_wins_over_tools() {
        let selector = ToolSelector::new(vec!["write_*".into(), "bash".into()], vec!["write_todos".into()]);
        assert!(selector.selects("bash") && selector.selects("write_file"));
        assert!(!selector.selects("write_todos") && !selector.selects("read_file"));
        let all_but = ToolSelector::new(vec![], vec!["read_*".into()]);
        assert!(all_but.selects("bash") && !all_but.selects("read_file"));
        assert!(ToolSelector::new(vec![], vec![]).selects_all());
        assert_eq!(selector.to_string(), "tools write_*, bash, except write_todos");
    }
}
