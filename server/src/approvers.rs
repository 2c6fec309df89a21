//! Who answers held calls: approvers authenticated by a bearer token of
//! their own (`--approver NAME=ENV`), or named by a header that a trusted
//! proxy sets (`--approver-header NAME --trust-approver-header`). The
//! identity found is the answer's `approved_by`; a body that names
//! someone else is refused.
//!
//! Tokens are compared in constant time, every configured token each time
//! (which one matched does not show in the time taken), and are never
//! shown: `Debug` names the approvers only.

/// How the approvers of held calls are known.
#[derive(Clone, Default)]
pub struct Approvers {
    /// Each approver's name and bearer token.
    tokens: Vec<(String, String)>,
    /// A header naming the approver, set by a proxy the operator trusts.
    header: Option<String>,
    /// Whether an answer may come without an identity, `approved_by` being
    /// what its body says (`--approvals-unauthenticated`).
    pub unauthenticated: bool,
}

impl std::fmt::Debug for Approvers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a token: the names only.
        let names: Vec<&str> = self.tokens.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Approvers")
            .field("tokens", &names)
            .field("header", &self.header)
            .field("unauthenticated", &self.unauthenticated)
            .finish()
    }
}

/// An approvers' configuration that cannot be used. Its messages name
/// options and environment variables, never a token.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApproversError {
    /// An approver without a name.
    #[error("--approver: an approver needs a name (NAME=ENV)")]
    NoName,
    /// An approver named twice.
    #[error("--approver: an approver is named twice; give each one token")]
    Twice,
    /// An empty token.
    #[error("--approver: an approver's token is empty")]
    Empty,
    /// Two approvers with one token: it could not say who answered.
    #[error("--approver: two approvers have the same token; give each a token of their own")]
    Shared,
    /// An approver's token is the service's token.
    #[error("--approver: an approver's token is the server's --token-env token; give approvers tokens of their own")]
    ServiceToken,
    /// A header name HTTP does not allow.
    #[error("--approver-header: not a header name")]
    BadHeader,
}

impl Approvers {
    /// Approvers known by `tokens` (name, token), and by the `header` a
    /// trusted proxy sets; `service_token` is the `--token-env` token,
    /// which no approver may share.
    pub fn new(
        tokens: Vec<(String, String)>,
        header: Option<String>,
        service_token: Option<&str>,
    ) -> Result<Self, ApproversError> {
        for (i, (name, token)) in tokens.iter().enumerate() {
            if name.trim().is_empty() {
                return Err(ApproversError::NoName);
            }
            if token.is_empty() {
                return Err(ApproversError::Empty);
            }
            if tokens[..i].iter().any(|(other, _)| other == name) {
                return Err(ApproversError::Twice);
            }
            if tokens[..i].iter().any(|(_, other)| same(other.as_bytes(), token.as_bytes())) {
                return Err(ApproversError::Shared);
            }
            if service_token.is_some_and(|service| same(service.as_bytes(), token.as_bytes())) {
                return Err(ApproversError::ServiceToken);
            }
        }
        let header = match header {
            Some(header) => match hyper::header::HeaderName::from_bytes(header.as_bytes()) {
                Ok(name) => Some(name.as_str().to_owned()),
                Err(_) => return Err(ApproversError::BadHeader),
            },
            None => None,
        };
        Ok(Approvers { tokens, header, unauthenticated: false })
    }

    /// Whether any way of knowing an approver is configured.
    pub fn any(&self) -> bool {
        !self.tokens.is_empty() || self.header.is_some()
    }

    /// The header a trusted proxy names the approver in, if any.
    pub fn header(&self) -> Option<&str> {
        self.header.as_deref()
    }

    /// The approver whose token `authorization` (the header's value)
    /// carries as `Bearer <token>`: every token is compared, in constant
    /// time.
    pub fn by_token(&self, authorization: Option<&[u8]>) -> Option<&str> {
        let given = authorization?.strip_prefix(b"Bearer ")?;
        let mut found = None;
        for (name, token) in &self.tokens {
            if same(given, token.as_bytes()) {
                found = Some(name.as_str());
            }
        }
        found
    }

    /// The approver a trusted proxy names in `value` (the configured
    /// header's): text without control characters, at most 256 bytes.
    pub fn by_header<'a>(&self, value: Option<&'a [u8]>) -> Option<&'a str> {
        self.header.as_ref()?;
        let value = std::str::from_utf8(value?).ok()?.trim();
        (!value.is_empty() && value.len() <= 256 && !value.chars().any(char::is_control)).then_some(value)
    }
}

/// Whether `a` and `b` are the same bytes, in time that depends on their
/// lengths only.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()
    }

    #[test]
    fn approvers_are_known_by_their_token_and_never_shown() {
        let approvers =
            Approvers::new(tokens(&[("ada", "t-ada"), ("bob", "t-bob")]), None, Some("svc")).unwrap();
        assert_eq!(approvers.by_token(Some(b"Bearer t-bob")), Some("bob"));
        assert_eq!(approvers.by_token(Some(b"Bearer t-bo")), None);
        assert_eq!(approvers.by_token(Some(b"t-bob")), None);
        assert_eq!(approvers.by_token(None), None);
        assert_eq!(approvers.by_header(Some(b"ada")), None, "no header is trusted");
        assert!(!format!("{approvers:?}").contains("t-ada"));
        for (pairs, error) in [
            (&[("", "t")][..], ApproversError::NoName),
            (&[("a", "")][..], ApproversError::Empty),
            (&[("a", "t"), ("a", "u")][..], ApproversError::Twice),
            (&[("a", "t"), ("b", "t")][..], ApproversError::Shared),
            (&[("a", "svc")][..], ApproversError::ServiceToken),
        ] {
            assert_eq!(Approvers::new(tokens(pairs), None, Some("svc")).unwrap_err(), error);
        }
        let proxied = Approvers::new(vec![], Some("X-Forwarded-User".into()), None).unwrap();
        assert_eq!(proxied.header(), Some("x-forwarded-user"));
        assert_eq!(proxied.by_header(Some(b" ada ")), Some("ada"));
        assert_eq!(proxied.by_header(Some(b"a\x01")), None);
        assert_eq!(proxied.by_header(Some(b"")), None);
        assert!(Approvers::new(vec![], Some("bad header".into()), None).is_err());
    }
}
