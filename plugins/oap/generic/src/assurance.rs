//! Assurance levels: their order, and the level a pack requires for an
//! amount (`getRequiredAssuranceLevel`).

/// The assurance rank of `L0`–`L4` (suffixes such as `L4KYC` allowed).
pub(crate) fn assurance_rank(s: &str) -> Option<u8> {
    let b = s.as_bytes();
    match b {
        [b'L' | b'l', d @ b'0'..=b'4', rest @ ..] if rest.iter().all(u8::is_ascii_alphabetic) => {
            Some(d - b'0')
        }
        _ => None,
    }
}

/// A pack's assurance requirements.
#[derive(Debug, Default)]
pub(crate) struct Assurance {
    /// `min_assurance`: its rank and its name.
    pub min: Option<(u8, String)>,
    /// `assurance_rules`, `(lte_minor, min_level)`, ascending.
    pub rules: Vec<(f64, String)>,
}

impl Assurance {
    /// The level `getRequiredAssuranceLevel` returns for `amount`.
    pub(crate) fn required(&self, amount: f64) -> &str {
        match self.rules.iter().find(|(lte, _)| amount <= *lte) {
            Some((_, level)) => level,
            None if !self.rules.is_empty() => "L4",
            None => self.min.as_ref().map_or("L0", |(_, l)| l),
        }
    }
}
