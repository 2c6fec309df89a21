//! Reading a config: the file (bounded, and safe from other users), the
//! section found in it, `$ENV_VAR` references and lax booleans resolved,
//! the entries checked, and each entry's digest as written.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::authorization::{read_authorization, AuthorizationConfig};
use super::error::ConfigError;
use super::hints::looks_like_guardrails;
use super::lax::lax_booleans;
use super::secrets::{env_lookup, resolve_env, resolve_env_vars};
use super::types::{GuardrailsConfig, ProviderSpec, DEFAULT_CONFIG_YAML};
use super::vars::{ALLOW_INSECURE_CONFIG_VAR, REQUIRE_GUARDRAIL_VAR};
use crate::json::json_type;
use crate::paths::join_relative;
use crate::yaml;

/// The keys of DeerFlow's `guardrails:` section: a file whose top level
/// holds one of them (and no `guardrails:` key) is the section itself.
const SECTION_KEYS: [&str; 5] = ["enabled", "fail_closed", "passport", "provider", "providers"];

/// Every key the section may hold: found at the top level next to a
/// `guardrails:` key, one of these was meant to be indented under it.
const ALL_SECTION_KEYS: [&str; 8] =
    ["enabled", "fail_closed", "passport", "provider", "providers", "mode", "decision_log", "audit_messages"];

/// Where a config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// The embedded default.
    Embedded,
    /// A file.
    File(PathBuf),
}

/// A parsed config together with what is needed to act on it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The section.
    pub guardrails: GuardrailsConfig,
    /// Where relative `use:` paths are resolved from: the config file's
    /// directory (the working directory for the embedded default).
    pub base_dir: PathBuf,
    /// Where the config came from.
    pub origin: ConfigOrigin,
    /// False when the file was a whole application config without a
    /// `guardrails:` section (so the defaults apply).
    pub section_found: bool,
    /// DeerFlow's `authorization:` section (disabled when the file has
    /// none): the guard asked before every guardrail.
    pub authorization: AuthorizationConfig,
    /// `sha256:` and the SHA-256 of the config's text, in hex: names the
    /// version running (reload logs, `/readyz`) without showing what it
    /// holds.
    pub digest: String,
    /// The digest of each guard's entry as written (see
    /// [`LoadedConfig::guard_digests`]): the `authorization:` provider's,
    /// then each `guardrails:` entry's.
    entry_digests: EntryDigests,
}

/// The digests of the provider entries as the file writes them.
#[derive(Debug, Clone, Default, PartialEq)]
struct EntryDigests {
    authorization: Option<String>,
    guardrails: Vec<String>,
}

impl LoadedConfig {
    /// Reads a config file: a whole application `config.yaml` (its
    /// `guardrails:` section is used, everything else ignored) or a file whose
    /// top level is the section itself.
    ///
    /// The file, and every directory and link on its path, must be safe from
    /// other users (see [`crate::permissions`]), unless the environment sets
    /// [`ALLOW_INSECURE_CONFIG_VAR`]`=1`.
    pub fn from_path(path: &Path) -> Result<Self, ConfigError> {
        let text = read_bounded(path)?;
        if !insecure_config_allowed() {
            crate::permissions::check(path, crate::permissions::Subject::Config)
                .map_err(|source| ConfigError::Insecure { path: path.into(), source })?;
        }
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let base_dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        Self::from_yaml(&text, base_dir, ConfigOrigin::File(path.into()), env_lookup)
    }

    /// The embedded default config.
    pub fn embedded_default() -> Self {
        let base_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Self::from_yaml(DEFAULT_CONFIG_YAML, base_dir, ConfigOrigin::Embedded, env_lookup)
            .expect("the embedded default config is valid")
    }

    /// The provider specs of the guards it installs, in the order the
    /// middleware asks them: the `authorization:` provider (when enabled),
    /// then each `guardrails:` entry (when enabled). The same order as
    /// [`crate::Guardrail::entries`].
    pub fn guard_specs(&self) -> Vec<&ProviderSpec> {
        let authorization = &self.authorization;
        let first = authorization.enabled.then_some(authorization.provider.as_ref()).flatten();
        let guardrails = if self.guardrails.enabled { self.guardrails.entries() } else { &[] };
        first.into_iter().chain(guardrails).collect()
    }

    /// The digest of each guard's entry as the file writes it (before
    /// `$ENV_VAR` references are resolved), in the order of
    /// [`LoadedConfig::guard_specs`]: `sha256:` and hex, or `""` for a spec
    /// that was not read from YAML.
    pub fn guard_digests(&self) -> Vec<String> {
        let digests = &self.entry_digests;
        let authorization = &self.authorization;
        let first = (authorization.enabled && authorization.provider.is_some())
            .then(|| digests.authorization.clone().unwrap_or_default());
        let count = if self.guardrails.enabled { self.guardrails.entries().len() } else { 0 };
        let rest = (0..count).map(|i| digests.guardrails.get(i).cloned().unwrap_or_default());
        first.into_iter().chain(rest).collect()
    }

    /// Where the config writes each guard, in the order of
    /// [`LoadedConfig::guard_specs`]: `authorization.provider`, then
    /// the place of each `guardrails:` entry (`guardrails.providers[N]`,
    /// counting from 0).
    pub fn guard_places(&self) -> Vec<String> {
        let authorization = &self.authorization;
        let first = (authorization.enabled && authorization.provider.is_some())
            .then(|| "`authorization.provider`".to_owned());
        let chain = self.guardrails.providers.is_some();
        let entries = if self.guardrails.enabled { self.guardrails.entries() } else { &[] };
        let rest = entries.iter().enumerate().map(|(i, _)| entry_place(chain, i, None));
        first.into_iter().chain(rest).collect()
    }

    /// Why this config installs no guardrail (`None` when it installs one):
    /// the file has no section, `enabled` is false, or no provider is set.
    pub fn unguarded_reason(&self) -> Option<&'static str> {
        if self.guardrails.is_active() || self.authorization.enabled {
            None
        } else if !self.section_found {
            Some("the file has no `guardrails:` section")
        } else if !self.guardrails.enabled {
            Some("`enabled` is false")
        } else {
            Some("no `provider` is set")
        }
    }

    /// Where the config came from, as errors name it.
    pub fn origin_name(&self) -> String {
        match &self.origin {
            ConfigOrigin::Embedded => "embedded default config".to_owned(),
            ConfigOrigin::File(p) => p.display().to_string(),
        }
    }

    /// [`ConfigError::Unguarded`] when this config installs no guardrail:
    /// what `--require-guardrail` checks.
    pub fn require_guardrail(&self) -> Result<(), ConfigError> {
        match self.unguarded_reason() {
            None => Ok(()),
            Some(why) => Err(ConfigError::Unguarded { origin: self.origin_name(), why }),
        }
    }

    /// Parses config text; `lookup` resolves `$ENV_VAR` references.
    pub fn from_yaml(
        text: &str,
        base_dir: PathBuf,
        origin: ConfigOrigin,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let name = match &origin {
            ConfigOrigin::Embedded => "embedded default config".to_owned(),
            ConfigOrigin::File(p) => p.display().to_string(),
        };
        let document =
            yaml::parse(text).map_err(|source| ConfigError::Yaml { origin: name.clone(), source })?;
        let (section, section_found, authorization) = match document {
            Value::Null => return Err(ConfigError::Empty { origin: name }),
            Value::Object(mut top) => {
                // DeerFlow's `authorization:` sits beside `guardrails:`.
                let authorization = top.remove("authorization");
                let (section, found) = section_of(top, &name)?;
                (section, found, authorization)
            }
            other => return Err(ConfigError::NotAMapping { origin: name, found: json_type(&other) }),
        };
        let entry_digests = EntryDigests {
            authorization: authorization
                .as_ref()
                .and_then(|a| a.get("provider"))
                .map(|p| digest_of(&p.to_string())),
            guardrails: entry_digests(&section),
        };
        let authorization = read_authorization(authorization, &name, &lookup)?;
        // DeerFlow takes `provider: null` for no provider; here it is an
        // error, since a section that names `provider` means to have one.
        if section.get("provider").is_some_and(Value::is_null) {
            return Err(ConfigError::Section {
                origin: name,
                message: "`provider` is empty (null): give it `use: path/to/libfoo.so:Symbol` (or `use: \
                          builtin:AllowlistProvider`) on an indented line below, or remove the `provider` key \
                          and set `enabled: false` to run without a guardrail"
                    .into(),
            });
        }
        // DeerFlow resolves `$NAME` in every string of the application config
        // before its schema reads the section, so `enabled: $FLAG` and
        // `passport: $PASSPORT` work as well as secrets in `provider.config`.
        let mut section = section;
        resolve_env(&mut section, "guardrails", &lookup)
            .map_err(|(key, var)| ConfigError::MissingEnvVar { origin: name.clone(), key, var })?;
        lax_booleans(&mut section, &name);
        // The message names the key and the expected type, never the value
        // (which may be a secret from the environment).
        let mut guardrails: GuardrailsConfig = guardhost_abi::deserialize_config(section)
            .map_err(|message| ConfigError::Section { origin: name.clone(), message })?;
        check_entries(&guardrails)
            .map_err(|message| ConfigError::Section { origin: name.clone(), message })?;
        if let Some(passport) = guardrails.passport.as_mut() {
            *passport = passport_from(passport, &base_dir);
        }
        Ok(LoadedConfig {
            guardrails,
            base_dir,
            origin,
            section_found,
            authorization,
            digest: digest_of(text),
            entry_digests,
        })
    }
}

/// Checks the section's providers: not both `provider` and `providers`, a
/// chain with at least one entry, and each entry's keys.
fn check_entries(section: &GuardrailsConfig) -> Result<(), String> {
    match (&section.provider, &section.providers) {
        (Some(_), Some(_)) => {
            return Err("give either `provider:` (one provider) or `providers:` (a chain, asked in order), \
                        not both; a one-entry `providers:` list is the same as `provider:`"
                .into())
        }
        (None, Some(list)) if list.is_empty() => {
            return Err(
                "`providers` is an empty list, so no guardrail would be installed; list at least one \
                        provider (each with its `use:`), or set `enabled: false`"
                    .into(),
            )
        }
        _ => {}
    }
    let chain = section.providers.is_some();
    for (index, spec) in section.entries().iter().enumerate() {
        spec.validate().map_err(|message| match chain {
            // Each entry's messages name `provider.<key>`: say which entry.
            true => format!("{}: {message}", entry_place(chain, index, spec.name.as_deref())),
            false => message,
        })?;
    }
    Ok(())
}

/// Where the config writes entry `index` of the `guardrails:` section, as
/// every message names it: `guardrails.provider`, or
/// `guardrails.providers[1]` (counting from 0, as a YAML path does), with
/// the entry's `name:` when it has one.
pub fn entry_place(chain: bool, index: usize, name: Option<&str>) -> String {
    let place = match chain {
        true => format!("`guardrails.providers[{index}]`"),
        false => "`guardrails.provider`".to_owned(),
    };
    match name {
        Some(name) => format!("{place} ('{name}')"),
        None => place,
    }
}

/// The digest of each provider entry as the file writes it (before
/// `$ENV_VAR` references are resolved, so no secret goes into it), in the
/// order of [`GuardrailsConfig::entries`]: what names an entry's version on
/// `/readyz` and in reload messages.
fn entry_digests(section: &Value) -> Vec<String> {
    let written = |entry: &Value| digest_of(&entry.to_string());
    match (section.get("provider"), section.get("providers")) {
        (Some(entry), _) if !entry.is_null() => vec![written(entry)],
        (_, Some(Value::Array(entries))) => entries.iter().map(written).collect(),
        _ => Vec::new(),
    }
}

/// The section of a document whose top level is `top`, and whether the
/// file has one: its `guardrails:` mapping, or `top` itself when it holds
/// the section's keys. A `guardrails:` key that is not a mapping, section
/// keys beside it, and a misspelled `guardrails` key are refused.
fn section_of(mut top: Map<String, Value>, origin: &str) -> Result<(Value, bool), ConfigError> {
    let misplaced: Vec<String> =
        ALL_SECTION_KEYS.iter().filter(|k| top.contains_key(**k)).map(|k| format!("`{k}`")).collect();
    match top.remove("guardrails") {
        Some(section) if !misplaced.is_empty() => Err(ConfigError::MisplacedKeys {
            origin: origin.to_owned(),
            keys: misplaced.join(", "),
            empty: if section.is_null() { " (which has nothing under it)" } else { "" },
        }),
        Some(section @ Value::Object(_)) => Ok((section, true)),
        Some(other) => Err(ConfigError::SectionNotAMapping {
            origin: origin.to_owned(),
            found: match other {
                Value::Null => "nothing under it (null)".to_owned(),
                other => json_type(&other).to_owned(),
            },
        }),
        None if top.keys().any(|k| SECTION_KEYS.contains(&k.as_str())) => Ok((Value::Object(top), true)),
        None => match top.keys().find(|k| looks_like_guardrails(k)) {
            Some(key) => Err(ConfigError::MisspelledSection { origin: origin.to_owned(), key: key.clone() }),
            None => Ok((Value::Object(Map::new()), false)),
        },
    }
}

/// `sha256:` and the hex SHA-256 of a config's text.
pub(super) fn digest_of(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Whether a guardrail is required by the environment
/// ([`REQUIRE_GUARDRAIL_VAR`]): `false` when it is unset.
pub fn require_guardrail_from_env() -> Result<bool, ConfigError> {
    match std::env::var_os(REQUIRE_GUARDRAIL_VAR) {
        None => Ok(false),
        Some(value) => parse_require(value.to_str()),
    }
}

/// [`REQUIRE_GUARDRAIL_VAR`]'s value read: `1`/`true` or `0`/`false`.
pub(super) fn parse_require(value: Option<&str>) -> Result<bool, ConfigError> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        Some("1" | "true") => Ok(true),
        Some("0" | "false") => Ok(false),
        _ => Err(ConfigError::RequireGuardrailVar),
    }
}

/// Parses a provider's config on its own (what goes under
/// `provider.config:`), as YAML or JSON, and resolves `$ENV_VAR` references
/// as a full config would. `origin` names the source in errors.
pub fn provider_config_from_yaml(text: &str, origin: &str) -> Result<Map<String, Value>, ConfigError> {
    let document =
        yaml::parse(text).map_err(|source| ConfigError::Yaml { origin: origin.to_owned(), source })?;
    let mut config = match document {
        Value::Null => Map::new(),
        Value::Object(map) => map,
        other => {
            return Err(ConfigError::ProviderConfigNotAMapping {
                origin: origin.to_owned(),
                found: json_type(&other),
            })
        }
    };
    resolve_env_vars(&mut config, origin, &env_lookup)?;
    Ok(config)
}

/// Reads a provider's config on its own from a YAML or JSON file; see
/// [`provider_config_from_yaml`].
pub fn provider_config_from_path(path: &Path) -> Result<Map<String, Value>, ConfigError> {
    let text = read_bounded(path)?;
    provider_config_from_yaml(&text, &path.display().to_string())
}

/// Whether [`ALLOW_INSECURE_CONFIG_VAR`] is `1`, `true` or `yes`.
fn insecure_config_allowed() -> bool {
    std::env::var(ALLOW_INSECURE_CONFIG_VAR)
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// Reads a config file, never more than [`yaml::MAX_BYTES`] and one byte of
/// it: a huge file (or `/dev/zero`) is refused without being read whole.
fn read_bounded(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    let read_error = |source| ConfigError::Read { path: path.into(), source };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(yaml::MAX_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() > yaml::MAX_BYTES {
        return Err(ConfigError::Yaml { origin: path.display().to_string(), source: yaml::too_large(None) });
    }
    String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8"))
    })
}

/// `guardrails.passport` as the provider sees it: a relative path (it has
/// a directory separator or ends in `.json`) is joined to the config
/// file's directory, like every relative path in the file; anything else
/// (a hosted agent id) is kept as written.
fn passport_from(passport: &str, base_dir: &Path) -> String {
    let path = Path::new(passport);
    let looks_like_a_path = passport.contains(['/', '\\']) || passport.ends_with(".json");
    // `has_root`: `/etc/aport/passport.json` is taken as written on Windows
    // too (on the current drive), not joined to the config's folder.
    if !looks_like_a_path || path.is_absolute() || path.has_root() || passport.starts_with('~') {
        return passport.to_owned();
    }
    join_relative(base_dir, path).to_string_lossy().into_owned()
}
