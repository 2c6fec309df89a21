//! What a call's guards came to, tallied as they are asked, and recorded:
//! audit events and the decision log.

use std::borrow::Cow;
use std::time::Instant;

use serde_json::{Map, Value};

use super::engine::{no_provider, unselected, Call, Concluded, Conclusion, Tally};
use super::GuardrailMiddleware;
use crate::audit::{AuditAction, AuditProvider, AuditRecord};
use crate::config::Mode;
use crate::decision_log::Decided;
use crate::middleware::guard::Guard;
use crate::middleware::ToolCallError;
use crate::outcome::OUTCOME_KEY;
use crate::request::{GuardrailDecision, GuardrailRequest, Timestamp};

impl GuardrailMiddleware {
    /// Takes guard `index`'s conclusion into `tally`: `Ok(false)` when the
    /// call is decided (denied); an interrupt is logged and returned.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tally(
        &self,
        tally: &mut Tally,
        index: usize,
        guard: &Guard,
        concluded: Conclusion,
        this: &Call<'_>,
        args: &Map<String, Value>,
        started: Option<Instant>,
    ) -> Result<bool, ToolCallError> {
        match concluded {
            Ok(concluded) => Ok(tally.add(index, guard, concluded)),
            Err(error) => {
                if let (Some(log), Some(started)) = (&self.decision_log, started) {
                    let view = this.view(guard, args);
                    log.record_call(
                        &view,
                        Decided::Interrupt,
                        guard.mode,
                        &guard.audit_provider,
                        started.elapsed(),
                    );
                }
                Err(error)
            }
        }
    }

    /// The decision the guards came to, named by its guard in a chain, and
    /// written to the decision log.
    pub(super) fn finish(
        &self,
        tally: Tally,
        this: &Call<'_>,
        args: &Map<String, Value>,
        started: Option<Instant>,
    ) -> Concluded {
        let Tally { chain, reported, steps, rewrote, .. } = tally;
        let (mut decision, provider_error, by) = match reported {
            Some((decision, provider_error, index)) => (decision, provider_error, Some(index)),
            None => (unselected(this.tool_name()), false, None),
        };
        let guard = by.map(|index| &self.guards[index]);
        if decision.allow && rewrote {
            // The arguments the tool runs with: the last rewrite's.
            decision
                .metadata
                .insert(OUTCOME_KEY.into(), serde_json::json!({"rewrite": {"tool_input": args}}));
        }
        if let (true, Some(guard)) = (chain, guard) {
            decision.metadata.insert("decided_by".into(), Value::from(guard.name.as_str()));
        }
        if let (Some(log), Some(started)) = (&self.decision_log, started) {
            let none = no_provider();
            let (mode, provider) = guard.map_or((Mode::Enforce, &none), |g| (g.mode, &g.audit_provider));
            let view = match guard {
                Some(guard) => this.view(guard, args),
                None => this.view(&self.guards[0], args),
            };
            let decided = Decided::Decision(&decision, provider_error);
            let took = started.elapsed();
            match chain {
                false => log.record_call(&view, decided, mode, provider, took),
                true => log.record_chain_call(&view, decided, mode, provider, took, steps),
            }
        }
        (decision, provider_error, by)
    }

    pub(super) fn record<'r>(
        &self,
        guard: &Guard,
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
        decision: &GuardrailDecision,
        action: AuditAction,
        provider_error: bool,
    ) {
        let by = (guard.fail_closed, &guard.audit_provider, guard.verbatim_messages);
        self.record_by(by, request, decision, action, provider_error);
    }

    /// [`Self::record`] of a decision made with `fail_closed` by
    /// `provider`.
    pub(super) fn record_by<'r>(
        &self,
        (fail_closed, provider, verbatim): (bool, &AuditProvider, bool),
        request: impl FnOnce() -> Cow<'r, GuardrailRequest>,
        decision: &GuardrailDecision,
        action: AuditAction,
        provider_error: bool,
    ) {
        let Some(sink) = &self.audit else { return };
        let mut request = request();
        if request.timestamp.is_empty() {
            // No provider read the call's time (see `now`): it is now.
            request.to_mut().timestamp = Timestamp::now().as_str().to_owned();
        }
        let record = AuditRecord {
            action,
            request: &request,
            decision,
            fail_closed,
            provider_error,
            provider,
            verbatim,
        };
        if let Err(error) = sink.record_call(&record) {
            tracing::warn!("Failed to record middleware:guardrail event: {error}");
        }
    }
}
