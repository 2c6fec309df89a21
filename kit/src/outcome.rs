//! What one evaluation came to ([`Outcome`]), compared across passes,
//! paths and threads.

use guardhost::GuardrailDecision;
use guardhost::ProviderFailure;

use crate::report::shorten;

/// What one evaluation came to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// A decision, with the declared volatile metadata removed.
    Decided(GuardrailDecision),
    /// An error (not a panic).
    Failed(String),
    /// A panic, caught at the boundary.
    Panicked(String),
    /// An interrupt.
    Interrupted(String),
    /// No answer in time.
    NoAnswer(String),
    /// Not asked: it hung before, or too many calls hung.
    NotSent(String),
}

impl Outcome {
    pub(crate) fn from_result(
        result: Result<GuardrailDecision, ProviderFailure>,
        volatile: &[String],
    ) -> Outcome {
        match result {
            Ok(mut decision) => {
                for key in volatile {
                    decision.metadata.remove(key);
                }
                Outcome::Decided(decision)
            }
            Err(ProviderFailure::Error { message, panicked: true }) => Outcome::Panicked(message),
            Err(ProviderFailure::Error { message, .. }) => Outcome::Failed(message),
            Err(ProviderFailure::Interrupt(interrupt)) => Outcome::Interrupted(interrupt.message),
            // A failure of a kind this build does not know: a failure.
            Err(other) => Outcome::Failed(other.to_string()),
        }
    }

    /// Whether two outcomes agree: equal decisions, or failures of the same
    /// kind (their messages may differ).
    pub(crate) fn agrees_with(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::Decided(a), Outcome::Decided(b)) => a == b,
            (Outcome::Failed(_), Outcome::Failed(_))
            | (Outcome::Panicked(_), Outcome::Panicked(_))
            | (Outcome::Interrupted(_), Outcome::Interrupted(_)) => true,
            _ => false,
        }
    }

    /// Whether the provider answered (a decision or a failure).
    pub(crate) fn answered(&self) -> bool {
        !matches!(self, Outcome::NoAnswer(_) | Outcome::NotSent(_))
    }

    /// One line for a report.
    pub(crate) fn summary(&self) -> String {
        match self {
            Outcome::Decided(d) => {
                let mut s = if d.allow { "allow".to_owned() } else { "deny".to_owned() };
                let codes: Vec<&str> = d.reasons.iter().map(|r| &*r.code).collect();
                s.push_str(&format!(" [{}]", codes.join(", ")));
                if let Some(policy) = &d.policy_id {
                    s.push_str(&format!(" policy {policy}"));
                }
                if !d.metadata.is_empty() {
                    s.push_str(&format!(" metadata {}", serde_json::Value::Object(d.metadata.clone())));
                }
                shorten(&s, 200)
            }
            Outcome::Failed(m) => format!("error: {}", shorten(m, 200)),
            Outcome::Panicked(m) => format!("panic: {}", shorten(m, 200)),
            Outcome::Interrupted(m) => format!("interrupt: {}", shorten(m, 200)),
            Outcome::NoAnswer(m) | Outcome::NotSent(m) => m.clone(),
        }
    }
}
