//! Why a pack file could not be used.

/// Why a pack file could not be used: what is wrong, naming the pack (its
/// `id`, once it is known) and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackError(pub String);

impl std::fmt::Display for PackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PackError {}

/// `what` is wrong with the pack `id` (empty before the id is read).
pub(crate) fn err(id: &str, what: impl std::fmt::Display) -> PackError {
    if id.is_empty() {
        PackError(format!("policy pack: {what}"))
    } else {
        PackError(format!("policy pack `{id}`: {what}"))
    }
}
