"""``ask`` and ``rewrite`` through the Python package: ``Guardrail.check``,
and a LangChain ``create_agent`` loop (a fake chat model, LangGraph's
checkpointer) paused by an ask, resumed with the approval (the tool runs
once), and resumed with a forged one (the tool never runs)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import guardhost
from guardhost.langchain import GuardrailMiddleware

CONFIG = {
    "guardrails": {
        "enabled": True,
        "providers": [
            {"use": "builtin:ApprovalGuardrailProvider", "name": "caps", "config": {"set": {"bash": {"timeout": 30}}}},
            {"use": "builtin:ApprovalGuardrailProvider", "name": "humans", "config": {"ask": ["bash"], "approvers": ["admin"]}},
        ],
    }
}


def test_check_raises_for_an_ask_and_returns_rewritten_arguments():
    guardrail = guardhost.load(CONFIG)
    tool_call = {"name": "bash", "args": {"command": "make"}, "id": "c-1"}
    context = {"thread_id": "t-1"}
    with pytest.raises(guardhost.ApprovalRequired) as raised:
        guardrail.check(tool_call, context)
    held = raised.value
    assert held.tool == "bash"
    assert held.reasons == [("approvals.ask", "tool 'bash' needs a human's approval")]
    assert held.ask["entry"] == "humans" and held.ask["approvers"] == ["admin"]
    assert held.ask["digest"].startswith("sha256:")

    approved = dict(context, approval=guardhost.approval(held.ask, approved_by="admin"))
    assert guardrail.check(tool_call, approved) == {"command": "make", "timeout": 30}, "approved, and rewritten"
    for asynchronous in (False, True):
        assert guardrail.check(tool_call, approved, asynchronous) == {"command": "make", "timeout": 30}
    other = dict(tool_call, args={"command": "make clean"})
    content, _, _ = guardrail.check(other, approved)
    assert "(guardhost.approval_mismatch)" in content
    refused = dict(context, approval=guardhost.approval(held.ask, approved=False))
    assert "(guardhost.approval_refused)" in guardrail.check(tool_call, refused)[0]
    decision = guardrail.decide("bash", {"command": "make"}, context)
    assert not decision.allow and decision.metadata["guardhost.outcome"]["ask"]["entry"] == "humans"


class ToolCallingModel(GenericFakeChatModel):
    """A fake chat model that issues scripted tool calls (tools are bound, not used)."""

    def bind_tools(self, tools, **kwargs):  # type: ignore[override]
        return self


def agent(ran: list[dict]):
    @tool
    def bash(command: str, timeout: int = 0) -> str:
        """Runs a shell command."""
        ran.append({"command": command, "timeout": timeout})
        return "ran " + command

    model = ToolCallingModel(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[{"name": "bash", "args": {"command": "make deploy"}, "id": "c-1", "type": "tool_call"}]),
                AIMessage(content="done"),
            ]
        )
    )
    return create_agent(model, [bash], middleware=[GuardrailMiddleware(CONFIG)], checkpointer=InMemorySaver())


def invoke(graph, value, config, asynchronous):
    return asyncio.run(graph.ainvoke(value, config)) if asynchronous else graph.invoke(value, config)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_agent_loop_is_paused_by_an_ask_and_resumed_by_the_approval(asynchronous):
    ran: list[dict] = []
    graph = agent(ran)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    paused = invoke(graph, {"messages": [HumanMessage("deploy")]}, config, asynchronous)
    assert ran == [], "a held call does not run"
    (pending,) = paused["__interrupt__"]
    request = pending.value
    assert request["type"] == "guardhost.approval"
    assert (request["tool"], request["tool_call_id"]) == ("bash", "c-1")
    assert request["args"] == {"command": "make deploy"}
    assert request["ask"]["entry"] == "humans"

    done = invoke(graph, Command(resume=guardhost.approval(request["ask"], approved_by="admin")), config, asynchronous)
    assert ran == [{"command": "make deploy", "timeout": 30}], "runs once, with the rewritten arguments"
    (message,) = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "success" and message.content == "ran make deploy"
    assert done["messages"][-1].content == "done"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_forged_approval_is_denied_and_the_tool_never_runs(asynchronous):
    ran: list[dict] = []
    graph = agent(ran)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    paused = invoke(graph, {"messages": [HumanMessage("deploy")]}, config, asynchronous)
    ask = dict(paused["__interrupt__"][0].value["ask"])
    ask["digest"] = "sha256:" + "0" * 64  # an approval of some other call
    done = invoke(graph, Command(resume=guardhost.approval(ask, approved_by="admin")), config, asynchronous)
    assert ran == []
    (message,) = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error"
    assert "(guardhost.approval_mismatch)" in message.content
