//! The allowlist guardrail provider (name `allowlist`): allows or denies a
//! tool call by the tool's name alone.
//!
//! This crate is both guardhost's built-in provider (linked statically, named
//! `builtin:AllowlistProvider` in YAML) and a reference provider library
//! exporting the symbol `AllowlistProvider`, so the two paths run the very
//! same code.
//!
//! Rules, in order:
//! 1. a tool name holding a character that is invisible or changes how the
//!    name reads ([`invisible`]: control and format characters, zero-width
//!    and bidi controls, line separators, whitespace other than the ASCII
//!    space, fillers, variation selectors) → deny, `oap.invalid_tool_name`,
//!    `tool name "<name, escaped>" contains an invisible or control
//!    character (U+XXXX)`; whatever the lists say;
//! 2. `allowed_tools` or `allowed_patterns` set (even to `[]`) and the
//!    tool neither in `allowed_tools` nor matching a pattern of
//!    `allowed_patterns` → deny, `oap.tool_not_allowed`, `tool '<name>'
//!    not in allowlist`;
//! 3. the tool in `denied_tools`, or matching a pattern of
//!    `denied_patterns` → deny, `oap.tool_not_allowed`, `tool '<name>' is
//!    denied`;
//! 4. otherwise allow, `oap.allowed`.
//!
//! `allowed_patterns` and `denied_patterns` are a guardhost extension
//! (DeerFlow's two lists keep their exact meaning): glob patterns (`*` any
//! run of characters, `?` one; [`guardhost_abi::glob`]), for tools whose
//! names carry a prefix, as MCP tools do (`mcp__github__delete_repo` is
//! not `github__delete_repo`; `*github__delete_repo` or `*__delete_repo`
//! matches both).
//!
//! How names are compared: exactly, case-sensitively, as DeerFlow does, for
//! every name that passes rule 1, with one difference: `denied_tools` is
//! matched after trimming ASCII whitespace from both ends of the name (and
//! of each listed name), so `"bash "` is denied as `bash` is.
//! `allowed_tools` stays exact: a padded name is not in it, so it is
//! denied. Case is not folded (`Bash` is not `bash`, as in DeerFlow): list
//! the tools that may run in `allowed_tools` when other spellings must not
//! get through.
//!
//! # Example
//!
//! ```
//! use guardhost_abi::{Provider, Request};
//! use guardhost_allowlist::{AllowlistConfig, AllowlistProvider};
//!
//! let provider = AllowlistProvider::new(AllowlistConfig {
//!     denied_tools: Some(vec!["bash".into()]),
//!     ..AllowlistConfig::default()
//! })?;
//! let decision = provider.evaluate(&Request::for_tool("bash"))?;
//! assert!(!decision.allow);
//! assert_eq!(decision.reasons[0].message.as_str(), "tool 'bash' is denied");
//! # Ok::<(), guardhost_abi::ProviderError>(())
//! ```
//!
//! # Map
//!
//! One file: the config, [`AllowlistConfig`]; the provider,
//! [`struct@AllowlistProvider`]; the characters that hide in a name,
//! [`invisible`]. Its tests are in `tests.rs`.
#![forbid(unsafe_code)]

use std::collections::HashSet;

use guardhost_abi::{Decision, Provider, ProviderError, Request, Verdict};
use serde::Deserialize;

/// The constructor's keywords. Neither is `framework` and there is no
/// catch-all, so the host never injects `framework` here.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowlistConfig {
    /// When set (even to an empty list), only these tools may run.
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    /// These tools may never run.
    #[serde(default)]
    pub denied_tools: Option<Vec<String>>,
    /// Glob patterns of more tools that may run: with it set (even to an
    /// empty list), a tool must be in `allowed_tools` or match one.
    #[serde(default)]
    pub allowed_patterns: Option<Vec<String>>,
    /// Glob patterns of tools that may never run.
    #[serde(default)]
    pub denied_patterns: Option<Vec<String>>,
}

/// Allows or denies tool calls by name.
#[derive(Debug, Clone)]
pub struct AllowlistProvider {
    allowed: Option<Names>,
    denied: Names,
    allowed_patterns: Vec<String>,
    denied_patterns: Vec<String>,
}

/// A set of tool names. Lists are short (a handful of names): up to
/// [`Names::SCANNED`] are compared one by one, which is faster than
/// hashing the name; longer ones are hashed.
#[derive(Debug, Clone)]
enum Names {
    Few(Vec<String>),
    Many(HashSet<String>),
}

impl Names {
    const SCANNED: usize = 8;

    fn new(names: impl IntoIterator<Item = String>) -> Self {
        let set: HashSet<String> = names.into_iter().collect();
        if set.len() <= Self::SCANNED {
            Names::Few(set.into_iter().collect())
        } else {
            Names::Many(set)
        }
    }

    fn contains(&self, name: &str) -> bool {
        match self {
            Names::Few(names) => names.iter().any(|n| n == name),
            Names::Many(names) => names.contains(name),
        }
    }
}

impl Provider for AllowlistProvider {
    const NAME: &'static str = "allowlist";
    // It decides by the tool's name alone, from memory: the host prepares
    // nothing else for it, and need not expect it to wait.
    const READS_TOOL_INPUT: bool = false;
    const READS_AUTHZ_ATTRIBUTES: bool = false;
    const READS_ATTRIBUTION: bool = false;
    const NEVER_BLOCKS: bool = true;
    // Its messages quote the tool's name only: audited as written.
    const MESSAGES_QUOTE_INPUT: bool = false;
    type Config = AllowlistConfig;

    fn new(config: AllowlistConfig) -> Result<Self, ProviderError> {
        for (key, patterns) in
            [("allowed_patterns", &config.allowed_patterns), ("denied_patterns", &config.denied_patterns)]
        {
            if patterns.iter().flatten().any(|p| p.trim_ascii().is_empty()) {
                return Err(ProviderError::error(format!(
                    "`{key}` holds an empty pattern, which matches no tool: write tool names or globs such as \
                     `*__delete_repo`, or remove it"
                )));
            }
        }
        let denied = config.denied_tools.unwrap_or_default();
        let allowed = match (config.allowed_tools, &config.allowed_patterns) {
            (None, None) => None,
            (tools, _) => Some(Names::new(tools.unwrap_or_default())),
        };
        Ok(AllowlistProvider {
            allowed,
            denied: Names::new(denied.iter().map(|tool| tool.trim_ascii().to_owned())),
            allowed_patterns: config.allowed_patterns.unwrap_or_default(),
            denied_patterns: config
                .denied_patterns
                .unwrap_or_default()
                .iter()
                .map(|p| p.trim_ascii().to_owned())
                .collect(),
        })
    }

    fn evaluate(&self, request: &Request<'_>) -> Result<Decision, ProviderError> {
        self.decide(request).map(Decision::from)
    }

    /// Every decision is one reason with a static code: nothing is
    /// allocated for an allowed call, one message for a denied one.
    fn decide(&self, request: &Request<'_>) -> Result<Verdict, ProviderError> {
        let name = request.tool_name();
        // A printable ASCII name (the usual one) needs no closer look.
        let printable = name.bytes().all(|b| (b' '..=b'~').contains(&b));
        let bad = if printable { None } else { name.chars().find(|&c| invisible(c)) };
        if let Some(bad) = bad {
            return Ok(Verdict::deny(
                "oap.invalid_tool_name",
                format!(
                    "tool name {name:?} contains an invisible or control character (U+{:04X})",
                    u32::from(bad)
                ),
            ));
        }
        if self.allowed.as_ref().is_some_and(|allowed| {
            !allowed.contains(name) && !self.allowed_patterns.iter().any(|p| guardhost_abi::glob(p, name))
        }) {
            return Ok(Verdict::deny(
                "oap.tool_not_allowed",
                ["tool '", name, "' not in allowlist"].concat(),
            ));
        }
        let trimmed = name.trim_ascii();
        if self.denied.contains(trimmed)
            || self.denied_patterns.iter().any(|p| guardhost_abi::glob(p, trimmed))
        {
            return Ok(Verdict::deny("oap.tool_not_allowed", ["tool '", name, "' is denied"].concat()));
        }
        Ok(Verdict::allow("oap.allowed"))
    }
}

/// Whether `c` has no place in a tool name because it is invisible or
/// changes how the name around it reads: a control character (general
/// category Cc, NUL and the C1 controls included) or a format character
/// (Cf: soft hyphen, zero-width space, non-joiner and joiner, word joiner,
/// byte order mark, the bidi marks, embeddings, overrides and isolates, tag
/// characters, ...), a line or paragraph separator (Zl, Zp), whitespace
/// other than the ASCII space (Zs: no-break space, ideographic space, ...),
/// a Hangul or halfwidth filler, the combining grapheme joiner, a variation
/// selector, or a Mongolian free variation selector.
pub fn invisible(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            // Cf, by block.
            '\u{00AD}'
                | '\u{0600}'..='\u{0605}'
                | '\u{061C}'
                | '\u{06DD}'
                | '\u{070F}'
                | '\u{0890}'..='\u{0891}'
                | '\u{08E2}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{110BD}'
                | '\u{110CD}'
                | '\u{13430}'..='\u{1343F}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0001}'
                | '\u{E0020}'..='\u{E007F}'
                // Invisible, though not Cf: the combining grapheme joiner,
                // Hangul and halfwidth fillers, variation selectors,
                // Mongolian free variation selectors, the braille blank.
                | '\u{034F}'
                | '\u{115F}'..='\u{1160}'
                | '\u{3164}'
                | '\u{FFA0}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{E0100}'..='\u{E01EF}'
                | '\u{180B}'..='\u{180D}'
                | '\u{180F}'
                | '\u{2800}'
        )
}

guardhost_abi::export_provider!(AllowlistProvider, AllowlistProvider);

#[cfg(test)]
mod tests;
