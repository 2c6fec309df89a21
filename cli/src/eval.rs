//! `guardhost eval`: one tool call through the middleware.

use std::path::PathBuf;
use std::process::ExitCode;

use guardhost::{async_handler, ToolCall, ToolCallError, ToolCallRequest};
use serde_json::{json, Map, Value};

use guardhost_lines::answer::dry_run;

use crate::error::CliError;
use crate::setup::load_guardrail;

/// One tool call, as `eval` and `explain` take it.
#[derive(Debug, clap::Args)]
pub struct CallArgs {
    #[arg(long, value_name = "FILE", help = crate::setup::CONFIG_HELP)]
    pub config: Option<PathBuf>,
    /// The tool's name.
    #[arg(long, value_name = "NAME")]
    pub tool: String,
    /// The tool's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
    /// The tool call's id.
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// The runtime context, a JSON object (thread_id, user_id, user_role, ...).
    #[arg(long, value_name = "JSON")]
    context: Option<String>,
}

impl CallArgs {
    /// The call, its `--args` and `--context` read.
    pub fn call(&self) -> Result<ToolCallRequest, CliError> {
        let args = json_object("args", &self.args)?;
        let context = self.context.as_deref().map(|c| json_object("context", c)).transpose()?;
        Ok(ToolCallRequest {
            tool_call: ToolCall { name: Some(self.tool.clone()), args, id: self.id.clone(), null_id: false },
            context,
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    #[command(flatten)]
    call: CallArgs,
    /// Use the async path (the provider's aevaluate) on a tokio runtime.
    #[arg(long = "async")]
    use_async: bool,
    #[arg(long, help = crate::setup::REQUIRE_HELP)]
    require_guardrail: bool,
}

fn json_object(flag: &str, text: &str) -> Result<Map<String, Value>, CliError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(CliError::Usage(format!(
            "--{flag} must be a JSON object such as '{{\"key\": \"value\"}}', got {other}"
        ))),
        Err(e) => Err(CliError::Usage(format!(
            "--{flag} is not valid JSON ({e}); pass a JSON object such as '{{}}'"
        ))),
    }
}

pub fn run(args: EvalArgs) -> Result<ExitCode, CliError> {
    let call = args.call.call()?;
    let (config, guardrail) =
        load_guardrail(args.call.config.as_deref(), crate::setup::required(args.require_guardrail)?)?;
    crate::setup::warn_unguarded(&config);

    let Some(guardrail) = guardrail else {
        let message = dry_run(&call.tool_call);
        outln!("{}", json!({"allow": true, "decision": null, "message": message}))?;
        return Ok(ExitCode::SUCCESS);
    };
    let middleware = guardrail.middleware;
    let outcome = if args.use_async {
        let runtime = crate::setup::async_runtime()?;
        let handler = async_handler(|call: ToolCallRequest| async move { Ok(dry_run(&call.tool_call)) });
        runtime.block_on(middleware.acall_with_verdict(call, handler))
    } else {
        middleware.call_with_verdict(call, &|call| Ok(dry_run(&call.tool_call)))
    };
    match outcome {
        Ok((verdict, message)) => {
            let allow = verdict.allowed();
            outln!("{}", json!({"allow": allow, "decision": verdict.decision, "message": message}))?;
            Ok(if allow { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Err(ToolCallError::Interrupt(interrupt)) => {
            eprintln!(
                "guardhost: the provider raised an interrupt (a control-flow signal for the agent runtime, not a decision): {}; payload: {}",
                interrupt.message, interrupt.payload
            );
            Ok(ExitCode::from(3))
        }
        Err(ToolCallError::ApprovalRequired { ask, decision, .. }) => {
            outln!("{}", json!({"allow": false, "decision": decision, "ask": ask, "message": null}))?;
            eprintln!(
                "guardhost: entry '{}' holds the call for a human's approval; to decide it approved, give the same call again with --context '{{\"approval\": {{\"approved\": true, \"approved_by\": ..., \"entry\": ..., \"digest\": ..., \"deadline\": ...}}}}' (the ask's fields)",
                ask.entry
            );
            Ok(ExitCode::from(1))
        }
        Err(error) => Err(CliError::Usage(error.to_string())),
    }
}
