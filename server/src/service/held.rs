//! `/v1/pending`: the calls held for a human's approval, listed, shown
//! and answered; an answer decides the call again with the approval in
//! its context.

use guardhost::{unix_now, Approval, Ask};
use hyper::StatusCode;

use super::reply::{json, Refusal, Reply};
use super::{Service, PENDING_PREFIX};
use crate::pending::{Answer, Claim, Held};

impl Service {
    /// `GET /v1/pending`: the calls waiting for an answer, filtered by
    /// `tool`, `entry` and `approver` (the calls that approver may answer).
    pub(super) async fn list(&self, query: Option<&str>, approver: Option<&str>) -> Reply {
        let mut filters = (None, None, None);
        for (key, value) in query_pairs(query.unwrap_or("")) {
            let slot = match key.as_str() {
                "tool" => &mut filters.0,
                "entry" => &mut filters.1,
                "approver" => &mut filters.2,
                _ => {
                    return Refusal::new(
                        StatusCode::BAD_REQUEST,
                        "bad_query",
                        "GET /v1/pending takes the query parameters tool, entry and approver",
                    )
                    .reply()
                }
            };
            *slot = Some(value);
        }
        let (tool, entry, may_answer) = filters;
        let listed = match self.pending.list().await {
            Ok(listed) => listed,
            Err(error) => return unavailable(&error),
        };
        let items: Vec<serde_json::Value> = listed
            .iter()
            .filter(|(_, held)| {
                tool.as_deref().is_none_or(|tool| held.call.tool_call.name.as_deref() == Some(tool))
            })
            .filter(|(_, held)| entry.as_deref().is_none_or(|entry| held.ask.entry == entry))
            .filter(|(_, held)| may_answer.as_deref().is_none_or(|who| may_approve(&held.ask, Some(who))))
            .map(|(id, held)| item(id, held, approver))
            .collect();
        json(StatusCode::OK, serde_json::to_vec(&serde_json::json!({ "pending": items })).unwrap_or_default())
    }

    /// `GET /v1/pending/{id}`: the call held under `id`, with its answer
    /// once given (what the runtime that asked polls for).
    pub(super) async fn show(&self, id: &str, approver: Option<&str>) -> Reply {
        match self.pending.get(id).await {
            Ok(Some(held)) => {
                json(StatusCode::OK, serde_json::to_vec(&item(id, &held, approver)).unwrap_or_default())
            }
            Ok(None) => unknown_pending(id),
            Err(error) => unavailable(&error),
        }
    }

    /// `POST /v1/pending/{id}`: an approver's answer to the call held under
    /// `id`, which is decided again with that approval in its context, and
    /// answered as `/v1/decide` would; with the result the metrics count.
    /// A refused answer leaves the call held; only one that is given,
    /// by an approver the call names, takes it (once).
    pub(super) async fn answer(
        &self,
        id: &str,
        body: &[u8],
        approver: Option<String>,
    ) -> (Reply, &'static str) {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Given {
            approved: bool,
            #[serde(default)]
            approved_by: Option<String>,
        }
        let Ok(Given { approved, approved_by }) = serde_json::from_slice::<Given>(body) else {
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_approval",
                "an answer is {\"approved\": true|false}, with \"approved_by\" optional (it must then name the \
                 authenticated approver)",
            );
            return (refusal.reply(), "bad");
        };
        let by = match (approver, approved_by) {
            (Some(approver), Some(named)) if named != approver => {
                let refusal = Refusal::new(
                    StatusCode::FORBIDDEN,
                    "approved_by_mismatch",
                    "`approved_by` names someone other than the authenticated approver; leave it out (the \
                     approver is who authenticated)",
                );
                return (refusal.reply(), "forbidden");
            }
            (Some(approver), _) => Some(approver),
            (None, named) if self.options.approvers.unauthenticated => named,
            (None, _) => {
                let how = match self.options.approvers.any() {
                    true => {
                        "an approver's token (`Authorization: Bearer <token>`, --approver) or the trusted \
                             proxy's header (--approver-header)"
                    }
                    false => {
                        "an approver's identity, and this server knows none: start it with --approver \
                              NAME=ENV (or --approver-header behind a trusted proxy)"
                    }
                };
                let refusal = Refusal::new(
                    StatusCode::UNAUTHORIZED,
                    "approver_unauthenticated",
                    format!("answering a held call needs {how}; the call stays held"),
                );
                return (refusal.reply(), "unauthenticated");
            }
        };
        let held = match self.pending.get(id).await {
            Ok(Some(held)) => held,
            Ok(None) => return (unknown_pending(id), "unknown"),
            Err(error) => return (unavailable(&error), "unavailable"),
        };
        if held.answer.is_some() {
            return (already_answered(id), "conflict");
        }
        if !may_approve(&held.ask, by.as_deref()) {
            let refusal = Refusal::new(
                StatusCode::FORBIDDEN,
                "approver_not_allowed",
                "the approver is not one of those this call names (its `approvers`); the call stays held for \
                 one of them",
            );
            return (refusal.reply(), "forbidden");
        }
        let now = unix_now();
        let answer = Answer { approved, approved_by: by.clone(), answered_at: now, decision: None };
        match self.pending.claim(id, answer).await {
            Ok(Claim::Won) => {}
            Ok(Claim::Answered) => return (already_answered(id), "conflict"),
            Ok(Claim::Unknown) => return (unknown_pending(id), "unknown"),
            Err(error) => return (unavailable(&error), "unavailable"),
        }
        let Held { mut call, null_id, ask, .. } = held;
        call.tool_call.null_id = null_id;
        let approval = Approval {
            approved,
            entry: ask.entry,
            digest: ask.digest,
            deadline: ask.deadline,
            approved_by: by,
        };
        let approval = serde_json::to_value(approval).unwrap_or_default();
        let context = call.context.get_or_insert_with(Default::default);
        // Approvals given before (of other entries of a chain) stay.
        let approvals = match context.remove("approval") {
            Some(serde_json::Value::Array(mut given)) => {
                given.push(approval);
                serde_json::Value::Array(given)
            }
            Some(given) if !given.is_null() => serde_json::Value::Array(vec![given, approval]),
            _ => approval,
        };
        context.insert("approval".into(), approvals);
        let mut out = Vec::with_capacity(512);
        let usable = self.decide_parsed(1, Ok((call, None)), &mut out).await;
        if let Ok(decision) = serde_json::from_slice::<serde_json::Value>(&out) {
            if let Err(error) = self.pending.decided(id, decision).await {
                tracing::warn!(
                    "the answer to a held call was not recorded for GET /v1/pending/{{id}}: {error}"
                );
            }
        }
        let status = if usable { StatusCode::OK } else { StatusCode::BAD_REQUEST };
        (json(status, out), if approved { "approved" } else { "refused" })
    }
}

/// Whether `who` may answer `ask`: one of its approvers, or anyone
/// (authenticated, or not under `--approvals-unauthenticated`) when it
/// names none.
fn may_approve(ask: &Ask, who: Option<&str>) -> bool {
    ask.approvers.is_empty() || who.is_some_and(|who| ask.approvers.iter().any(|a| a == who))
}

/// A held call as `/v1/pending` shows it. Its arguments are the call's own
/// data: shown only to an authenticated approver who may answer it.
fn item(id: &str, held: &Held, approver: Option<&str>) -> serde_json::Value {
    let call = &held.call;
    let status = match &held.answer {
        None => "pending",
        Some(answer) if answer.approved => "approved",
        Some(_) => "refused",
    };
    let mut item = serde_json::json!({
        "id": id,
        "resume": format!("{PENDING_PREFIX}{id}"),
        "status": status,
        "tool": call.tool_call.name,
        "tool_call_id": call.tool_call.id,
        "entry": held.ask.entry,
        "digest": held.ask.digest,
        "deadline": held.ask.deadline,
        "approvers": held.ask.approvers,
        "held_at": held.held_at,
    });
    let Some(fields) = item.as_object_mut() else { return item };
    for key in ["thread_id", "user_id"] {
        if let Some(value) = call.context.as_ref().and_then(|c| c.get(key)).filter(|v| v.is_string()) {
            fields.insert(key.into(), value.clone());
        }
    }
    if approver.is_some() && may_approve(&held.ask, approver) {
        fields.insert("args".into(), serde_json::Value::Object(call.tool_call.args.clone()));
    }
    if let Some(answer) = &held.answer {
        fields.insert(
            "answer".into(),
            serde_json::json!({
                "approved": answer.approved,
                "approved_by": answer.approved_by,
                "answered_at": answer.answered_at,
                "decision": answer.decision,
            }),
        );
    }
    item
}

/// The `key=value` pairs of a query, percent-decoded (`+` is a space).
fn query_pairs(query: &str) -> Vec<(String, String)> {
    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = |b: u8| (b as char).to_digit(16);
                    match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                        (Some(high), Some(low)) => {
                            out.push((high * 16 + low) as u8);
                            i += 2;
                        }
                        _ => out.push(b'%'),
                    }
                }
                byte => out.push(byte),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

fn unknown_pending(id: &str) -> Reply {
    let id: String = id.chars().take(64).filter(|c| !c.is_control()).collect();
    Refusal::new(
        StatusCode::NOT_FOUND,
        "unknown_pending",
        format!(
            "no call is held under {id}: its deadline passed, it was answered long ago, or it was never held \
             (a server without --pending-store knows only the calls it held itself, since its start); decide \
             the call again"
        ),
    )
    .reply()
}

fn already_answered(id: &str) -> Reply {
    Refusal::new(
        StatusCode::CONFLICT,
        "already_answered",
        format!("the call held under {id} was answered already; GET it to see the answer"),
    )
    .reply()
}

fn unavailable(error: &crate::pending::StoreError) -> Reply {
    tracing::error!("{error}");
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "pending_store_unavailable",
        format!("the held calls cannot be reached: {error}"),
    )
    .reply()
}
