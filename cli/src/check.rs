//! `guardhost check`: is this config usable, and what does it install?

use std::path::Path;
use std::process::ExitCode;

use guardhost::{Described, Guardrail, GuardrailRequest, ProviderFailure, ToolCallRequest};

use crate::error::CliError;
use crate::setup::load_guardrail;

pub fn run(config_path: Option<&Path>, require_guardrail: bool) -> Result<ExitCode, CliError> {
    let (config, guardrail) = load_guardrail(config_path, crate::setup::required(require_guardrail)?)?;
    outln!("config:           {}", config.origin_name())?;
    let Some(guardrail) = guardrail else {
        let why = config.unguarded_reason().unwrap_or("no `provider` is set");
        outln!("guardrail:        none installed ({why}); tool calls run unchecked")?;
        return Ok(ExitCode::SUCCESS);
    };
    if !guardrail.middleware.is_chain() {
        outln!("guardrail:        installed")?;
        let one = guardrail.described().next().expect("an installed guardrail has a guard");
        describe(&config, &one, "", false)?;
        outln!("passport:         {}", guardrail.middleware.passport().unwrap_or("(none)"))?;
        outln!("probe:            {}", probe(&guardrail, 0)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let guards = guardrail.middleware.guards();
    outln!("guardrail:        installed: {} guards, asked in order; the first denial wins", guards.len())?;
    if config.authorization.enabled {
        let authorization = &config.authorization;
        outln!(
            "authorization:    asked first; default_role {}, fail_closed {}{}",
            authorization.default_role,
            authorization.fail_closed,
            match authorization.infrastructure_tools.is_empty() {
                true => String::new(),
                false => format!(", lets through {}", authorization.infrastructure_tools.join(", ")),
            }
        )?;
    }
    outln!("passport:         {}", guardrail.middleware.passport().unwrap_or("(none)"))?;
    for (index, entry) in guardrail.described().enumerate() {
        outln!("\nguard {}", entry.label())?;
        describe(&config, &entry, "  ", true)?;
        outln!("  probe:            {}", probe(&guardrail, index)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The lines that describe one guard: its provider, how it is built, and
/// its middleware settings (with the tools it sees, in a chain), each
/// line after `indent`.
fn describe(
    config: &guardhost::LoadedConfig,
    entry: &Described<'_>,
    indent: &str,
    chain: bool,
) -> Result<(), CliError> {
    let info = entry.provider;
    let guard = entry.guard;
    let keys =
        if info.accepted_keys.is_empty() { "(none)".to_owned() } else { info.accepted_keys.join(", ") };
    let extra = if info.accepts_extra_keys { " (and any other key)" } else { "" };
    outln!("{indent}provider:         {}", info.name)?;
    outln!("{indent}source:           {}", info.source)?;
    let program = info.abi_kind == guardhost::AbiKind::Protocol;
    if program {
        outln!("{indent}protocol:         {} (provider protocol)", info.abi_version.0)?;
        outln!("{indent}accepted keys:    checked by the program itself")?;
        outln!("{indent}framework:        sent in init (\"deerflow\")")?;
    } else {
        outln!(
            "{indent}abi:              {}.{} ({})",
            info.abi_version.0,
            info.abi_version.1,
            info.abi_kind
        )?;
        outln!("{indent}accepted keys:    {keys}{extra}")?;
        outln!(
            "{indent}framework:        {}",
            if info.framework_injected { "injected (\"deerflow\")" } else { "not injected" }
        )?;
    }
    match info.isolation {
        guardhost::Isolation::Process if program => {
            outln!("{indent}isolation:        process (the program itself, restarted when it dies)")?
        }
        guardhost::Isolation::Process => outln!(
            "{indent}isolation:        process (a `guardhost provider-server` child, restarted when it dies)"
        )?,
        guardhost::Isolation::InProcess => outln!("{indent}isolation:        in_process")?,
    }
    match info.transport {
        #[cfg(target_os = "linux")]
        Some(guardhost::Transport::SharedMemory) => outln!(
            "{indent}transport:        shared memory ({} slots of {} KiB; pipes for larger messages)",
            guardhost_isolation::shm::SLOTS,
            guardhost_isolation::shm::SLOT_BYTES >> 10
        )?,
        // Linux only: refused elsewhere when the config is read.
        #[cfg(not(target_os = "linux"))]
        Some(guardhost::Transport::SharedMemory) => outln!("{indent}transport:        shared memory")?,
        Some(guardhost::Transport::Pipes) => outln!("{indent}transport:        pipes")?,
        None => {}
    }
    match info.timeout_ms {
        Some(ms) => outln!("{indent}timeout:          {ms} ms per call")?,
        None => outln!("{indent}timeout:          none (calls are waited for)")?,
    }
    if let Some(sha256) = &info.sha256 {
        outln!("{indent}sha256:           {sha256}")?;
    }
    if !info.path_keys.is_empty() {
        outln!(
            "{indent}paths:            {} (relative to {})",
            info.path_keys.join(", "),
            config.base_dir.display()
        )?;
    }
    if !info.unread_inputs.is_empty() {
        outln!(
            "{indent}not read:         {} (declared; not prepared for it)",
            info.unread_inputs.join(", ")
        )?;
    }
    if info.never_blocks {
        outln!("{indent}blocks:           never (declared; decided where nothing may wait)")?;
    }
    if chain {
        let sees = guard.selector().map_or_else(|| "every tool".to_owned(), ToString::to_string);
        outln!("{indent}sees:             {sees}")?;
    }
    outln!("{indent}fail_closed:      {}", guard.fail_closed())?;
    match guard.mode() {
        guardhost::Mode::Enforce => outln!("{indent}mode:             enforce (denials block calls)")?,
        mode => outln!("{indent}mode:             {mode} (denials are recorded and counted; the calls run)")?,
    }
    if !entry.written.digest.is_empty() {
        outln!("{indent}entry digest:     {} (the entry as written)", entry.written.digest)?;
    }
    Ok(())
}

/// The tool of the harmless call `check` decides: no tool has this name,
/// and it has no arguments.
const PROBE_TOOL: &str = "guardhost_check";

/// Denial codes that mean the provider cannot decide any call as meant: no
/// usable passport (missing, unreadable, invalid, of an unsupported
/// version), or a suspended or revoked one. A policy that simply denies the
/// probe (an empty allowlist, an unmapped tool) is not among them.
const BROKEN_SETUP: [&str; 4] = [
    "oap.passport_not_found",
    "oap.misconfigured",
    "oap.passport_version_mismatch",
    "oap.passport_suspended",
];

/// Decides one harmless call through the configured provider: proof that
/// it can decide at all. A provider error, or a denial whose code says the
/// setup is broken, fails the check.
fn probe(guardrail: &Guardrail, index: usize) -> Result<String, CliError> {
    let guard = &guardrail.middleware.guards()[index];
    let call = ToolCallRequest::new(PROBE_TOOL, Default::default()).with_id("guardhost-check");
    let what = format!("tool '{PROBE_TOOL}' with no arguments");
    let name = &guardrail.entries[index].name;
    let request = GuardrailRequest::from_tool_call(&call, guard.passport())
        .map_err(|e| CliError::CannotDecide(format!("cannot build the probe call: {e}")))?;
    let decision = match guard.provider().evaluate(&request) {
        Ok(decision) => decision,
        Err(ProviderFailure::Interrupt(interrupt)) => {
            return Ok(format!("{what}: the provider raised an interrupt ({})", interrupt.message))
        }
        Err(error) => {
            return Err(CliError::CannotDecide(format!(
                "provider '{name}' failed on a harmless call ({what}): {error}; every call would be decided \
                 by fail_closed instead of the provider"
            )))
        }
    };
    let first = decision.reasons.first();
    if let Some(broken) = first.filter(|r| BROKEN_SETUP.contains(&&*r.code)) {
        return Err(CliError::CannotDecide(format!(
            "provider '{name}' loads, but its setup is broken: it denied a harmless call ({what}) with {} ({}); \
             every call would be denied the same way. Fix the passport or the provider's config",
            broken.code, broken.message
        )));
    }
    let outcome = if decision.allow { "allowed" } else { "denied" };
    let reason = match first {
        None => "no reason".to_owned(),
        Some(r) if r.message.is_empty() => r.code.to_string(),
        Some(r) => format!("{}: {}", r.code, r.message),
    };
    Ok(format!("{what}: {outcome} ({reason}); the provider decides"))
}
