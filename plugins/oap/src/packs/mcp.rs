//! `mcp.tool.execute.v1`: calling a tool on an MCP server.
//!
//! The server and tool come from DeerFlow's tool name
//! (`mcp__<server>__<tool>`, `<server>_<tool>`) or, for APort's `mcp.*`
//! names, from the `server` and `tool` arguments. A tool *argument* named
//! `tool` is never mistaken for the tool (APort's evaluator lets the tool
//! name shadow it). In order: the server is in `allowed_servers` when set
//! (`oap.mcp_server_not_allowed`); the tool is in `allowed_tools` or starts
//! with one of `allowed_tool_prefixes` when either is set
//! (`oap.mcp_tool_not_allowed`); a `timeout` argument is within
//! `max_timeout` (`oap.timeout_exceeded`). The rate limit is applied by the
//! caller.

use serde_json::{Map, Value};

use super::{arg, deny, number_arg, Checked, Limits};

/// Checks an MCP call of `tool` on `server` (`None`: take them from the
/// arguments).
pub fn check(args: &Map<String, Value>, limits: Limits<'_>, named: Option<(&str, &str)>) -> Checked {
    let (server, tool) = match named {
        Some(pair) => pair,
        None => match (arg(args, "server"), arg(args, "tool")) {
            (Some(s), Some(t)) if !s.is_empty() && !t.is_empty() => (s, t),
            _ => {
                return Err(deny(
                    "oap.missing_required_context",
                    "an MCP call needs `server` and `tool` arguments",
                ))
            }
        },
    };
    if let Some(servers) = limits.strings("allowed_servers") {
        if !servers.iter().any(|s| *s == "*" || s.eq_ignore_ascii_case(server)) {
            return Err(deny(
                "oap.mcp_server_not_allowed",
                format!("MCP server '{server}' is not in allowed list"),
            ));
        }
    }
    let tools = limits.strings("allowed_tools");
    let prefixes = limits.strings("allowed_tool_prefixes");
    if tools.is_some() || prefixes.is_some() {
        let qualified = [format!("{server}/{tool}"), format!("{server}.{tool}"), format!("{server}__{tool}")];
        let listed =
            tools.iter().flatten().any(|t| *t == "*" || *t == tool || qualified.iter().any(|q| q == t));
        let prefixed = prefixes.iter().flatten().any(|p| tool.starts_with(p) || qualified[0].starts_with(p));
        if !listed && !prefixed {
            return Err(deny(
                "oap.mcp_tool_not_allowed",
                format!("MCP tool '{tool}' is not in allowed list"),
            ));
        }
    }
    if let (Some(max), Some(timeout)) = (limits.number("max_timeout"), number_arg(args, "timeout")) {
        if timeout > max {
            return Err(deny("oap.timeout_exceeded", "MCP timeout exceeds max_timeout"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(args: Value, limits: Value, named: Option<(&str, &str)>) -> Result<(), String> {
        check(args.as_object().unwrap(), Limits(limits.as_object()), named).map_err(|d| d.code)
    }

    #[test]
    fn servers_tools_and_timeouts() {
        let limits = json!({
            "allowed_servers": ["github"], "allowed_tools": ["create_issue"],
            "allowed_tool_prefixes": ["list_"], "max_timeout": 30
        });
        let gh = Some(("github", "create_issue"));
        assert_eq!(run(json!({}), limits.clone(), gh), Ok(()));
        assert_eq!(run(json!({}), limits.clone(), Some(("github", "list_repos"))), Ok(()));
        assert_eq!(
            run(json!({}), limits.clone(), Some(("slack", "post"))),
            Err("oap.mcp_server_not_allowed".into())
        );
        assert_eq!(
            run(json!({}), limits.clone(), Some(("github", "delete_repo"))),
            Err("oap.mcp_tool_not_allowed".into())
        );
        assert_eq!(run(json!({"timeout": 60}), limits.clone(), gh), Err("oap.timeout_exceeded".into()));
        // An argument named `tool` does not replace the tool from the name.
        assert_eq!(run(json!({"tool": "delete_repo"}), limits.clone(), gh), Ok(()));
        // APort's `mcp.*` names carry server and tool as arguments.
        assert_eq!(run(json!({"server": "github", "tool": "create_issue"}), limits.clone(), None), Ok(()));
        assert_eq!(
            run(json!({"server": "github"}), limits, None),
            Err("oap.missing_required_context".into())
        );
        assert_eq!(run(json!({}), json!({}), Some(("any", "thing"))), Ok(()));
    }
}
