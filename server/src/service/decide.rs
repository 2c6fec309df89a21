//! `POST /v1/decide` and `/v1/decide/batch`: a call decided, and where
//! its provider's calls are decided so that none blocks the I/O threads.

use std::sync::Arc;
use std::time::Instant;

use guardhost::{
    outcome_of, Ask, Guardrail, Isolation, ProviderFailure, ProviderInfo, ProviderSource, ToolCallRequest,
};
use guardhost_lines::answer::{self, Handled, OutputFormat};
use guardhost_lines::jsonl::{parse_line, parse_line_with_args_text};
use hyper::StatusCode;
use serde_json::value::RawValue;

use super::reply::{json, Refusal, Reply};
use super::{Service, PENDING_PREFIX};
use crate::metrics::Decided;

/// Where a provider's calls are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// On the I/O thread: the built-in provider, the host's own code, which
    /// takes microseconds and cannot block, or a library that declares it
    /// never blocks (`NEVER_BLOCKS`, which `guardhost conformance` checks).
    Here,
    /// On the I/O thread through the provider's async path, which waits
    /// without blocking it: a provider process (`isolation: process`,
    /// `command:`), or one with `provider.timeout_ms` (its calls run on its
    /// own evaluation threads).
    Awaited,
    /// On a decision thread: an in-process library, whose calls may take
    /// any time.
    Thread,
}

impl Placement {
    fn of(info: &ProviderInfo) -> Placement {
        if info.isolation == Isolation::Process || info.timeout_ms.is_some() {
            Placement::Awaited
        } else if matches!(info.source, ProviderSource::Builtin { .. }) || info.never_blocks {
            Placement::Here
        } else {
            Placement::Thread
        }
    }

    /// Where a chain's decisions run: on a thread when any entry may
    /// block it, awaited when every entry is built in, never blocks or is
    /// bounded by a deadline of its own, here only when every entry is
    /// built in or never blocks.
    fn of_all(entries: &[ProviderInfo]) -> Placement {
        let places: Vec<Placement> = entries.iter().map(Placement::of).collect();
        if places.contains(&Placement::Thread) {
            Placement::Thread
        } else if places.contains(&Placement::Awaited) {
            Placement::Awaited
        } else {
            Placement::Here
        }
    }
}

impl Service {
    /// Decides call `number` (its place in a batch, 1 alone) and writes its
    /// document into `out`; whether it was a usable call.
    async fn decide(&self, number: u64, bytes: &[u8], out: &mut Vec<u8>) -> bool {
        // The arguments' text is kept for a provider that reads them: it is
        // handed that text rather than their serialisation.
        let reads_arguments = self.source.current().is_some_and(|g| g.middleware.reads_tool_input());
        let parsed = match reads_arguments {
            true => parse_line_with_args_text(number, bytes),
            false => parse_line(number, bytes).map(|call| (call, None)),
        };
        let call = parsed.map_err(|message| {
            let (id, name) = answer::readable_id_and_name(bytes);
            Handled::Malformed { id, name, message }
        });
        self.decide_parsed(number, call, out).await
    }

    /// [`Self::decide`] for a parsed call, with its arguments' text when it
    /// was kept (or the answer to a malformed one).
    pub(super) async fn decide_parsed(
        &self,
        number: u64,
        call: Result<(ToolCallRequest, Option<&str>), Handled>,
        out: &mut Vec<u8>,
    ) -> bool {
        let guardrail = self.source.current();
        let middleware = guardrail.as_deref().map(|g| &g.middleware);
        let started = Instant::now();
        let mut timed_out = false;
        let mut pending = None;
        let handled = match call {
            Ok((call, args_text)) => match guardrail.as_deref() {
                Some(guardrail) => {
                    self.decide_call(guardrail, call, args_text, &mut timed_out, &mut pending).await
                }
                None => answer::adecide(middleware, call, args_text).await,
            },
            Err(malformed) => malformed,
        };
        let took = started.elapsed();
        let mut by =
            guardrail.as_deref().and_then(|g| g.described().next().map(|d| (d.name, &*d.provider.name)));
        if guardrail.as_deref().is_some_and(|g| g.middleware.is_chain()) {
            by = None;
        }
        let (outcome, code, provider_error, would_deny, usable) = match &handled {
            Handled::Decided { decision, provider_error, .. } => {
                let allow = decision.as_ref().is_none_or(|d| d.allow);
                let code = decision.as_ref().and_then(|d| d.reasons.first()).map_or("", |r| &*r.code);
                // `mode: warn` or `observe` (the host's, or a provider's own).
                let would_deny =
                    decision.as_ref().is_some_and(|d| d.allow && d.metadata.contains_key("would_deny"));
                let outcome = match decision {
                    Some(decision) => outcome_of(decision),
                    None if allow => "allow",
                    None => "deny",
                };
                // In a chain, the entry that decided (none: no entry
                // selected the call, or the host refused its name).
                let decided_by =
                    decision.as_ref().and_then(|d| d.metadata.get("decided_by")).and_then(|v| v.as_str());
                if let (Some(guardrail), Some(name)) = (guardrail.as_deref(), decided_by) {
                    by = guardrail.provider_of(name).map(|info| (name, &*info.name)).or(by);
                }
                (outcome, code, *provider_error, would_deny, true)
            }
            Handled::Interrupted { .. } => ("interrupt", "", false, false, true),
            Handled::Malformed { .. } | Handled::Failed { .. } => ("error", "", false, false, false),
        };
        let (entry, provider) = by.unwrap_or(("none", "none"));
        self.metrics.decided(Decided {
            entry,
            provider,
            outcome,
            code,
            provider_error,
            would_deny,
            timed_out,
            took,
        });
        // Writing a document of strings and JSON values cannot fail.
        let start = out.len();
        let _ = answer::write(out, OutputFormat::Decisions, number, &handled);
        if let Some(id) = pending {
            with_pending(out, start, &id);
        }
        usable
    }

    /// Decides `call` with `guardrail` off the I/O threads' way (see
    /// [`Placement`]), within `--decision-timeout-ms`: past it, the call is
    /// answered as a provider error, which `fail_closed` decides, and
    /// `timed_out` is set.
    async fn decide_call(
        &self,
        guardrail: &Guardrail,
        call: ToolCallRequest,
        args_text: Option<&str>,
        timed_out: &mut bool,
        pending: &mut Option<String>,
    ) -> Handled {
        let middleware = &guardrail.middleware;
        let limit = self.options.decision_timeout;
        let late = || {
            ProviderFailure::error(format!(
                "provider '{}' did not decide within {} ms (--decision-timeout-ms)",
                guardrail.info.name,
                limit.as_millis()
            ))
        };
        let decided = match Placement::of_all(&guardrail.entries) {
            Placement::Here => middleware.adecide_with_args_text(&call, args_text).await,
            Placement::Awaited => {
                match tokio::time::timeout(limit, middleware.adecide_with_args_text(&call, args_text)).await {
                    Ok(decided) => decided,
                    // The provider's call was dropped, unanswered: this is its
                    // answer (audited and logged once).
                    Err(_) => {
                        *timed_out = true;
                        middleware.adecide_with(&call, |_| std::future::ready(Err(late()))).await
                    }
                }
            }
            Placement::Thread => {
                let deadline = tokio::time::Instant::now() + limit;
                let late_one = std::sync::atomic::AtomicBool::new(false);
                let late_one = &late_one;
                let decided = middleware
                    .adecide_text_with(&call, args_text, |evaluation| {
                        let deciders = Arc::clone(&self.deciders);
                        async move {
                            let on_a_thread = async move {
                                // Waiting for a place counts against the deadline.
                                let place = deciders.acquire_owned().await;
                                tokio::task::spawn_blocking(move || {
                                    let _place = place;
                                    evaluation.run()
                                })
                                .await
                            };
                            match tokio::time::timeout_at(deadline, on_a_thread).await {
                                Ok(Ok(evaluation)) => evaluation,
                                Ok(Err(error)) => Err(ProviderFailure::error(format!(
                                    "provider '{}': its decision thread failed: {error}",
                                    guardrail.info.name
                                ))),
                                Err(_) => {
                                    late_one.store(true, std::sync::atomic::Ordering::Relaxed);
                                    Err(late())
                                }
                            }
                        }
                    })
                    .await;
                *timed_out |= late_one.load(std::sync::atomic::Ordering::Relaxed);
                decided
            }
        };
        if let Ok((decision, _)) = &decided {
            if let Some(ask) = Ask::of(decision) {
                match self.pending.hold(call.clone(), ask).await {
                    Ok(Some(id)) => *pending = Some(id),
                    Ok(None) => tracing::warn!(
                        "{} calls are held for approval already: this one gets no pending id",
                        crate::pending::MAX_PENDING
                    ),
                    Err(error) => tracing::error!("a call held for approval gets no pending id: {error}"),
                }
            }
        }
        answer::handled(call, Some(decided))
    }

    pub(super) async fn decide_one(&self, body: &[u8]) -> Reply {
        let mut out = Vec::with_capacity(512);
        let usable = self.decide(1, body, &mut out).await;
        json(if usable { StatusCode::OK } else { StatusCode::BAD_REQUEST }, out)
    }

    pub(super) async fn decide_batch(&self, body: &[u8]) -> Reply {
        // Each call is decided from its own bytes, as `/v1/decide` would.
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Batch<'a> {
            #[serde(borrow)]
            calls: Vec<&'a RawValue>,
        }
        let calls = match serde_json::from_slice::<Batch<'_>>(body) {
            Ok(Batch { calls }) => calls,
            Err(error) => return bad_batch(&error),
        };
        if calls.len() > self.options.max_batch {
            return Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_batch",
                format!(
                    "the batch has {} calls, more than the {} this server takes at once (--max-batch)",
                    calls.len(),
                    self.options.max_batch
                ),
            )
            .reply();
        }
        let mut out = Vec::with_capacity(64 + 512 * calls.len());
        out.extend_from_slice(b"{\"decisions\":[");
        for (i, call) in calls.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            self.decide(i as u64 + 1, call.get().as_bytes(), &mut out).await;
        }
        out.extend_from_slice(b"]}");
        json(StatusCode::OK, out)
    }
}

/// Adds `"pending": {"id": ..., "resume": "/v1/pending/<id>"}` to the
/// decision document written at `out[start..]`.
fn with_pending(out: &mut Vec<u8>, start: usize, id: &str) {
    let Ok(serde_json::Value::Object(mut document)) = serde_json::from_slice(&out[start..]) else { return };
    document
        .insert("pending".into(), serde_json::json!({"id": id, "resume": format!("{PENDING_PREFIX}{id}")}));
    out.truncate(start);
    let _ = serde_json::to_writer(&mut *out, &document);
}

fn bad_batch(error: &serde_json::Error) -> Reply {
    // Only this error is named: others may quote the body at any length.
    let why = error.to_string();
    let twice = match why.strip_prefix("duplicate field ") {
        Some(rest) => {
            format!(" (duplicate key {}: a key may appear once)", rest.split(' ').next().unwrap_or(""))
        }
        None => String::new(),
    };
    Refusal::new(
        StatusCode::BAD_REQUEST,
        "bad_batch",
        format!("a batch is {{\"calls\": [call, ...]}}, each call what POST /v1/decide takes{twice}"),
    )
    .reply()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use guardhost::{AbiKind, Isolation, ProviderInfo, ProviderSource};

    use super::Placement;

    fn library(never_blocks: bool, timeout_ms: Option<u64>, isolation: Isolation) -> ProviderInfo {
        ProviderInfo {
            name: "p".into(),
            source: ProviderSource::Library { path: PathBuf::from("/lib/libp.so"), symbol: "P".into() },
            abi_version: (1, 3),
            abi_kind: AbiKind::Rust,
            accepted_keys: Vec::new(),
            accepts_extra_keys: false,
            framework_injected: false,
            volatile_metadata_keys: Vec::new(),
            path_keys: Vec::new(),
            unread_inputs: Vec::new(),
            never_blocks,
            timeout_ms,
            isolation,
            transport: None,
            sha256: None,
        }
    }

    #[test]
    fn a_library_that_never_blocks_is_decided_in_place_unless_given_a_deadline() {
        assert_eq!(Placement::of(&library(false, None, Isolation::InProcess)), Placement::Thread);
        assert_eq!(Placement::of(&library(true, None, Isolation::InProcess)), Placement::Here);
        assert_eq!(Placement::of(&library(true, Some(50), Isolation::InProcess)), Placement::Awaited);
        assert_eq!(Placement::of(&library(true, None, Isolation::Process)), Placement::Awaited);
        let builtin = ProviderInfo {
            source: ProviderSource::Builtin { symbol: "AllowlistProvider".into() },
            ..library(false, None, Isolation::InProcess)
        };
        assert_eq!(Placement::of(&builtin), Placement::Here);
        // A chain goes where its least trusted entry must.
        let never = library(true, None, Isolation::InProcess);
        let may = library(false, None, Isolation::InProcess);
        assert_eq!(Placement::of_all(&[never.clone(), builtin]), Placement::Here);
        assert_eq!(Placement::of_all(&[never, may]), Placement::Thread);
    }
}
