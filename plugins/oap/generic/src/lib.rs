//! APort's generic policy engine: the interpreter of published policy
//! packs' `policy.json` (APort's `aport-policies` format), for the Open
//! Agent Passport (OAP) provider of guardhost.
//!
//! A pack declares what a tool call must satisfy: a minimum assurance
//! level, a JSON Schema for the call's arguments (`required_context`), and
//! `evaluation_rules` whose `condition`s are small expressions over the
//! passport, its limits and the call (`amount <= limits.max_per_tx`,
//! `currency in limits.supported_currencies`, `daily_total + amount <=
//! limits.daily_cap`). [`GenericPack::from_json`] reads a pack and parses
//! its conditions once; [`GenericPack::evaluate`] decides a call in
//! microseconds, walking the parsed conditions over borrowed JSON. Running
//! totals, counters and idempotency keys live in a [`GenericState`], in
//! this process or in Redis ([`redis`]) for several processes at once.
//!
//! [`pack`] is the reference: the order of checks, the grammar of
//! conditions, how names and absent values are read, the functions, the
//! state and the deny codes and messages. [`schema`] says what
//! `required_context` checks.
//!
//! ```
//! use guardhost_oap_generic::{GenericPack, GenericState, Verdict};
//! use serde_json::json;
//!
//! let pack = GenericPack::from_json(
//!     r#"{
//!         "id": "finance.payment.refund.v1",
//!         "requires_capabilities": ["finance.payment.refund"],
//!         "min_assurance": "L2",
//!         "required_fields": ["amount", "currency"],
//!         "evaluation_rules": [{
//!             "name": "amount_within_limit",
//!             "condition": "amount <= limits.max_refund_amount",
//!             "deny_code": "oap.limit_exceeded"
//!         }]
//!     }"#,
//! )?;
//! let passport = json!({
//!     "passport_id": "agent-1",
//!     "assurance_level": "L3",
//!     "limits": {"finance.payment.refund": {"max_refund_amount": 5000}}
//! });
//! let state = GenericState::new();
//!
//! let small = json!({"amount": 1200, "currency": "USD"});
//! assert_eq!(pack.evaluate(&passport, &small, &state), Verdict::Allow);
//!
//! let large = json!({"amount": 9000, "currency": "USD"});
//! assert_eq!(
//!     pack.evaluate(&passport, &large, &state),
//!     Verdict::Deny {
//!         code: "oap.limit_exceeded".into(),
//!         message: "Amount 9000 exceeds the limit of 5000".into(),
//!     }
//! );
//!
//! let unsent = json!({"amount": 10});
//! assert_eq!(
//!     pack.evaluate(&passport, &unsent, &state),
//!     Verdict::Deny {
//!         code: "oap.invalid_context".into(),
//!         message: "Missing required fields: currency".into(),
//!     }
//! );
//! # Ok::<(), guardhost_oap_generic::PackError>(())
//! ```
//!
//! # Map
//!
//! - [`pack`]: the reference of what a pack may say, and its types; in it
//!   `load` (a pack read from its JSON), `evaluate` (a call decided) and
//!   `message` (a denial's words); [`schema`]: its `required_context`;
//! - `lexer`, `parser`: a rule's condition, text to expression;
//!   `bind`: its names resolved once, at load;
//! - `eval`: the evaluator (values, three-valued logic, paths, functions);
//!   `assurance`: assurance levels; `time`: `to_timestamp`;
//! - `state`: the counters and sets behind stateful names,
//!   [`GenericState`]; `shared`: the same in Redis, through [`redis`];
//! - `error`: why a pack could not be used, [`PackError`].

#![forbid(unsafe_code)]

mod assurance;
mod bind;
mod error;
mod eval;
mod lexer;
pub mod pack;
mod parser;
/// The Redis client keeping shared state (`guardhost-resp`).
pub mod redis {
    pub use guardhost_resp::*;
}
pub mod schema;
mod shared;
mod state;
#[cfg(test)]
#[path = "../../src/testdata.rs"]
mod testdata;
#[cfg(test)]
mod tests;
mod time;

pub use error::PackError;
pub use eval::LIMIT_ALIASES;
pub use pack::{GenericPack, Reason, RuleInfo, RuleSupport, Verdict, SPEC_CODE_ALIASES};
pub use state::GenericState;
