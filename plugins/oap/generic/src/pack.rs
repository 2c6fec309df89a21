//! A policy pack: loaded from its JSON file, evaluated by its declarative
//! `evaluation_rules`. What follows is the reference of what a pack may say
//! and how each part is read.
//!
//! A pack is a `policy.json` (APort's `aport-policies` format). Its rules'
//! `condition` strings are parsed once, at load, into a small AST; a call
//! walks the AST against borrowed JSON (no parsing, almost no allocation).
//!
//! # Order of checks
//!
//! 1. The pack's `min_assurance`: the passport's `assurance_level` must rank
//!    at least as high (`oap.assurance_insufficient`).
//! 2. The values of the context must be what the pack's `required_context`
//!    (a JSON Schema, compiled at load) allows: types, `enum`, patterns,
//!    bounds (`oap.invalid_context`, `Invalid context field priority: ...`).
//!    See [`crate::schema`] for what is checked and why.
//! 3. The `evaluation_rules`, in file order; the first rule whose condition
//!    is **false** denies with its `deny_code`.
//! 4. The pack's `required_fields`, then any other property the top level
//!    of `required_context` requires, must be present and not `null` in the
//!    context (`oap.invalid_context`, `Missing required fields: a, b`). They
//!    come after the rules so a request that both breaks a rule and lacks a
//!    field is told about the rule (the more specific reason).
//! 5. Allowed: the stateful names are updated (see *State*).
//!
//! Rules of `type: custom_validator` (named code in APort's evaluator) and
//! conditions this grammar cannot parse (a few packs carry prose such as
//! `version matches semantic versioning pattern`, or call functions that
//! need outside data such as `is_market_open`) are **skipped**: the pack
//! still loads, [`GenericPack::rules`] reports each such rule as
//! [`RuleSupport::CustomValidator`] / [`RuleSupport::Unsupported`], and the
//! caller may refuse such packs if it wants to fail closed.
//!
//! Not enforced: `required` below the top level of `required_context` (see
//! [`crate::schema`]), `limits_required` (APort's own fixture passports omit
//! listed limits such as `approval_required`), `enforcement`, `mcp`.
//!
//! # Grammar
//!
//! Python and JavaScript spellings both work: `and or not` (any case), `&& ||
//! !`, `== != === !== < <= > >=`, `in`, `not in`, `is empty`, `is not
//! empty`, `+ - * / %`, literals (`'x'`, `"x"`, numbers, `true false null
//! None`, `[a, b]`), paths `a.b[c].d`, `x.length`, methods `includes some
//! every startsWith endsWith replace split toLowerCase toUpperCase trim`,
//! lambdas `x => ...` (arguments of `some`/`every`), comprehensions `any(e
//! for x in xs)` / `all(...)`, and functions `now() to_timestamp(x)
//! getRequiredAssuranceLevel(amount, currency) ceil floor round abs min max
//! len lower upper any all`. Python's `not` binds looser than comparisons
//! (`not a == b` is `not (a == b)`), JavaScript's `!` tighter (`!a == b` is
//! `(!a) == b`). Comparisons do not chain. Unknown functions or methods are
//! a parse error (the rule is skipped, see above).
//!
//! # Names
//!
//! * `passport.X` walks the passport document; `context.X` the tool call's
//!   arguments; `policy.X` the pack document (`policy.min_assurance`).
//! * `limits.X`: first relative to the pack's own limits, i.e.
//!   `passport.limits[<cap>]` for each `requires_capabilities` entry, then
//!   `passport.limits[<pack id without .vN>]` (the first such object holding
//!   the first field wins); otherwise relative to `passport.limits` itself,
//!   so `limits.payments.charge.currency_limits` works too.
//! * Capability ids contain dots: at every object, a path looks up the
//!   **longest** run of its dotted fields that is a key (`passport.limits.
//!   finance.transaction.allowed_transaction_types` reads key
//!   `finance.transaction`), then the single field.
//! * Inside limits, when a limit is absent, a documented alias is tried
//!   ([`crate::LIMIT_ALIASES`]): `supported_currencies` falls back to the
//!   `currency_limits` object (so `currency in limits.supported_currencies`
//!   tests its keys), `refund_reason_codes` ↔ `reason_codes`,
//!   `max_export_rows` ↔ `max_rows`.
//! * A bare name: a lambda/comprehension variable if one is in scope; else a
//!   *stateful name* (below); else the context field (`amount` is
//!   `context.amount`).
//! * `x.length` is the length of a list or string.
//!
//! # Values and the three-valued logic
//!
//! Absent values (missing keys, `null`, out-of-range indexes, a field of a
//! non-object) are not errors:
//!
//! * In comparisons, `in`, arithmetic, functions and methods an absent
//!   operand makes the result **unknown**.
//! * Used directly as a truth value (`include_pii AND ...`, `NOT
//!   limits.allow_pii`, `!limits.max_timeout`): an absent **passport, limit
//!   or pack** value is `false` (an unset flag is not granted, not
//!   required); an absent **context** value is **unknown**.
//! * `and`/`or`/`not` are Kleene's (`false and unknown` = `false`, `true or
//!   unknown` = `true`, otherwise unknown stays unknown).
//! * `x is empty` is true for absent, `""`, `[]` and `{}`.
//! * A rule whose condition is **unknown does not apply** and passes: a limit
//!   the passport does not set does not constrain, and a rule about an
//!   optional context field the call does not send does not apply
//!   (`shipping_country in allowed_countries`). Presence is the job of
//!   `required_fields`.
//!
//! Types: numbers compare as numbers (JSON integers become `f64`), strings
//! compare as assurance levels when both are `L0`–`L4` (with any suffix such
//! as `L4KYC`, so `L0 < L1 < L2 < L3 < L4KYC = L4FIN`), otherwise by bytes
//! (ISO timestamps order correctly). `==` is strict (no coercion: `1 ==
//! '1'` is false). `x in list` is true when an element equals `x` or is an
//! object whose `id` equals `x` (so `'data.export' in passport.capabilities`
//! works); `x in object` tests its keys; `x in string` a substring.
//! Truthiness is Python's: `0`, `""`, `[]`, `{}` are false.
//!
//! A **type error** (ordering a string against a number, arithmetic on a
//! string, `in` a number, division by zero, an unparseable date) makes the
//! condition an error, and a rule that ends in an error **denies** with its
//! `deny_code` and a message naming the problem: sending `"amount": "9999"`
//! must not slip past `amount <= limit`. An error is absorbed only where the
//! other operand decides (`false and error` = `false`, `true or error` =
//! `true`). Evaluation never panics.
//!
//! # Functions
//!
//! * `now()`: Unix seconds (the call's clock; [`GenericPack::evaluate_at`]
//!   takes it explicitly).
//! * `to_timestamp(x)`: RFC 3339 / ISO 8601 text (`2025-01-30`,
//!   `2025-01-30T10:00:00Z`, `...+02:00`, fractions; no offset means UTC)
//!   or a number of Unix seconds (milliseconds when above 10^11) → Unix
//!   seconds.
//! * `getRequiredAssuranceLevel(amount, currency)`: from the pack's
//!   `assurance_rules` (`[{lte_minor, min_level}]`): the `min_level` of the
//!   lowest `lte_minor` ≥ `amount`; above every threshold `L4`; without
//!   `assurance_rules`, the pack's `min_assurance` (else `L0`). The currency
//!   is accepted but unused: the pack's thresholds are per minor unit.
//!
//! # State
//!
//! A bare name that the pack does **not** declare as a context field
//! (`required_fields`, `optional_fields`, `required_context.properties`) is
//! stateful when some rule uses it in one of these shapes:
//!
//! * `S + x <= limit` (or `<`), e.g. `daily_total + amount <= ...daily_cap`:
//!   a sum; an allowed call adds `x`.
//! * `S < limit` (strict), e.g. `entity_access_count[id] < max_per_hour`: a
//!   count; an allowed call adds 1. (Context values are checked with `<=`;
//!   "calls so far < max" is a count.)
//! * `x not in S`, e.g. `idempotency_key not in recent_keys`: a set; an
//!   allowed call inserts `x`.
//!
//! `S[key]` keeps one value per key (`daily_counterparty_total[cp]`). A sum
//! or count is also kept per value of each index in its limit, so
//! `daily_total + amount <= limits.currency_limits[currency].daily_cap` sums
//! per currency. Sums only grow (a negative or non-numeric amount is not
//! added). Everything is per pack and per `passport_id`. Sums and
//! counts live in fixed UTC windows: a minute if the name or limit says
//! `minute`/`per_min`, an hour if it says `hour`, else a day; set members
//! are kept 24 hours (1 hour / 1 minute likewise). Stateful names are never
//! read from the context (a caller cannot send `recent_keys: []`). State
//! changes only when a call is allowed; a stateful pack holds the state's
//! lock for the whole evaluation, so concurrent calls cannot both spend the
//! same remaining cap. Kept in Redis ([`GenericState::shared`]), the state
//! is shared by every process using the server, with the same guarantee
//! (see `shared`: a call is evaluated again when what it read changed).
//! Other undeclared bare names the pack never accumulates
//! (`data_source_reputation[...]`) read the context.
//!
//! # Codes and messages
//!
//! The OAP spec is the authority for the code vocabulary: pack `deny_code`s
//! the spec names differently are mapped by [`SPEC_CODE_ALIASES`] for every
//! pack (`oap.pii_not_allowed` → `oap.pii_blocked`). A rule's `message`, if
//! the pack gives one, is used as is; otherwise the message is built from
//! the failing comparison (`Currency GBP is not supported`, `Amount 25000
//! exceeds the limit of 20000`), else from the rule's `description`.

use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::assurance::{assurance_rank, Assurance};
use crate::bind::{self, StateVar, Update, UpdateOp};
use crate::error::{err, PackError};
use crate::eval::{self, show, truth, Cx, PackView, Tri, Val};
use crate::parser::{self, ArithOp, Base, CmpOp, Expr, Quant, Step};
use crate::redis::RedisState;
use crate::schema::ContextSchema;
use crate::shared;
use crate::state::{GenericState, Pending, StateView};

/// Pack `deny_code`s renamed to the OAP spec's vocabulary, applied to every
/// pack at load.
pub const SPEC_CODE_ALIASES: &[(&str, &str)] = &[("oap.pii_not_allowed", "oap.pii_blocked")];

/// The outcome of a generic pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every rule passed.
    Allow,
    /// The first failing rule.
    Deny {
        /// Its `deny_code` (after [`SPEC_CODE_ALIASES`]).
        code: String,
        /// A message in the spirit of APort's.
        message: String,
    },
    /// The state is kept in Redis, and the server could not be asked (or
    /// concurrent calls kept changing it): no decision, the reason why.
    Unavailable(String),
}

/// Whether a rule is evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSupport {
    /// Its condition is evaluated.
    Evaluated,
    /// A `custom_validator` (the validator's name): skipped.
    CustomValidator(String),
    /// A condition this engine cannot parse (why): skipped.
    Unsupported(String),
}

/// One rule of a pack, as loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// The rule's `name`.
    pub name: String,
    /// The code it denies with (after [`SPEC_CODE_ALIASES`]).
    pub deny_code: String,
    /// The `deny_code` as written in the pack.
    pub pack_deny_code: String,
    /// The rule's `condition`, if any.
    pub condition: Option<String>,
    /// Whether it is evaluated.
    pub support: RuleSupport,
}

/// One failing check, from [`GenericPack::explain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// The rule's name (`min_assurance` and `required_fields` for the
    /// pack-level checks).
    pub rule: String,
    /// Its code.
    pub code: String,
    /// Its message.
    pub message: String,
}

#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) info: RuleInfo,
    pub(crate) expr: Option<Expr>,
    message: Option<String>,
    description: Option<String>,
}

/// A generic policy pack.
#[derive(Debug)]
pub struct GenericPack {
    /// The pack id, e.g. `finance.payment.charge.v1`.
    pub id: String,
    /// The capabilities a passport must list.
    pub requires_capabilities: Vec<String>,
    doc: Value,
    /// `min_assurance` and `assurance_rules`.
    assurance: Assurance,
    required_fields: Vec<String>,
    /// `required_context`, compiled.
    context_schema: Option<ContextSchema>,
    /// Keys of `passport.limits` that `limits.X` is relative to.
    limit_scopes: Vec<String>,
    pub(crate) rules: Vec<Rule>,
    state_vars: Vec<StateVar>,
    updates: Vec<Update>,
    stateful: bool,
}

fn string_list(doc: &Map<String, Value>, key: &str, id: &str) -> Result<Option<Vec<String>>, PackError> {
    match doc.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) if !s.is_empty() => Ok(s.clone()),
                _ => Err(err(id, format!("`{key}` must be an array of non-empty strings"))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(err(id, format!("`{key}` must be an array of non-empty strings"))),
    }
}

fn level(v: &Value, id: &str, what: &str) -> Result<(u8, String), PackError> {
    match v.as_str().and_then(|s| assurance_rank(s).map(|r| (r, s.to_owned()))) {
        Some(l) => Ok(l),
        None => Err(err(id, format!("{what} {v} is not an assurance level (L0 to L4)"))),
    }
}

impl GenericPack {
    /// Parses a pack's `policy.json`.
    pub fn from_json(text: &str) -> Result<Self, PackError> {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| PackError(format!("policy pack is not valid JSON: {e}")))?;
        let obj = doc.as_object().ok_or_else(|| err("", "the file must hold a JSON object"))?;
        let id = match obj.get("id") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => return Err(err("", "field `id` must be a non-empty string")),
        };
        let requires_capabilities = string_list(obj, "requires_capabilities", &id)?
            .ok_or_else(|| err(&id, "field `requires_capabilities` is missing"))?;
        let min_assurance = match obj.get("min_assurance") {
            None | Some(Value::Null) => None,
            Some(v) => Some(level(v, &id, "`min_assurance`")?),
        };
        let required_fields = string_list(obj, "required_fields", &id)?.unwrap_or_default();
        let context_schema = ContextSchema::compile(&id, obj.get("required_context"))?;
        let mut declared: HashSet<String> = required_fields.iter().cloned().collect();
        declared.extend(string_list(obj, "optional_fields", &id)?.unwrap_or_default());
        let props = obj.get("required_context").and_then(|c| c.get("properties")).and_then(Value::as_object);
        declared.extend(props.into_iter().flat_map(|p| p.keys().cloned()));
        let mut assurance_rules = Vec::new();
        if let Some(rules) = obj.get("assurance_rules").filter(|v| !v.is_null()) {
            let rules = rules.as_array().ok_or_else(|| err(&id, "`assurance_rules` must be an array"))?;
            for (i, r) in rules.iter().enumerate() {
                let lte = r.get("lte_minor").and_then(Value::as_f64).filter(|n| n.is_finite());
                let (Some(lte), Some(lvl)) = (lte, r.get("min_level")) else {
                    return Err(err(
                        &id,
                        format!("`assurance_rules[{i}]` needs a number `lte_minor` and a `min_level`"),
                    ));
                };
                assurance_rules.push((lte, level(lvl, &id, &format!("`assurance_rules[{i}].min_level`"))?.1));
            }
            assurance_rules.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let raw_rules = match obj.get("evaluation_rules") {
            Some(Value::Array(r)) => r,
            Some(_) => return Err(err(&id, "`evaluation_rules` must be an array")),
            None => return Err(err(&id, "field `evaluation_rules` is missing")),
        };
        let mut rules = Vec::with_capacity(raw_rules.len());
        let mut parsed = Vec::with_capacity(raw_rules.len());
        for (i, r) in raw_rules.iter().enumerate() {
            let r = r
                .as_object()
                .ok_or_else(|| err(&id, format!("`evaluation_rules[{i}]` must be an object")))?;
            let text = |k: &str| r.get(k).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
            let name =
                text("name").ok_or_else(|| err(&id, format!("`evaluation_rules[{i}]` has no `name`")))?;
            let pack_code = text("deny_code")
                .ok_or_else(|| err(&id, format!("`evaluation_rules[{i}]` (`{name}`) has no `deny_code`")))?;
            let code =
                SPEC_CODE_ALIASES.iter().find(|(from, _)| *from == pack_code).map_or(pack_code, |(_, to)| to);
            let condition = text("condition").map(str::to_owned);
            let (support, expr) = if r.get("type").and_then(Value::as_str) == Some("custom_validator") {
                (RuleSupport::CustomValidator(text("validator").unwrap_or("(unnamed)").to_owned()), None)
            } else {
                match condition.as_deref().map(parser::parse) {
                    Some(Ok(e)) => (RuleSupport::Evaluated, Some(e)),
                    Some(Err(why)) => {
                        (RuleSupport::Unsupported(format!("cannot parse the condition: {why}")), None)
                    }
                    None => (RuleSupport::Unsupported("no `condition`".into()), None),
                }
            };
            parsed.push(expr);
            rules.push(Rule {
                info: RuleInfo {
                    name: name.to_owned(),
                    deny_code: code.to_owned(),
                    pack_deny_code: pack_code.to_owned(),
                    condition,
                    support,
                },
                expr: None,
                message: text("message").map(str::to_owned),
                description: text("description").map(str::to_owned),
            });
        }
        let bound = bind::bind_pack(parsed, &declared);
        let stateful = !bound.vars.is_empty();
        for (rule, expr) in rules.iter_mut().zip(bound.exprs) {
            rule.expr = expr;
        }
        let mut limit_scopes = requires_capabilities.clone();
        let base = match id.rsplit_once('.') {
            Some((base, v))
                if v.len() > 1 && v.starts_with('v') && v[1..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                base
            }
            _ => id.as_str(),
        };
        if !limit_scopes.iter().any(|s| s == base) {
            limit_scopes.push(base.to_owned());
        }
        Ok(GenericPack {
            id,
            requires_capabilities,
            doc,
            assurance: Assurance { min: min_assurance, rules: assurance_rules },
            required_fields,
            context_schema,
            limit_scopes,
            rules,
            state_vars: bound.vars,
            updates: bound.updates,
            stateful,
        })
    }

    /// The pack's rules, in order, with whether each is evaluated.
    pub fn rules(&self) -> impl Iterator<Item = &RuleInfo> {
        self.rules.iter().map(|r| &r.info)
    }

    /// The stateful names the pack uses (see the module docs).
    pub fn state_names(&self) -> impl Iterator<Item = &str> {
        self.state_vars.iter().map(|v| &*v.name)
    }

    /// Whether evaluations read or write [`GenericState`].
    pub fn is_stateful(&self) -> bool {
        self.stateful
    }

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

    /// The deny message of a rule whose condition is false.
    fn message(&self, cx: &Cx<'_>, rule: &Rule, expr: &Expr) -> String {
        if let Some(m) = &rule.message {
            return m.clone();
        }
        if let Some(m) = self.describe(cx, rule, expr, &mut Vec::new()) {
            return m;
        }
        match &rule.description {
            Some(d) => d.clone(),
            None => format!("Denied by policy rule {}", rule.info.name),
        }
    }

    /// A sentence for the decisive comparison of a false condition.
    fn describe<'a>(
        &'a self,
        cx: &Cx<'a>,
        rule: &Rule,
        expr: &'a Expr,
        vars: &mut Vec<Val<'a>>,
    ) -> Option<String> {
        match expr {
            Expr::Or(..) => {
                let mut parts = Vec::new();
                disjuncts(expr, &mut parts);
                let decisive = parts.into_iter().find(|p| matches!(p, Expr::In(..) | Expr::Cmp(..)))?;
                self.describe(cx, rule, decisive, vars)
            }
            Expr::And(a, b) => {
                let first_false =
                    [a, b].into_iter().find(|side| truth(&cx.eval(side, vars)) == Tri::False)?;
                self.describe(cx, rule, first_false, vars)
            }
            // `NOT (x in blocked)`, `NOT any(item.c in blocked for item in items)`.
            Expr::Not(inner) => match &**inner {
                Expr::In(needle, hay, false) => {
                    Some(self.membership_message(cx, rule, needle, hay, true, vars))
                }
                Expr::Comp(Quant::Any, elem, binder, iter) => {
                    let Expr::In(needle, hay, false) = &**elem else { return None };
                    let items: Vec<Val<'a>> = match cx.eval(iter, vars) {
                        Val::Arr(a) => a.iter().map(|v| eval::from_json(v, eval::Src::Data)).collect(),
                        Val::List(l) => l,
                        _ => return None,
                    };
                    for item in items {
                        vars.resize(binder.slot, Val::Missing(eval::Src::Data));
                        vars.push(item);
                        if truth(&cx.eval(elem, vars)) == Tri::True {
                            return Some(self.membership_message(cx, rule, needle, hay, true, vars));
                        }
                    }
                    None
                }
                _ => None,
            },
            Expr::In(needle, hay, negated) => {
                Some(self.membership_message(cx, rule, needle, hay, *negated, vars))
            }
            Expr::Cmp(op, a, b) => {
                let (va, vb) = (show(&cx.eval(a, vars)), show(&cx.eval(b, vars)));
                Some(match (op, &**a) {
                    (CmpOp::Le | CmpOp::Lt, Expr::Arith(ArithOp::Add, x, y)) => {
                        let (vx, vy) = (show(&cx.eval(x, vars)), show(&cx.eval(y, vars)));
                        let (lx, ly) = (label(self, x), label(self, y).to_lowercase());
                        format!("{lx} {vx} plus {ly} {vy} exceeds the limit of {vb}")
                    }
                    (CmpOp::Lt, Expr::State(_)) => {
                        format!("{} {va} has reached the limit of {vb}", label(self, a))
                    }
                    (CmpOp::Le | CmpOp::Lt, _) => {
                        format!("{} {va} exceeds the limit of {vb}", label(self, a))
                    }
                    (CmpOp::Ge | CmpOp::Gt, _) => {
                        format!("{} {va} is below the required {vb}", label(self, a))
                    }
                    (CmpOp::Eq, _) => format!("{} is {va}, not {vb}", label(self, a)),
                    (CmpOp::Ne, _) => format!("{} must not be {vb}", label(self, a)),
                })
            }
            _ => None,
        }
    }

    /// `needle in hay` was false (or, `excluded`, true where it must not be).
    fn membership_message<'a>(
        &'a self,
        cx: &Cx<'a>,
        rule: &Rule,
        needle: &'a Expr,
        hay: &Expr,
        excluded: bool,
        vars: &mut Vec<Val<'a>>,
    ) -> String {
        let value = show(&cx.eval(needle, vars));
        let label = label(self, needle);
        let what = if let Expr::State(_) = hay {
            "has already been used"
        } else if excluded {
            if last_field(hay).is_some_and(|f| f.contains("block")) {
                "is blocked"
            } else {
                "is restricted"
            }
        } else if rule.info.deny_code.contains("unsupported") {
            "is not supported"
        } else {
            "is not allowed"
        };
        format!("{label} {value} {what}")
    }
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn disjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Or(a, b) => {
            disjuncts(a, out);
            disjuncts(b, out);
        }
        other => out.push(other),
    }
}

fn last_field(e: &Expr) -> Option<&str> {
    match e {
        Expr::Path(_, steps) => steps.iter().rev().find_map(|s| match s {
            Step::Field(f) => Some(&**f),
            Step::Index(_) => None,
        }),
        _ => None,
    }
}

fn humanize(name: &str) -> String {
    let words = name.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => "Value".into(),
    }
}

/// What a value is called in a message.
fn label(pack: &GenericPack, e: &Expr) -> String {
    match e {
        Expr::Path(base, steps) => {
            let fields: Vec<&str> = steps
                .iter()
                .filter_map(|s| match s {
                    Step::Field(f) => Some(&**f),
                    Step::Index(_) => None,
                })
                .collect();
            match fields.as_slice() {
                [.., owner, "length"] => format!("Number of {}", owner.replace('_', " ")),
                [.., last] => humanize(last),
                [] => match base {
                    Base::Var(_) => "Item".into(),
                    _ => "Value".into(),
                },
            }
        }
        Expr::State(r) => pack.state_vars.get(r.var).map_or_else(|| "Total".into(), |v| humanize(&v.name)),
        Expr::Call(..) => "Required level".into(),
        _ => "Value".into(),
    }
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
