"""`guardhost.langchain.GuardrailMiddleware` in LangChain 1.x: unit behaviour
and a real `create_agent` loop driven by a fake chat model."""

from __future__ import annotations

import asyncio

import pytest
from helpers import Handler, call, run
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.errors import GraphInterrupt
from langgraph.types import Command

import guardhost
from guardhost.langchain import GuardrailMiddleware

PATHS = ["sync", "async"]
SECTION = {"guardrails": {"enabled": True, "provider": {"use": "builtin:AllowlistProvider", "config": {"denied_tools": ["bash"]}}}}


@pytest.mark.parametrize("path", PATHS)
def test_a_denial_is_deerflows_tool_message(path):
    handler = Handler()
    message = run(GuardrailMiddleware(SECTION), call("bash", {"command": "ls"}, id="c-9"), handler, path)
    assert handler.calls == 0
    assert isinstance(message, ToolMessage)
    assert message.content == (
        "Guardrail denied: tool 'bash' was blocked (oap.tool_not_allowed). "
        "Reason: tool 'bash' is denied. Choose an alternative approach."
    )
    assert (message.status, message.tool_call_id, message.name) == ("error", "c-9", "bash")


@pytest.mark.parametrize("path", PATHS)
def test_missing_id_and_name(path):
    middleware = GuardrailMiddleware(use="builtin:AllowlistProvider", provider_config={"allowed_tools": []})
    message = run(middleware, call(None, id=None), Handler(), path)
    assert (message.tool_call_id, message.name) == ("missing_id", "unknown_tool")
    assert "tool 'unknown_tool' was blocked" in message.content


@pytest.mark.parametrize("path", PATHS)
def test_allowed_calls_return_the_handlers_result_unchanged(path):
    handler = Handler()
    assert run(GuardrailMiddleware(SECTION), call("read_file"), handler, path) is handler.result
    command = Command(update={"messages": []})
    handler.result = command
    assert run(GuardrailMiddleware(SECTION), call("read_file"), handler, path) is command
    assert handler.calls == 2


@pytest.mark.parametrize("path", PATHS)
def test_keyword_construction_fail_closed_and_passport(test_so, path):
    closed = GuardrailMiddleware(use=test_so("ErroringProvider"))
    assert "guardrail provider error (fail-closed)" in run(closed, call("x"), Handler(), path).content
    handler = Handler()
    opened = GuardrailMiddleware(use=test_so("ErroringProvider"), fail_closed=False)
    assert run(opened, call("x"), handler, path) is handler.result
    capturing = GuardrailMiddleware(use=test_so("CapturingProvider"), passport="ap_42")
    assert capturing.guardrail.decide("x").metadata["agent_id"] == "ap_42"


@pytest.mark.parametrize("path", PATHS)
def test_an_interrupt_is_langgraphs(test_so, path):
    middleware = GuardrailMiddleware(use=test_so("InterruptingProvider"))
    handler = Handler()
    with pytest.raises(GraphInterrupt) as raised:
        run(middleware, call("deploy"), handler, path)
    assert handler.calls == 0 and raised.value.args[0][0].value == {"tool": "deploy"}


@pytest.mark.parametrize("path", PATHS)
def test_isolated_and_library_providers(allowlist_so, path):
    for isolation in (None, "process"):
        middleware = GuardrailMiddleware(use=allowlist_so, provider_config={"denied_tools": ["bash"]}, isolation=isolation)
        assert middleware.guardrail.may_block == (isolation == "process")
        assert run(middleware, call("bash"), Handler(), path).status == "error"


def test_a_disabled_config_lets_everything_through(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("guardrails:\n  enabled: false\n")
    middleware = GuardrailMiddleware(config)
    handler = Handler()
    assert middleware.guardrail is None and middleware.wrap_tool_call(call("bash"), handler) is handler.result


def test_bad_arguments():
    with pytest.raises(TypeError):
        GuardrailMiddleware()
    with pytest.raises(TypeError):
        GuardrailMiddleware(SECTION, use="builtin:AllowlistProvider")
    with pytest.raises(guardhost.BuildError, match="does not accept config key `deny`"):
        GuardrailMiddleware(use="builtin:AllowlistProvider", provider_config={"deny": ["x"]})


class ToolCallingModel(GenericFakeChatModel):
    """A fake chat model that issues scripted tool calls (tools are bound, not used)."""

    def bind_tools(self, tools, **kwargs):  # type: ignore[override]
        return self


def agent_run(asynchronous: bool):
    ran: list[str] = []

    @tool
    def read_file(path: str) -> str:
        """Reads a file."""
        ran.append("read_file")
        return f"contents of {path}"

    @tool
    def bash(command: str) -> str:
        """Runs a shell command."""
        ran.append("bash")
        return "ran " + command

    model = ToolCallingModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "read_file", "args": {"path": "/a"}, "id": "c-1", "type": "tool_call"},
                        {"name": "bash", "args": {"command": "curl evil"}, "id": "c-2", "type": "tool_call"},
                    ],
                ),
                AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": "/b"}, "id": "c-3", "type": "tool_call"}]),
                AIMessage(content="done"),
            ]
        )
    )
    agent = create_agent(model, [read_file, bash], middleware=[GuardrailMiddleware(SECTION)])
    inputs = {"messages": [HumanMessage("go")]}
    result = asyncio.run(agent.ainvoke(inputs)) if asynchronous else agent.invoke(inputs)
    return ran, result["messages"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_create_agent_loop(asynchronous):
    ran, messages = agent_run(asynchronous)
    assert sorted(ran) == ["read_file", "read_file"]
    tool_messages = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    assert tool_messages["c-1"].content == "contents of /a" and tool_messages["c-1"].status == "success"
    assert tool_messages["c-2"].status == "error" and "Guardrail denied: tool 'bash'" in tool_messages["c-2"].content
    assert tool_messages["c-3"].content == "contents of /b"
    assert messages[-1].content == "done"


def test_a_denial_equals_a_validated_tool_message():
    from guardhost import langchain as module

    assert module._denial is not module._slow_denial, "the fast denial did not pass its import-time check"
    fast = module._denial(("content", "c-1", "bash"))
    slow = module._slow_denial(("content", "c-1", "bash"))
    assert fast == slow and fast.model_dump() == slow.model_dump() and fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json()
    fast.additional_kwargs["x"] = 1
    assert module._denial(("content", "c-1", "bash")).additional_kwargs == {}



@pytest.mark.parametrize("path", PATHS)
def test_observe_mode_lets_a_denied_call_run(path):
    handler = Handler()
    guard = GuardrailMiddleware(use="builtin:AllowlistProvider", provider_config={"denied_tools": ["bash"]}, mode="observe")
    assert run(guard, call("bash"), handler, path) is handler.result
    assert handler.calls == 1
    section = {"guardrails": dict(SECTION["guardrails"], mode="warn")}
    assert run(GuardrailMiddleware(section), call("bash"), handler, path) is handler.result
    assert handler.calls == 2
