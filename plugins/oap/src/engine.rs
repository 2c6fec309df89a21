//! The evaluation pipeline: APort's steps in APort's order, first failure
//! wins, then the mode.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use guardhost_abi::{Decision, Request};
use guardhost_oap_generic::{GenericPack, GenericState, RuleSupport, Verdict};
use serde_json::{json, Map, Value};

use crate::config::{Ask, Config, Mode};
use crate::mapping::{self, Route};
use crate::packs::{self, command, deny, files, mcp, messaging, web, Denial, Limits};
use crate::passport::{Passport, PassportError, PassportStore, Status, SPEC_VERSION};
use crate::rate::RateLimiter;
use crate::redis::{RedisRates, RedisState};

/// The largest tool-call context APort evaluates (the arguments as JSON; a
/// file write's `content` is not counted, only its length is checked).
pub const MAX_CONTEXT_BYTES: usize = 100 * 1024;

/// A denial, and whether `warn` mode must keep it.
struct Failure {
    denial: Denial,
    hard: bool,
    policy_id: Option<String>,
}

impl Failure {
    fn soft(denial: Denial, pack: &str) -> Self {
        Failure { denial, hard: false, policy_id: Some(pack.to_owned()) }
    }
}

/// Codes `warn` mode never turns into an allow.
const HARD_CODES: &[&str] = &[
    "oap.dangerous_operation",
    "oap.command_injection_detected",
    // A command that cannot be checked is not let through with a warning.
    "oap.command_unresolved",
    "oap.command_too_long",
    "oap.command_too_complex",
    "oap.command_unparsable",
    // Code made at run time handed to an interpreter cannot be checked either.
    "oap.command_runtime_code",
];

/// The provider's state: config, passports, packs, counters.
pub struct Engine {
    mode: Mode,
    ask: Option<Ask>,
    passport_path: Option<PathBuf>,
    default_passport: PathBuf,
    tool_mapping: BTreeMap<String, String>,
    packs: HashMap<String, Arc<GenericPack>>,
    generic_state: GenericState,
    passports: PassportStore,
    rates: Rates,
}

/// Where the per-minute windows are kept.
#[derive(Debug)]
enum Rates {
    /// In this process (the default).
    Memory(RateLimiter),
    /// In Redis (`state: redis://...`), shared by every process using it.
    Redis(RedisRates),
}

/// The code of a denial that stands for a failure of the shared state:
/// turned into a provider error by [`Engine::decide`], never answered.
const STATE_UNAVAILABLE: &str = "oap.state_unavailable";

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("mode", &self.mode)
            .field("passport_path", &self.passport_path)
            .finish_non_exhaustive()
    }
}

/// `~/x` → `$HOME/x`.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Loads every pack of `dir`: `<dir>/<name>/policy.json` and `<dir>/*.json`.
fn load_packs(dir: &Path) -> Result<HashMap<String, Arc<GenericPack>>, String> {
    let shown = crate::passport::full(dir);
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("policies_dir {} cannot be read: {e}", shown.display()))?;
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && path.join("policy.json").is_file() {
            files.push(path.join("policy.json"));
        } else if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    let mut packs = HashMap::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let pack =
            GenericPack::from_json(&text).map_err(|e| format!("policy pack {}: {e}", file.display()))?;
        packs.insert(pack.id.clone(), Arc::new(pack));
    }
    if packs.is_empty() {
        return Err(format!(
            "policies_dir {} holds no policy packs (<pack>/policy.json or <pack>.json)",
            shown.display()
        ));
    }
    Ok(packs)
}

impl Engine {
    /// Builds the engine; every config problem is an error naming the key.
    pub fn new(config: Config) -> Result<Engine, String> {
        let packs = match &config.policies_dir {
            Some(dir) => load_packs(&expand_home(dir))?,
            None => HashMap::new(),
        };
        for (tool, pack) in &config.tool_mapping {
            if packs::known_capabilities(pack).is_none() && !packs.contains_key(pack) {
                let known: Vec<&str> = packs::KNOWN_PACKS.iter().map(|(id, _)| *id).collect();
                return Err(format!(
                    "tool_mapping.{tool}: unknown policy pack `{pack}`; use one of {}, or a pack in policies_dir",
                    known.join(", ")
                ));
            }
        }
        let passport_path = config.passport_path.as_deref().map(expand_home);
        if let Some(path) = &passport_path {
            Passport::from_path(path).map_err(|e| format!("passport_path: {e}"))?;
        }
        let (rates, generic_state) = match config.state.as_deref() {
            None | Some("memory") => (Rates::Memory(RateLimiter::default()), GenericState::new()),
            Some(url) => {
                let redis = Arc::new(RedisState::new(url)?);
                (Rates::Redis(RedisRates::new(redis.clone())), GenericState::shared(redis))
            }
        };
        if let Some(ask) = &config.ask {
            ask.validate()?;
        }
        // The programs' grammars are read once, here, not on the first
        // command decided.
        guardhost_command::grammar::grammars();
        let framework = config.framework.as_deref().unwrap_or("deerflow");
        let default_passport = expand_home(&format!("~/.aport/{framework}/aport/passport.json"));
        Ok(Engine {
            mode: config.mode,
            ask: config.ask,
            passport_path,
            default_passport,
            tool_mapping: config.tool_mapping,
            packs,
            generic_state,
            passports: PassportStore::default(),
            rates,
        })
    }

    /// Decides one call. A problem with the passport or the call is a
    /// denial (fail closed), which the mode may soften; the only error is a
    /// shared state (`state: redis://...`) that cannot be asked, which the
    /// host's `fail_closed` decides.
    pub fn decide(&self, request: &Request<'_>) -> Result<Decision, String> {
        let mut metadata = Map::new();
        match self.evaluate(request, &mut metadata) {
            Ok(pack) => Ok(Decision::allow()
                .with_reason("oap.allowed", "All policy checks passed")
                .with_policy_id(pack)
                .with_metadata(metadata)),
            Err(failure) if failure.denial.code == STATE_UNAVAILABLE => Err(failure.denial.message),
            Err(failure) => Ok(self.apply_mode(failure, metadata)),
        }
    }

    fn apply_mode(&self, failure: Failure, mut metadata: Map<String, Value>) -> Decision {
        let hard = failure.hard || HARD_CODES.contains(&failure.denial.code.as_str());
        let soften = match self.mode {
            Mode::Enforce => false,
            Mode::Warn => !hard,
            Mode::Observe => true,
        };
        let Denial { code, message } = failure.denial;
        if let Some(ask) = self.ask.as_ref().filter(|a| !soften && !failure.hard && a.codes.contains(&code)) {
            // A question instead of a refusal: the host holds the call for
            // an approval bound to it.
            let decision = Decision::ask(ask.approvers.iter().cloned(), ask.timeout_s)
                .with_reason(code, message)
                .with_metadata(metadata);
            return match failure.policy_id {
                Some(policy) => decision.with_policy_id(policy),
                None => decision,
            };
        }
        if !soften {
            let decision = Decision::deny().with_reason(code, message).with_metadata(metadata);
            return match failure.policy_id {
                Some(policy) => decision.with_policy_id(policy),
                None => decision,
            };
        }
        let mode = self.mode.as_str();
        metadata.insert("mode".into(), json!(mode));
        metadata.insert(
            "would_deny".into(),
            json!({ "code": code, "message": message, "policy_id": failure.policy_id }),
        );
        let decision = Decision::allow()
            .with_reason("oap.allowed", format!("{mode} mode: would have denied ({code}): {message}"))
            .with_metadata(metadata);
        match failure.policy_id {
            Some(policy) => decision.with_policy_id(policy),
            None => decision,
        }
    }

    /// APort's steps; `Ok(pack id)` when every check passed.
    fn evaluate(&self, request: &Request<'_>, metadata: &mut Map<String, Value>) -> Result<String, Failure> {
        let tool = request.tool_name();
        let hard = |denial: Denial, policy_id: Option<String>| Failure { denial, hard: true, policy_id };
        if !valid_tool_name(tool) {
            return Err(hard(
                deny("oap.invalid_tool_name", "Tool name contains invalid characters or format"),
                None,
            ));
        }
        let input: Value = serde_json::from_str(request.tool_input_json.as_str()).unwrap_or(Value::Null);
        let Value::Object(args) = &input else {
            return Err(hard(deny("oap.invalid_context", "the tool arguments are not a JSON object"), None));
        };
        // Where the tool goes without the passport (for messages on
        // passport failures); MCP server names need the passport.
        let provisional = mapping::route(tool, &self.tool_mapping, &[]).map(|r| r.pack_id().to_owned());
        let counted =
            request.tool_input_json.len().saturating_sub(written_text_len(args, provisional.as_deref()));
        if counted > MAX_CONTEXT_BYTES {
            return Err(hard(
                deny("oap.context_too_large", "Context JSON exceeds maximum size"),
                provisional,
            ));
        }

        // `passport_path`, else the request's `agent_id` when it names a
        // file, else the default.
        let passport = match &self.passport_path {
            Some(path) => self.passports.get(path),
            None => {
                let agent = request.agent_id().filter(|a| !a.is_empty()).map(expand_home);
                self.passports.first_file(agent.as_deref(), &self.default_passport)
            }
        };
        let passport = passport.map_err(|e| match e {
            PassportError::NotFound(path) => hard(
                deny(
                    "oap.passport_not_found",
                    format!(
                        "Passport file not found at {}. Create one with aport-create-passport.sh",
                        crate::passport::full(&path).display()
                    ),
                ),
                provisional.clone(),
            ),
            PassportError::Invalid { .. } => {
                hard(deny("oap.misconfigured", e.to_string()), provisional.clone())
            }
        })?;
        metadata.insert("passport_id".into(), json!(passport.id));
        metadata.insert("owner_id".into(), json!(passport.owner_id));
        metadata.insert("assurance_level".into(), json!(passport.assurance_level));
        if passport.status != Status::Active {
            return Err(hard(
                deny(
                    "oap.passport_suspended",
                    format!(
                        "Passport status is '{}', not 'active'. Agent suspended.",
                        passport.status.as_str()
                    ),
                ),
                provisional,
            ));
        }
        if passport.spec_version != SPEC_VERSION {
            // APort's code and text (aport-guardrail-bash.sh, 1.0.36).
            return Err(hard(
                deny(
                    "oap.passport_version_mismatch",
                    format!(
                        "Passport spec version is '{}', expected '{SPEC_VERSION}'",
                        passport.spec_version
                    ),
                ),
                provisional,
            ));
        }

        let servers =
            Limits(passport.limits_of("mcp.tool.execute")).strings("allowed_servers").unwrap_or_default();
        let Some(route) = mapping::route(tool, &self.tool_mapping, &servers) else {
            return Err(Failure {
                denial: deny(
                    "oap.unknown_capability",
                    format!("Tool '{tool}' is not mapped to a policy pack"),
                ),
                hard: false,
                policy_id: None,
            });
        };
        let pack = route.pack_id().to_owned();
        let generic = self.packs.get(&pack);
        let required: Vec<&str> = match (generic, packs::known_capabilities(&pack)) {
            (Some(g), _) => g.requires_capabilities.iter().map(String::as_str).collect(),
            (None, Some(caps)) => caps.to_vec(),
            (None, None) => Vec::new(),
        };
        if let Some(missing) = required.iter().find(|c| !passport.has_capability(c)) {
            return Err(Failure::soft(
                deny(
                    "oap.unknown_capability",
                    format!("Passport does not have required capability '{missing}' for policy '{pack}'"),
                ),
                &pack,
            ));
        }

        let limits = Limits(passport.limits_of(packs::limits_key(&pack)));
        let limit_paths = |p: &str| passport.resolved_path(p, files::resolve);
        let checked = match &route {
            Route::WebSearch => {
                web::check_search(args).and_then(|()| self.rate(&passport, &pack, limits, WEB_RATE_KEYS))
            }
            Route::Listing => files::check(args, limits, files::Access::List, &limit_paths),
            Route::Mcp { server, tool } => mcp::check(args, limits, Some((server, tool)))
                .and_then(|()| self.rate(&passport, &pack, limits, &["max_calls_per_minute"])),
            Route::Pack(id) => match id.as_str() {
                "system.command.execute.v1" => command::check(args, limits),
                "data.file.read.v1" => files::check(args, limits, files::Access::Read, &limit_paths),
                "data.file.write.v1" => files::check(args, limits, files::Access::Write, &limit_paths),
                "web.fetch.v1" => web::check_fetch(args, limits)
                    .and_then(|()| self.rate(&passport, &pack, limits, WEB_RATE_KEYS)),
                "mcp.tool.execute.v1" => mcp::check(args, limits, None)
                    .and_then(|()| self.rate(&passport, &pack, limits, &["max_calls_per_minute"])),
                "messaging.message.send.v1" if generic.is_none() => messaging::check(args, limits)
                    .and_then(|()| self.rate(&passport, &pack, limits, &["msgs_per_min"])),
                _ => self.generic(&passport, &pack, &required, generic.map(Arc::as_ref), &input, metadata),
            },
        };
        checked.map_err(|denial| Failure::soft(denial, &pack))?;
        Ok(pack)
    }

    /// A pack without native checks: its `policy.json` rules, and its
    /// `required_context` schema, when `policies_dir` holds it. (Packs with
    /// native checks, command, files, fetch and MCP, check their fields as
    /// APort's local evaluator does; their schemas are compiled at load but
    /// not applied, since DeerFlow's argument names, `path`, `query`, are
    /// not theirs, `file_path`, `url`.) Limits the provider cannot check (no
    /// `policy.json`, or rules that are code in APort's evaluator) deny
    /// rather than pass unchecked; without limits, the capability suffices.
    fn generic(
        &self,
        passport: &Passport,
        pack: &str,
        required: &[&str],
        generic: Option<&GenericPack>,
        args: &Value,
        metadata: &mut Map<String, Value>,
    ) -> packs::Checked {
        // Limits count when they say something: the generator's
        // `"agent.session.create": {}` sets none.
        let limited = std::iter::once(packs::limits_key(pack))
            .chain(required.iter().copied())
            .any(|k| passport.limits_of(k).is_some_and(|l| !l.is_empty()));
        let Some(generic) = generic else {
            if limited {
                return Err(deny(
                    "oap.misconfigured",
                    format!("the passport sets limits for {pack}, which can only be checked from its policy.json: set policies_dir"),
                ));
            }
            metadata.insert("limits_checked".into(), json!(false));
            return Ok(());
        };
        if limited {
            if let Some(rule) = generic.rules().find(|r| !matches!(r.support, RuleSupport::Evaluated)) {
                return Err(deny(
                    "oap.misconfigured",
                    format!(
                        "the passport sets limits for {pack}, but its rule {} cannot be checked here",
                        rule.name
                    ),
                ));
            }
        }
        match generic.evaluate(&passport.document, args, &self.generic_state) {
            Verdict::Allow => Ok(()),
            Verdict::Deny { code, message } => Err(Denial { code, message }),
            Verdict::Unavailable(why) => Err(deny(STATE_UNAVAILABLE, why)),
        }
    }

    /// Applies a per-minute limit: the first of `keys` the passport sets.
    fn rate(&self, passport: &Passport, pack: &str, limits: Limits<'_>, keys: &[&str]) -> packs::Checked {
        let Some((key, per_minute)) = keys.iter().find_map(|k| Some((*k, limits.number(k)?))) else {
            return Ok(());
        };
        let window = format!("{}\u{0}{pack}", passport.id);
        let admitted = match &self.rates {
            Rates::Memory(rates) => rates.admit(&window, per_minute),
            Rates::Redis(rates) => {
                rates.admit(&window, per_minute).map_err(|e| deny(STATE_UNAVAILABLE, e))?
            }
        };
        if admitted {
            Ok(())
        } else {
            let message = if WEB_RATE_KEYS.contains(&key) {
                format!(
                    "Web fetch rate limit exceeded: {per_minute} requests in the last minute, max {per_minute}"
                )
            } else {
                format!(
                    "Rate limit exceeded: {per_minute} calls in the last minute, max {per_minute} ({key})"
                )
            };
            Err(deny("oap.rate_limit_exceeded", message))
        }
    }
}

/// The keys of a fetch's per-minute limit, in APort's order (its generator
/// writes `max_requests_per_min`).
const WEB_RATE_KEYS: &[&str] = &["max_requests_per_min", "max_requests_per_minute"];

/// APort's tool-name rule: 1 to 128 of `A-Z a-z 0-9 . _ -`.
fn valid_tool_name(tool: &str) -> bool {
    (1..=128).contains(&tool.len())
        && tool.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The bytes of the text a file write carries (`content`, and an edit's
/// `old_str` / `new_str`): not counted against the context limit, since
/// only its size is checked, against `max_file_size_mb`. Escapes in the
/// JSON make the text a little longer than this, never shorter.
fn written_text_len(args: &Map<String, Value>, pack: Option<&str>) -> usize {
    if pack != Some("data.file.write.v1") {
        return 0;
    }
    ["content", "old_str", "new_str"]
        .iter()
        .filter_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::len)
        .sum()
}
