//! From a tool name to the policy pack that decides it.
//!
//! In order, first match wins:
//! 1. the operator's `tool_mapping` (an exact name, or a prefix ending in `*`);
//! 2. DeerFlow's own tools (never taken for MCP tools): `web_search` /
//!    `image_search` (a query, not a URL), `ls` (listing a directory), `task`
//!    (a sub-agent), `ask_clarification` (a message to the user), the rest by
//!    APort's table;
//! 3. MCP tools as DeerFlow names them: `mcp__<server>__<tool>`, or
//!    `<server>_<tool>` for a server the passport's MCP limits list (the
//!    longest such server);
//! 4. APort's own table (`tool-pack-mapping.json`): the lower-cased name
//!    starts with one of a rule's prefixes or contains one of its substrings.
//!
//! A tool that matches nothing has no pack: `oap.unknown_capability`.

use std::collections::BTreeMap;

/// How a pack's checks read the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The pack, checked as APort does.
    Pack(String),
    /// `web.fetch.v1`, but the call carries a search query, not a URL.
    WebSearch,
    /// `data.file.read.v1`, listing a directory (a directory is fine).
    Listing,
    /// `mcp.tool.execute.v1` with the server and tool taken from the name.
    Mcp {
        /// The MCP server.
        server: String,
        /// The tool on it.
        tool: String,
    },
}

impl Route {
    /// The pack id.
    pub fn pack_id(&self) -> &str {
        match self {
            Route::Pack(id) => id,
            Route::WebSearch => "web.fetch.v1",
            Route::Listing => "data.file.read.v1",
            Route::Mcp { .. } => "mcp.tool.execute.v1",
        }
    }
}

/// One rule of APort's table.
struct Rule {
    prefixes: &'static [&'static str],
    substrings: &'static [&'static str],
    pack: &'static str,
}

/// APort's tool → pack table, in its order (first rule wins).
const APORT_RULES: &[Rule] = &[
    Rule {
        prefixes: &["release.", "repo.release.", "git.release"],
        substrings: &[
            "release.publish",
            "release.create",
            "npm publish",
            "pnpm publish",
            "yarn npm publish",
            "gh release create",
        ],
        pack: "code.release.publish.v1",
    },
    Rule { prefixes: &["git."], substrings: &[], pack: "code.repository.merge.v1" },
    Rule {
        prefixes: &[
            "exec.",
            "system.",
            "bash",
            "shell",
            "command",
            "run_terminal_cmd",
            "runterminalcmd",
            "run_command",
            "execute_command",
            "terminal",
            "terminal_command",
            "gateway",
            "process",
            "powershell",
            "monitor",
        ],
        substrings: &[],
        pack: "system.command.execute.v1",
    },
    Rule {
        prefixes: &["message.", "messaging.", "sms", "whatsapp", "slack", "email"],
        substrings: &[],
        pack: "messaging.message.send.v1",
    },
    Rule {
        prefixes: &[
            "mcp.",
            "read_mcp_resource",
            "readmcpresource",
            "read_mcp_resource_tool",
            "readmcpresourcetool",
            "list_mcp_resources",
            "listmcpresources",
            "list_mcp_resource_templates",
            "listmcpresourcetemplates",
        ],
        substrings: &[],
        pack: "mcp.tool.execute.v1",
    },
    Rule {
        prefixes: &[
            "agent.session.",
            "session.",
            "sessions.",
            "sessions_spawn",
            "sessions_send",
            "sessions_yield",
            "subagents",
            "session_status",
            "croncreate",
            "crondelete",
            "taskcreate",
            "taskupdate",
            "taskstop",
            "subagent",
            "subagentstart",
            "skill",
            "enterworktree",
            "exitworktree",
            "sendmessage",
            "teamcreate",
            "teamdelete",
            "remotetrigger",
            "schedulewakeup",
        ],
        substrings: &[],
        pack: "agent.session.create.v1",
    },
    Rule { prefixes: &["agent.tool."], substrings: &["tool.register"], pack: "agent.tool.register.v1" },
    Rule { prefixes: &["agent"], substrings: &[], pack: "agent.session.create.v1" },
    Rule {
        prefixes: &[],
        substrings: &["payment.refund", "finance.payment.refund"],
        pack: "finance.payment.refund.v1",
    },
    Rule {
        prefixes: &[],
        substrings: &["payment.charge", "finance.payment.charge"],
        pack: "finance.payment.charge.v1",
    },
    Rule { prefixes: &["database.", "data.export"], substrings: &[], pack: "data.export.create.v1" },
    Rule {
        prefixes: &[
            "write_file",
            "edit_file",
            "create_file",
            "delete_file",
            "remove_file",
            "str_replace",
            "strreplace",
            "search_replace",
            "write",
            "edit",
            "multiedit",
            "notebookedit",
            "file.write",
            "file.edit",
            "data.file.write",
            "shareonboardingguide",
        ],
        substrings: &[],
        pack: "data.file.write.v1",
    },
    Rule {
        prefixes: &[
            "read_file",
            "grep_search",
            "file_search",
            "codebase_search",
            "list_dir",
            "ls",
            "present_file",
            "presentfile",
            "view_image",
            "viewimage",
            "view",
            "sessions_list",
            "sessions_history",
            "cronlist",
            "read",
            "glob",
            "grep",
            "lsp",
            "file.read",
            "data.file.read",
            "listmcpresourcestool",
            "readmcpresourcetool",
            "toolsearch",
            "waitformcpservers",
        ],
        substrings: &[],
        pack: "data.file.read.v1",
    },
    Rule {
        prefixes: &[
            "image_gen.",
            "image_genimagegen",
            "image.generate",
            "image_generation",
            "image_generate",
            "imagegeneration",
            "imagegen",
        ],
        substrings: &[],
        pack: "media.image.generate.v1",
    },
    Rule {
        prefixes: &[
            "web_search",
            "web_fetch",
            "websearch",
            "image_search",
            "webfetch",
            "web.search",
            "web.fetch",
        ],
        substrings: &[],
        pack: "web.fetch.v1",
    },
    Rule { prefixes: &["browser", "web.browser"], substrings: &[], pack: "web.browser.v1" },
];

/// APort's pack for `tool`, if its table has one.
pub fn aport_pack(tool: &str) -> Option<&'static str> {
    let lower = tool.to_ascii_lowercase();
    APORT_RULES
        .iter()
        .find(|rule| {
            rule.prefixes.iter().any(|p| lower.starts_with(p))
                || rule.substrings.iter().any(|s| lower.contains(s))
        })
        .map(|rule| rule.pack)
}

/// An operator's override: `name` or `prefix*` → pack id.
fn override_for<'m>(tool: &str, overrides: &'m BTreeMap<String, String>) -> Option<&'m str> {
    if let Some(pack) = overrides.get(tool) {
        return Some(pack);
    }
    overrides
        .iter()
        .filter_map(|(pattern, pack)| Some((pattern.strip_suffix('*')?, pack)))
        .filter(|(prefix, _)| tool.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, pack)| pack.as_str())
}

/// The route for `tool`; `mcp_servers` are the servers the passport's MCP
/// limits name (for `<server>_<tool>` names).
pub fn route(tool: &str, overrides: &BTreeMap<String, String>, mcp_servers: &[&str]) -> Option<Route> {
    if let Some(pack) = override_for(tool, overrides) {
        return Some(Route::Pack(pack.to_owned()));
    }
    // DeerFlow's own tools are never taken for MCP tools, whatever servers
    // the passport names (a server called `web` must not turn `web_fetch`
    // into an MCP call that skips the URL checks).
    match tool {
        "web_search" | "image_search" => return Some(Route::WebSearch),
        "ls" | "list_dir" => return Some(Route::Listing),
        "task" => return Some(Route::Pack("agent.session.create.v1".into())),
        "ask_clarification" => return Some(Route::Pack("messaging.message.send.v1".into())),
        t if DEERFLOW_TOOLS.contains(&t) => return aport_pack(t).map(|pack| Route::Pack(pack.to_owned())),
        _ => {}
    }
    if let Some(rest) = tool.strip_prefix("mcp__") {
        if let Some((server, name)) = rest.split_once("__").filter(|(s, t)| !s.is_empty() && !t.is_empty()) {
            return Some(Route::Mcp { server: server.to_owned(), tool: name.to_owned() });
        }
    }
    // `<server>_<tool>`, the longest matching server first.
    let server = mcp_servers
        .iter()
        .filter(|s| !s.is_empty() && **s != "*")
        .filter(|s| tool.strip_prefix(**s).and_then(|r| r.strip_prefix('_')).is_some_and(|n| !n.is_empty()))
        .max_by_key(|s| s.len());
    if let Some(server) = server {
        return Some(Route::Mcp { server: (*server).to_owned(), tool: tool[server.len() + 1..].to_owned() });
    }
    aport_pack(tool).map(|pack| Route::Pack(pack.to_owned()))
}

/// DeerFlow's built-in tools that APort's table maps.
const DEERFLOW_TOOLS: &[&str] =
    &["bash", "write_file", "str_replace", "read_file", "web_fetch", "present_files", "view_image"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_aports_own() {
        // The rules above, compared with APort's published mapping file.
        let Some(data) = crate::testdata::root("mapping::tests::the_table_is_aports_own") else { return };
        let text = std::fs::read_to_string(crate::testdata::path(&data, "tool-pack-mapping.json")).unwrap();
        let mapping: serde_json::Value = serde_json::from_str(&text).unwrap();
        let rules = mapping["rules"].as_array().unwrap();
        assert_eq!(rules.len(), APORT_RULES.len());
        for (theirs, ours) in rules.iter().zip(APORT_RULES) {
            let list = |key: &str| -> Vec<String> {
                theirs[key]
                    .as_array()
                    .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
                    .unwrap_or_default()
            };
            assert_eq!(list("prefixes"), ours.prefixes, "{}", ours.pack);
            assert_eq!(list("substrings"), ours.substrings, "{}", ours.pack);
            assert_eq!(theirs["pack"], ours.pack);
        }
    }

    #[test]
    fn deerflow_tools_are_routed() {
        let none = BTreeMap::new();
        let pack = |tool: &str| route(tool, &none, &["github"]).map(|r| r.pack_id().to_owned());
        assert_eq!(pack("bash").as_deref(), Some("system.command.execute.v1"));
        assert_eq!(pack("write_file").as_deref(), Some("data.file.write.v1"));
        assert_eq!(pack("str_replace").as_deref(), Some("data.file.write.v1"));
        assert_eq!(pack("read_file").as_deref(), Some("data.file.read.v1"));
        assert_eq!(pack("present_files").as_deref(), Some("data.file.read.v1"));
        assert_eq!(pack("view_image").as_deref(), Some("data.file.read.v1"));
        assert_eq!(pack("web_fetch").as_deref(), Some("web.fetch.v1"));
        assert_eq!(route("web_search", &none, &[]), Some(Route::WebSearch));
        assert_eq!(route("image_search", &none, &[]), Some(Route::WebSearch));
        assert_eq!(route("ls", &none, &[]), Some(Route::Listing));
        assert_eq!(pack("task").as_deref(), Some("agent.session.create.v1"));
        assert_eq!(pack("ask_clarification").as_deref(), Some("messaging.message.send.v1"));
        assert_eq!(
            route("mcp__github__create_issue", &none, &[]),
            Some(Route::Mcp { server: "github".into(), tool: "create_issue".into() })
        );
        assert_eq!(
            route("github_create_issue", &none, &["github"]),
            Some(Route::Mcp { server: "github".into(), tool: "create_issue".into() })
        );
        assert_eq!(pack("gitlab_create_issue"), None);
        // A server named like a DeerFlow tool's prefix does not capture it.
        let servers = ["web", "read", "bash", "git", "github"];
        assert_eq!(route("web_fetch", &none, &servers), Some(Route::Pack("web.fetch.v1".into())));
        assert_eq!(route("read_file", &none, &servers), Some(Route::Pack("data.file.read.v1".into())));
        assert_eq!(route("web_search", &none, &servers), Some(Route::WebSearch));
        // The longest server wins.
        assert_eq!(
            route("github_create_issue", &none, &servers),
            Some(Route::Mcp { server: "github".into(), tool: "create_issue".into() })
        );
        assert_eq!(route("mcp__x", &none, &[]), None);
        assert_eq!(route("frobnicate", &none, &[]), None);
    }

    #[test]
    fn overrides_win_exact_then_longest_prefix() {
        let overrides: BTreeMap<String, String> = [
            ("bash".to_owned(), "custom.v1".to_owned()),
            ("my_*".to_owned(), "a.v1".to_owned()),
            ("my_tool*".to_owned(), "b.v1".to_owned()),
        ]
        .into();
        let pack = |tool: &str| route(tool, &overrides, &[]).map(|r| r.pack_id().to_owned());
        assert_eq!(pack("bash").as_deref(), Some("custom.v1"));
        assert_eq!(pack("my_tool_x").as_deref(), Some("b.v1"));
        assert_eq!(pack("my_other").as_deref(), Some("a.v1"));
        assert_eq!(pack("bash2").as_deref(), Some("system.command.execute.v1"));
    }
}
