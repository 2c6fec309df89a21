//! The environment variables that change how a config is read.

/// The environment variable that makes a config installing no guardrail an
/// error, as `--require-guardrail` does: `1` or `true` (any case) to
/// require one, `0` or `false` not to; anything else is an error.
pub const REQUIRE_GUARDRAIL_VAR: &str = "GUARDHOST_REQUIRE_GUARDRAIL";

/// The environment variable that lets a config file others can change be
/// read: set by whoever starts guardhost, never by the file.
pub const ALLOW_INSECURE_CONFIG_VAR: &str = "GUARDHOST_ALLOW_INSECURE_CONFIG";
