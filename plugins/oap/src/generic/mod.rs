//! Policy packs loaded from JSON files (`policies_dir`), evaluated by their
//! declarative `evaluation_rules`.
//!
//! (Being written: see the interface below.)

use serde_json::{Map, Value};

/// Why a pack file could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackError(pub String);

impl std::fmt::Display for PackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A generic policy pack.
#[derive(Debug)]
pub struct GenericPack {
    /// The pack id, e.g. `finance.payment.charge.v1`.
    pub id: String,
    /// The capabilities a passport must list.
    pub requires_capabilities: Vec<String>,
}

/// The outcome of a generic pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every rule passed.
    Allow,
    /// The first failing rule.
    Deny {
        /// Its `deny_code`.
        code: String,
        /// A message in the spirit of APort's.
        message: String,
    },
}

impl GenericPack {
    /// Parses a pack's `policy.json`.
    pub fn from_json(_text: &str) -> Result<Self, PackError> {
        Err(PackError("not implemented yet".into()))
    }

    /// Evaluates `context` (the tool call's arguments) for `passport` (the
    /// whole passport document). State (daily totals, recent idempotency
    /// keys, counters) lives in `state`, shared by concurrent calls.
    pub fn evaluate(
        &self,
        _passport: &Value,
        _context: &Map<String, Value>,
        _state: &GenericState,
    ) -> Verdict {
        Verdict::Deny { code: "oap.evaluation_error".into(), message: "not implemented yet".into() }
    }
}

/// Counters that rules such as `daily_total` and `recent_keys` read;
/// thread-safe.
#[derive(Debug, Default)]
pub struct GenericState {}
