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
//! same remaining cap. Kept in Redis ([`GenericState::shared`](crate::GenericState::shared)), the state
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
//!
//! # Map
//!
//! - `load`: a pack read from its `policy.json`, each part checked and its
//!   conditions parsed and bound once;
//! - `evaluate`: a call decided (the order of checks, the state read and
//!   changed, in this process or in Redis);
//! - `message`: the words of a denial built from a false condition.

use serde_json::Value;

use crate::assurance::Assurance;
use crate::bind::{StateVar, Update};
use crate::parser::Expr;
use crate::schema::ContextSchema;

mod evaluate;
mod load;
mod message;

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
