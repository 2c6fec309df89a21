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


def test_the_langchain_middleware_offers_the_model_only_the_tools_its_caller_may_use():
    """A real ``create_agent`` loop: the fake model records the tools each
    model call was offered; a guest sees only what RBAC lets guests use."""
    from dataclasses import dataclass

    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool

    from guardhost.langchain import GuardrailMiddleware

    offered: list[list[str]] = []

    class RecordingModel(GenericFakeChatModel):
        def bind_tools(self, tools, **kwargs):  # type: ignore[override]
            offered.append([t.name for t in tools])
            return self

    @tool
    def bash(command: str) -> str:
        """Runs a shell command."""
        return command

    @tool
    def web_search(query: str) -> str:
        """Searches the web."""
        return query

    @dataclass
    class Context:
        user_role: str

    middleware = GuardrailMiddleware(CONFIG)
    model = RecordingModel(messages=iter([AIMessage(content="done"), AIMessage(content="done")]))
    agent = create_agent(model, [bash, web_search], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("hi")]}, context={"user_role": "guest"})
    agent.invoke({"messages": [HumanMessage("hi")]}, context={"user_role": "user"})
    assert offered == [["web_search"], ["bash", "web_search"]]

    # Without an `authorization:` section, nothing is filtered.
    plain = GuardrailMiddleware({"guardrails": CONFIG["guardrails"]})
    assert plain._filters is False


def test_guardhost_provider_filter_resources_is_deerflows_assembly_filter():
    from types import SimpleNamespace

    from guardhost.deerflow import GuardhostProvider

    roles = CONFIG["authorization"]["provider"]["config"]
    provider = GuardhostProvider(use="builtin:RbacAuthorizationProvider", config=roles)
    tools = ["bash", "web_search", "update_agent", "read_file"]
    guest = SimpleNamespace(user_id="u-1", role="guest", attributes={})
    assert provider.filter_resources(guest, "tool", tools) == ["web_search", "read_file"]
    user = SimpleNamespace(user_id="u-2", role="user", attributes={})
    assert provider.filter_resources(user, "tool", tools) == ["bash", "web_search", "read_file"]
    import pytest

    with pytest.raises(ValueError, match="resource type 'model' cannot be filtered"):
        provider.filter_resources(guest, "model", ["gpt"])
    with pytest.raises(guardhost.ProviderError, match="editor"):
        provider.filter_resources(SimpleNamespace(role="editor"), "tool", tools)
