//! A call decided: the checks in order, the first failure (or every one,
//! for `explain`), and the state an allowed call changes, in this process
//! or in Redis.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::assurance::assurance_rank;
use crate::bind::UpdateOp;
use crate::eval::{show, truth, Cx, PackView, Tri, Val};
use crate::redis::RedisState;
use crate::shared;
use crate::state::{GenericState, Pending, StateView};

use super::{GenericPack, Reason, Verdict};

impl GenericPack {
    /// Evaluates `context` (the tool call's arguments, a JSON object; any
    /// other value holds no fields) for `passport` (the whole passport
    /// document). State (daily totals, recent idempotency keys, counters)
    /// lives in `state`, shared by concurrent calls.
    pub fn evaluate(&self, passport: &Value, context: &Value, state: &GenericState) -> Verdict {
        self.evaluate_at(passport, context, state, unix_now())
    }

    /// [`GenericPack::evaluate`] at `now` (Unix seconds), for `now()` and
    /// the state windows.
    pub fn evaluate_at(&self, passport: &Value, context: &Value, state: &GenericState, now: f64) -> Verdict {
        let empty = Map::new();
        let fields = context.as_object().unwrap_or(&empty);
        if !self.stateful {
            let cx = self.cx(passport, fields, None, now);
            return match self.check(&cx, context, true).into_iter().next() {
                Some(r) => Verdict::Deny { code: r.code, message: r.message },
                None => Verdict::Allow,
            };
        }
        if let Some(redis) = &state.shared {
            return self.evaluate_shared(passport, context, fields, redis, now);
        }
        let mut guard = state.lock();
        let (reason, pending) = self.decide(&self.cx(passport, fields, Some(&*guard), now), context);
        match reason {
            Some(r) => Verdict::Deny { code: r.code, message: r.message },
            None => {
                guard.apply(pending, now);
                Verdict::Allow
            }
        }
    }

    /// The first failing check, or none and the changes the call makes.
    fn decide(&self, cx: &Cx<'_>, context: &Value) -> (Option<Reason>, Vec<Pending>) {
        match self.check(cx, context, true).into_iter().next() {
            Some(r) => (Some(r), Vec::new()),
            None => (None, self.pending(cx)),
        }
    }

    /// [`GenericPack::evaluate_at`] on state kept in Redis: evaluated again
    /// while what it read changes before its changes are made, after a
    /// pause that grows with each lost race (see [`back_off`]).
    fn evaluate_shared(
        &self,
        passport: &Value,
        context: &Value,
        fields: &Map<String, Value>,
        redis: &RedisState,
        now: f64,
    ) -> Verdict {
        for tried in 0..shared::ATTEMPTS {
            let attempt = redis.with_connection(|connection| {
                let view = shared::RedisView::new(connection);
                let (reason, pending) = self.decide(&self.cx(passport, fields, Some(&view), now), context);
                if let Some(failure) = view.failure() {
                    return Err(failure);
                }
                match reason {
                    Some(r) => {
                        view.release().map(|()| Some(Verdict::Deny { code: r.code, message: r.message }))
                    }
                    None => Ok(view.commit(pending, now)?.then_some(Verdict::Allow)),
                }
            });
            match attempt {
                Ok(Some(verdict)) => return verdict,
                Ok(None) => back_off(tried),
                Err(why) => return Verdict::Unavailable(why),
            }
        }
        Verdict::Unavailable(format!(
            "the shared state at {} kept changing under concurrent calls: {} evaluations, none could be applied",
            redis.server(),
            shared::ATTEMPTS
        ))
    }

    /// Every failing check (not just the first), without changing `state`.
    pub fn explain(&self, passport: &Value, context: &Value, state: &GenericState, now: f64) -> Vec<Reason> {
        let empty = Map::new();
        let fields = context.as_object().unwrap_or(&empty);
        if !self.stateful {
            return self.check(&self.cx(passport, fields, None, now), context, false);
        }
        if let Some(redis) = &state.shared {
            let read = redis.with_connection(|connection| {
                let view = shared::RedisView::new(connection);
                let reasons = self.check(&self.cx(passport, fields, Some(&view), now), context, false);
                match view.failure() {
                    Some(failure) => Err(failure),
                    None => view.release().map(|()| reasons),
                }
            });
            return read.unwrap_or_else(|why| {
                vec![Reason { rule: "state".into(), code: "oap.state_unavailable".into(), message: why }]
            });
        }
        let guard = state.lock();
        self.check(&self.cx(passport, fields, Some(&*guard), now), context, false)
    }

    fn cx<'a>(
        &'a self,
        passport: &'a Value,
        context: &'a Map<String, Value>,
        state: Option<&'a dyn StateView>,
        now: f64,
    ) -> Cx<'a> {
        let subject = passport.get("passport_id").and_then(Value::as_str).unwrap_or("");
        Cx { pack: self.view(), passport, context, state, subject, now }
    }

    /// What an evaluation reads of the pack.
    pub(crate) fn view(&self) -> PackView<'_> {
        PackView {
            id: &self.id,
            doc: &self.doc,
            limit_scopes: &self.limit_scopes,
            state_vars: &self.state_vars,
            assurance: &self.assurance,
        }
    }

    /// The failing checks, in order; only the first when `first_only`.
    /// `context` is the arguments as given (`cx.context` is their fields),
    /// for the schema.
    fn check(&self, cx: &Cx<'_>, context: &Value, first_only: bool) -> Vec<Reason> {
        let mut out = Vec::new();
        if let Some((min, min_name)) = self.assurance.min.as_ref().filter(|(min, _)| *min > 0) {
            let level = cx.passport.get("assurance_level").and_then(Value::as_str);
            match level.map(|l| (l, assurance_rank(l))) {
                Some((_, Some(rank))) if rank >= *min => {}
                found => {
                    let message = match found {
                        Some((l, Some(_))) => {
                            format!("Assurance level {l} is below the pack's minimum {min_name}")
                        }
                        _ => format!(
                            "Passport assurance level is missing or unknown (pack minimum {min_name})"
                        ),
                    };
                    out.push(Reason {
                        rule: "min_assurance".into(),
                        code: "oap.assurance_insufficient".into(),
                        message,
                    });
                    if first_only {
                        return out;
                    }
                }
            }
        }
        let schema = self.context_schema.as_ref().map(|s| s.check(context)).unwrap_or_default();
        if let Some(message) = schema.invalid {
            out.push(Reason { rule: "required_context".into(), code: "oap.invalid_context".into(), message });
            if first_only {
                return out;
            }
        }
        let mut vars = Vec::new();
        for rule in &self.rules {
            let Some(expr) = &rule.expr else { continue };
            vars.clear();
            let message = match truth(&cx.eval(expr, &mut vars)) {
                Tri::True | Tri::Unknown => continue,
                Tri::False => self.message(cx, rule, expr),
                Tri::Error(e) => format!("Rule {} could not be evaluated: {e}", rule.info.name),
            };
            out.push(Reason { rule: rule.info.name.clone(), code: rule.info.deny_code.clone(), message });
            if first_only {
                return out;
            }
        }
        let mut missing: Vec<&str> = self
            .required_fields
            .iter()
            .filter(|f| cx.context.get(f.as_str()).is_none_or(Value::is_null))
            .map(String::as_str)
            .collect();
        for name in &schema.missing {
            if !missing.contains(&name.as_str()) {
                missing.push(name);
            }
        }
        if !missing.is_empty() {
            out.push(Reason {
                rule: "required_fields".into(),
                code: "oap.invalid_context".into(),
                message: format!("Missing required fields: {}", missing.join(", ")),
            });
        }
        out
    }

    /// The state changes of an allowed call.
    fn pending(&self, cx: &Cx<'_>) -> Vec<Pending> {
        let mut vars = Vec::new();
        let mut out = Vec::with_capacity(self.updates.len());
        for u in &self.updates {
            let Some(var) = self.state_vars.get(u.target.var) else { continue };
            let Ok(key) = cx.state_key(&u.target, &mut vars) else { continue };
            match &u.op {
                UpdateOp::Add(e) => {
                    // Sums only grow: a negative amount must not lower the day's total.
                    if let Val::Num(amount @ 0.0..) = cx.eval(e, &mut vars) {
                        out.push(Pending::Add { key, window_secs: var.window_secs, amount });
                    }
                }
                UpdateOp::One => out.push(Pending::Add { key, window_secs: var.window_secs, amount: 1.0 }),
                UpdateOp::Insert(e) => {
                    let member = match cx.eval(e, &mut vars) {
                        Val::Str(s) => s.into_owned(),
                        v @ (Val::Num(_) | Val::Bool(_)) => show(&v),
                        _ => continue,
                    };
                    out.push(Pending::Insert { key, ttl_secs: var.window_secs, member });
                }
            }
        }
        out
    }
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// After a lost race for the shared state: a pause of up to 50 µs × 2^n
/// (at most 3.2 ms), its length drawn from the clock's nanoseconds, so
/// that callers racing for the same keys spread out instead of colliding
/// again at once (without it, a loaded machine can starve one of them
/// through every attempt).
fn back_off(attempt: usize) {
    let ceiling_us = 50u64 << attempt.min(6) as u32;
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    std::thread::sleep(std::time::Duration::from_micros(jitter % ceiling_us));
}
