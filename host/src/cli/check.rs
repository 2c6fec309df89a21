//! `guardhost check`: is this config usable, and what does it install?

use std::path::Path;
use std::process::ExitCode;

use guardhost::ConfigOrigin;

use super::{load_guardrail, CliError};

pub fn run(config_path: Option<&Path>) -> Result<ExitCode, CliError> {
    let (config, guardrail) = load_guardrail(config_path)?;
    let origin = match &config.origin {
        ConfigOrigin::Embedded => "embedded default config".to_owned(),
        ConfigOrigin::File(path) => path.display().to_string(),
    };
    println!("config:           {origin}");
    let Some(guardrail) = guardrail else {
        let why = if !config.section_found {
            "the file has no `guardrails:` section"
        } else if !config.guardrails.enabled {
            "`enabled` is false"
        } else {
            "no `provider` is set"
        };
        println!("guardrail:        none installed ({why}); tool calls run unchecked");
        return Ok(ExitCode::SUCCESS);
    };
    let info = &guardrail.info;
    let keys =
        if info.accepted_keys.is_empty() { "(none)".to_owned() } else { info.accepted_keys.join(", ") };
    let extra = if info.accepts_extra_keys { " (and any other key)" } else { "" };
    println!("guardrail:        installed");
    println!("provider:         {}", info.name);
    println!("source:           {}", info.source);
    println!("abi:              {}.{}", info.abi_version.0, info.abi_version.1);
    println!("accepted keys:    {keys}{extra}");
    println!(
        "framework:        {}",
        if info.framework_injected { "injected (\"deerflow\")" } else { "not injected" }
    );
    match info.isolation {
        guardhost::Isolation::Process => {
            println!(
                "isolation:        process (a `guardhost provider-server` child, restarted when it dies)"
            )
        }
        guardhost::Isolation::InProcess => println!("isolation:        in_process"),
    }
    match info.timeout_ms {
        Some(ms) => println!("timeout:          {ms} ms per call"),
        None => println!("timeout:          none (calls are waited for)"),
    }
    println!("fail_closed:      {}", guardrail.middleware.fail_closed());
    println!("passport:         {}", guardrail.middleware.passport().unwrap_or("(none)"));
    Ok(ExitCode::SUCCESS)
}
