"""DeerFlow's ``authorization:`` section and ``guardrails.providers``
chains through the Python package: the same decisions as the command and
the server, ``decided_by``, and the tool filter DeerFlow's assembly layer
asks before the model sees the tools."""

from __future__ import annotations

import guardhost

CONFIG = {
    "authorization": {
        "enabled": True,
        "default_role": "user",
        "provider": {
            "use": "deerflow.authz.rbac:RbacAuthorizationProvider",
            "config": {
                "roles": {
                    "user": {"tools": {"allow": "*", "deny": ["update_agent"]}},
                    "guest": {"tools": {"allow": ["web_search", "read_file"]}},
                }
            },
        },
    },
    "guardrails": {
        "enabled": True,
        "providers": [
            {"use": "builtin:AllowlistProvider", "config": {"denied_tools": ["bash"]}},
            {"use": "builtin:AllowlistProvider", "name": "no-writes", "tools": ["write_*"], "config": {"allowed_tools": []}},
        ],
    },
}


def test_the_chain_decides_in_order_and_names_the_entry():
    guardrail = guardhost.load(CONFIG)
    assert guardrail.guards == [
        ("authorization", "authorization", "rbac"),
        ("allowlist", "guardrail", "allowlist"),
        ("no-writes", "guardrail", "allowlist"),
    ]
    cases = [
        ("update_agent", {}, "authz.denied", "authorization"),
        ("bash", {"user_role": "guest"}, "authz.denied", "authorization"),
        ("bash", {}, "oap.tool_not_allowed", "allowlist"),
        ("write_file", {}, "oap.tool_not_allowed", "no-writes"),
    ]
    for tool, context, code, entry in cases:
        for asynchronous in (False, True):
            decision = guardrail.decide(tool, {}, context, "c-1", asynchronous=asynchronous)
            assert decision.allow is False, (tool, context)
            assert decision.reasons[0].code == code, (tool, context)
            assert decision.metadata["decided_by"] == entry, (tool, context)
    denied = guardrail.decide("update_agent", {}, {}, "c-1")
    assert denied.message["content"] == (
        "Guardrail denied: tool 'update_agent' was blocked (authz.denied). "
        "Reason: role 'user' is denied 'update_agent' on resource 'tool'. Choose an alternative approach."
    )
    allowed = guardrail.decide("read_file", {"path": "/x"}, {"user_role": "guest"})
    assert allowed.allow is True and allowed.metadata["decided_by"] == "allowlist"


def test_filter_tools_is_what_the_authorization_provider_allows():
    guardrail = guardhost.load(CONFIG)
    tools = ["bash", "web_search", "update_agent", "read_file"]
    assert guardrail.filter_tools(tools, {"user_role": "guest"}) == ["web_search", "read_file"]
    assert guardrail.filter_tools(tools) == ["bash", "web_search", "read_file"]
    # An unknown role is a provider error; fail_closed hides every tool.
    assert guardrail.filter_tools(tools, {"user_role": "editor"}) == []
    plain = guardhost.load({"guardrails": CONFIG["guardrails"]})
    assert plain.filter_tools(tools, {"user_role": "guest"}) == tools
