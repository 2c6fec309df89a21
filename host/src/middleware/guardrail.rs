//! `GuardrailMiddleware`: asks the provider before every tool call.
//!
//! # Map
//! - this file: the middleware, its guards and settings (the builder);
//! - `entry`: the ways in (check, decide and wrap, sync and async, with the
//!   arguments' JSON text or without) and the tool-call middleware trait;
//! - `engine`: the decision engine, each guard asked in order and its
//!   answer concluded;
//! - `record`: the tally of a call's guards, and what is audited and logged;
//! - `explain`: what each guard made of a call;
//! - `denial`: the text a denied or held call comes to;
//! - `shadow`: what a denial becomes in `warn` and `observe` mode.

mod denial;
mod engine;
mod entry;
mod explain;
mod record;
mod shadow;

use std::sync::Arc;
use std::time::Instant;

pub use denial::{denied_message, into_denied_message};
pub use entry::{Checked, ToEvaluate};
pub use explain::{Explained, Step, StepAnswer};
pub use shadow::shadowed;

use super::guard::{Guard, GuardKind};
use crate::audit::AuditSink;
use crate::config::Mode;
use crate::decision_log::DecisionLog;
use crate::provider::GuardrailProvider;
use crate::request::Timestamp;

/// Evaluates every tool call against its guards before it runs.
///
/// A guard is a provider with its `fail_closed`, mode, passport and the
/// calls it sees ([`Guard`]); a middleware built with
/// [`GuardrailMiddleware::new`] has one, and [`GuardrailMiddleware::then`]
/// adds more, asked in order: the first denial wins, and a chain's
/// decisions name the guard that decided (`decided_by` in the metadata).
///
/// A denied call is not an error: it becomes a tool message with
/// `status: error` that tells the agent why, so the run goes on. When a
/// provider fails, its guard's `fail_closed` (default true) blocks the
/// call; otherwise the next guard decides. A provider's control-flow
/// interrupt is returned as [`super::ToolCallError::Interrupt`], never turned into
/// a decision.
#[derive(Clone)]
pub struct GuardrailMiddleware {
    guards: Vec<Guard>,
    audit: Option<Arc<dyn AuditSink>>,
    decision_log: Option<Arc<DecisionLog>>,
}

impl std::fmt::Debug for GuardrailMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardrailMiddleware")
            .field("guards", &self.guards)
            .field("audit", &self.audit.is_some())
            .field("decision_log", &self.decision_log.is_some())
            .finish()
    }
}

impl GuardrailMiddleware {
    /// A middleware around `provider`: one guard, failing closed, in
    /// `enforce` mode, with no passport and no audit sink.
    pub fn new(provider: Arc<dyn GuardrailProvider>) -> Self {
        Self::from_guard(Guard::new(provider))
    }

    /// A middleware with `guard` as its first guard.
    pub fn from_guard(guard: Guard) -> Self {
        GuardrailMiddleware { guards: vec![guard], audit: None, decision_log: None }
    }

    /// Adds `guard`, asked after the ones already added.
    pub fn then(mut self, guard: Guard) -> Self {
        self.guards.push(guard);
        self
    }

    /// The guards, in the order they are asked.
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    /// Whether decisions name their guard: more than one guard, or one
    /// that sees only some calls.
    pub fn is_chain(&self) -> bool {
        self.guards.len() > 1 || self.guards.iter().any(|g| g.selector.is_some())
    }

    /// One guard that sees every call, and no decision log: its allow
    /// (without an outcome beyond it) is the call's decision as it stands,
    /// which concluding, tallying and finishing would leave unchanged (an
    /// allow is neither audited nor logged).
    fn is_plain(&self) -> bool {
        !self.is_chain() && self.decision_log.is_none()
    }

    /// The first guard of the `guardrails:` section (the first guard when
    /// there is none).
    fn main_guard(&self) -> &Guard {
        self.guards.iter().find(|g| g.kind == GuardKind::Guardrail).unwrap_or(&self.guards[0])
    }

    fn guardrail_guards(&mut self) -> impl Iterator<Item = &mut Guard> {
        self.guards.iter_mut().filter(|g| g.kind == GuardKind::Guardrail)
    }

    /// Sets `fail_closed` of every guardrail guard (an authorization guard
    /// keeps its own).
    pub fn with_fail_closed(mut self, fail_closed: bool) -> Self {
        self.guardrail_guards().for_each(|g| g.fail_closed = fail_closed);
        self
    }

    /// Sets what a denial of a guardrail guard does (`guardrails.mode`):
    /// in `warn` and `observe` mode, a denied call runs all the same; see
    /// [`shadowed`]. An authorization guard always enforces.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.guardrail_guards().for_each(|g| g.mode = mode);
        self
    }

    /// What a denial of the (first) guardrail guard does.
    pub fn mode(&self) -> Mode {
        self.main_guard().mode
    }

    /// Sets the passport of every guardrail guard (it becomes their
    /// requests' `agent_id`; an authorization guard is given none, as in
    /// DeerFlow).
    pub fn with_passport(mut self, passport: Option<String>) -> Self {
        self.guardrail_guards().for_each(|g| g.passport = passport.clone());
        self
    }

    /// Sets the SHA-256 of the last guard's library, which audit events
    /// carry to say exactly which library decided ([`crate::install`] sets
    /// each guard's).
    pub fn with_library_sha256(mut self, sha256: Option<String>) -> Self {
        if let Some(guard) = self.guards.last_mut() {
            guard.audit_provider.sha256 = sha256;
        }
        self
    }

    /// Sets the decision log: every decided call is written to it.
    pub fn with_decision_log(mut self, log: Option<Arc<DecisionLog>>) -> Self {
        self.decision_log = log;
        self
    }

    /// The decision log, if one is set.
    pub fn decision_log(&self) -> Option<&Arc<DecisionLog>> {
        self.decision_log.as_ref()
    }

    /// When deciding started, if the decision log needs to know.
    fn started(&self) -> Option<Instant> {
        self.decision_log.as_ref().map(|_| Instant::now())
    }

    /// The time of a call about to be decided: now, unless no provider
    /// reads it (each declares it does not read the request's attribution,
    /// of which the timestamp is part), when it is left empty, as such a
    /// provider is handed it. An audit event or a decision-log entry of such
    /// a call takes the time it is recorded, a few microseconds later: an
    /// allowed call, which neither records, reads no clock.
    fn now(&self) -> Timestamp {
        if self.guards.iter().any(|guard| guard.provider.reads_attribution()) {
            Timestamp::now()
        } else {
            Timestamp::empty()
        }
    }

    /// Sets the audit sink.
    pub fn with_audit_sink(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// The (first) guardrail guard's provider.
    pub fn provider(&self) -> &Arc<dyn GuardrailProvider> {
        &self.main_guard().provider
    }

    /// Whether errors of the (first) guardrail guard's provider block calls.
    pub fn fail_closed(&self) -> bool {
        self.main_guard().fail_closed
    }

    /// The passport.
    pub fn passport(&self) -> Option<&str> {
        self.main_guard().passport.as_deref()
    }
}
