"""`guardhost.deerflow:GuardhostProvider` inside a DeerFlow-shaped middleware:
every middleware behaviour of CONTRACT.md, on the sync and the async path."""

from __future__ import annotations

import sys
import types

import pytest
from deerflow_standin import StandInMiddleware, build_provider
from helpers import Handler, call, run
from langgraph.errors import GraphInterrupt

import guardhost
from guardhost.deerflow import GuardhostProvider
from guardhost.types import GuardrailDecision, GuardrailReason, GuardrailRequest

PATHS = ["sync", "async"]
USE = "guardhost.deerflow:GuardhostProvider"


def provider(use: str, **kwargs):
    """Built exactly as DeerFlow builds `guardrails.provider` (framework injected)."""
    return build_provider(USE, {"use": use, **kwargs})


@pytest.fixture
def allowlist():
    return provider("builtin:AllowlistProvider", config={"denied_tools": ["bash"]})


@pytest.mark.parametrize("path", PATHS)
def test_allow_passes_the_handlers_result_through_and_calls_it_once(allowlist, path):
    handler = Handler()
    result = run(StandInMiddleware(allowlist), call("read_file"), handler, path)
    assert result is handler.result
    assert handler.calls == 1


@pytest.mark.parametrize("path", PATHS)
def test_deny_never_calls_the_handler(allowlist, path):
    handler = Handler()
    message = run(StandInMiddleware(allowlist), call("bash", id="c-7"), handler, path)
    assert handler.calls == 0
    assert message.status == "error"
    assert message.name == "bash"
    assert message.tool_call_id == "c-7"
    assert message.content == (
        "Guardrail denied: tool 'bash' was blocked (oap.tool_not_allowed). "
        "Reason: tool 'bash' is denied. Choose an alternative approach."
    )


@pytest.mark.parametrize("path", PATHS)
def test_fail_closed_on_provider_error(test_so, path):
    middleware = StandInMiddleware(provider(test_so("ErroringProvider")), fail_closed=True)
    handler = Handler()
    message = run(middleware, call("bash"), handler, path)
    assert handler.calls == 0
    assert "(oap.evaluator_error). Reason: guardrail provider error (fail-closed)." in message.content
    assert isinstance(middleware.errors[0], guardhost.ProviderError)
    assert "provider exploded" in str(middleware.errors[0])


@pytest.mark.parametrize("path", PATHS)
def test_fail_open_calls_the_handler(test_so, path):
    middleware = StandInMiddleware(provider(test_so("ErroringProvider")), fail_closed=False)
    handler = Handler()
    assert run(middleware, call("bash"), handler, path) is handler.result
    assert handler.calls == 1
    assert middleware.decisions[0].reasons[0].code == "oap.evaluator_error"


@pytest.mark.parametrize("path", PATHS)
def test_a_panicking_provider_is_a_provider_error(test_so, path):
    middleware = StandInMiddleware(provider(test_so("PanickingProvider")))
    handler = Handler()
    message = run(middleware, call("bash"), handler, path)
    assert handler.calls == 0 and "fail-closed" in message.content
    assert isinstance(middleware.errors[0], guardhost.ProviderError)
    assert "boom on bash" in str(middleware.errors[0])


@pytest.mark.parametrize("path", PATHS)
def test_passport_becomes_agent_id_and_every_field_crosses(test_so, path):
    middleware = StandInMiddleware(provider(test_so("CapturingProvider")), passport="agents/ap_123.json")
    context = {
        "thread_id": "t-1", "is_subagent": 1, "user_id": "u-1", "user_role": "admin",
        "oauth_provider": "github", "oauth_id": "gh-9", "run_id": "r-1",
        "channel_user_id": "slack:U1", "is_internal": True, "authz_attributes": {"team": "a"},
    }
    run(middleware, call("write_file", {"path": "/tmp/x"}, id="c-2", context=context), Handler(), path)
    seen = middleware.decisions[0].metadata
    assert seen["path"] == path
    assert seen["agent_id"] == "agents/ap_123.json"
    assert seen["tool_name"] == "write_file" and seen["tool_input"] == {"path": "/tmp/x"}
    assert seen["tool_call_id"] == "c-2"
    for key in ("thread_id", "user_id", "user_role", "oauth_provider", "oauth_id", "run_id", "channel_user_id"):
        assert seen[key] == context[key], key
    assert seen["is_subagent"] is True and seen["is_internal"] is True
    assert seen["authz_attributes"] == {"team": "a"}
    assert seen["timestamp"].endswith("+00:00")


@pytest.mark.parametrize("path", PATHS)
def test_no_context_gives_null_attribution(test_so, path):
    middleware = StandInMiddleware(provider(test_so("CapturingProvider")))
    run(middleware, call("ls", context=None), Handler(), path)
    seen = middleware.decisions[0].metadata
    for key in ("agent_id", "thread_id", "user_id", "user_role", "oauth_provider", "oauth_id", "run_id", "channel_user_id"):
        assert seen[key] is None, key
    assert seen["is_subagent"] is False and seen["is_internal"] is False and seen["authz_attributes"] == {}


@pytest.mark.parametrize("path", PATHS)
def test_empty_reasons_use_the_fallback_text(test_so, path):
    message = run(StandInMiddleware(provider(test_so("EmptyReasonsProvider"))), call("bash"), Handler(), path)
    assert "(oap.denied). Reason: blocked by guardrail policy." in message.content


@pytest.mark.parametrize("path", PATHS)
def test_empty_tool_name_is_handled(allowlist, path):
    handler = Handler()
    assert run(StandInMiddleware(allowlist), call(None), handler, path) is handler.result


@pytest.mark.parametrize("path", PATHS)
def test_an_interrupt_propagates_as_langgraphs_graph_interrupt(test_so, path):
    middleware = StandInMiddleware(provider(test_so("InterruptingProvider")))
    handler = Handler()
    with pytest.raises(GraphInterrupt) as raised:
        run(middleware, call("deploy"), handler, path)
    assert handler.calls == 0 and middleware.errors == []
    assert raised.value.args[0][0].value == {"tool": "deploy"}


def test_decisions_are_guardhosts_dataclasses_without_deerflow(allowlist):
    decision = allowlist.evaluate(GuardrailRequest(tool_name="bash", tool_input={}))
    assert decision == GuardrailDecision(
        allow=False, reasons=[GuardrailReason("oap.tool_not_allowed", "tool 'bash' is denied")]
    )


def test_decisions_are_deerflows_own_classes_when_deerflow_is_importable(monkeypatch):
    from dataclasses import dataclass, field

    @dataclass
    class GuardrailReason:  # noqa: F811 - DeerFlow's names
        code: str
        message: str = ""

    @dataclass
    class GuardrailDecision:  # noqa: F811
        allow: bool
        reasons: list = field(default_factory=list)
        policy_id: str | None = None
        metadata: dict = field(default_factory=dict)

    module = types.ModuleType("deerflow.guardrails.provider")
    module.GuardrailReason, module.GuardrailDecision = GuardrailReason, GuardrailDecision
    for name, mod in {
        "deerflow": types.ModuleType("deerflow"),
        "deerflow.guardrails": types.ModuleType("deerflow.guardrails"),
        "deerflow.guardrails.provider": module,
    }.items():
        monkeypatch.setitem(sys.modules, name, mod)
    p = provider("builtin:AllowlistProvider", config={})
    decision = p.evaluate(types.SimpleNamespace(tool_name="ls", tool_input={}))
    assert type(decision) is GuardrailDecision and type(decision.reasons[0]) is GuardrailReason
    assert decision.allow and decision.reasons[0].code == "oap.allowed"


def test_framework_reaches_a_provider_that_declares_it_once(test_so):
    # DeerFlow injects framework="deerflow" into GuardhostProvider; the host
    # passes it on to a provider declaring `framework`.
    p = provider(test_so("FrameworkAwareProvider"))
    assert p.info["framework_injected"] is True
    assert p.evaluate(GuardrailRequest(tool_name="x", tool_input={})).metadata == {"framework": "deerflow"}
    # Another value is forwarded as given.
    other = GuardhostProvider(use=test_so("FrameworkAwareProvider"), framework="langchain")
    assert other.evaluate(GuardrailRequest(tool_name="x", tool_input={})).metadata == {"framework": "langchain"}
    # A config's own `framework` wins.
    own = provider(test_so("FrameworkAwareProvider"), config={"framework": "mine"})
    assert own.evaluate(GuardrailRequest(tool_name="x", tool_input={})).metadata == {"framework": "mine"}


def test_framework_is_not_given_to_a_provider_that_does_not_take_it(allowlist_so):
    for framework in ("deerflow", "langchain"):
        p = GuardhostProvider(use=allowlist_so, config={"denied_tools": ["bash"]}, framework=framework)
        assert p.info["framework_injected"] is False
        assert not p.evaluate(GuardrailRequest(tool_name="bash", tool_input={})).allow


def test_name_is_the_loaded_providers(allowlist, oap_so, passport):
    assert allowlist.name == "allowlist"
    assert provider(oap_so, config={"passport_path": str(passport)}).name.startswith("oap")


def test_a_non_mapping_authz_attributes_is_an_error(allowlist):
    request = types.SimpleNamespace(tool_name="ls", tool_input={}, authz_attributes=[1])
    with pytest.raises(guardhost.RequestError, match="authz_attributes must be a Mapping, got list"):
        allowlist.evaluate(request)


class Journal:
    """DeerFlow's run journal, as far as the guardrail uses it."""

    def __init__(self, fail: bool = False) -> None:
        self.events: list[dict] = []
        self.fail = fail

    def record_middleware(self, **event) -> None:
        if self.fail:
            raise RuntimeError("journal is down")
        self.events.append(event)


ATTRIBUTED = {"user_id": "u-secret", "user_role": "admin", "oauth_provider": "github", "oauth_id": "gh-secret", "is_subagent": True}


@pytest.mark.parametrize("path", PATHS)
def test_a_denial_is_audited_with_exactly_deerflows_fields(test_so, path):
    journal = Journal()
    middleware = StandInMiddleware(provider(test_so("DenyAllProvider")), passport="agent-7")
    run(middleware, call("bash", {"command": "rm -rf /"}, id="c-1", context={**ATTRIBUTED, "__run_journal": journal}), Handler(), path)
    assert journal.events == [{
        "tag": "guardrail", "name": "GuardrailMiddleware", "hook": "wrap_tool_call", "action": "deny_tool_call",
        "changes": {
            "tool_name": "bash", "tool_call_id": "c-1", "agent_id": "agent-7", "is_subagent": True,
            "user_role": "admin", "allow": False, "policy_id": "test-policy",
            "reason_codes": ["test.denied", "test.second"],
            "reason_messages": ["denied by test provider", "a second reason"],
            "fail_closed": True, "provider_error": False,
        },
    }]
    text = repr(journal.events)
    for forbidden in ("rm -rf", "u-secret", "gh-secret", "github", "tool_input"):
        assert forbidden not in text, forbidden


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fail_closed", [True, False])
def test_provider_errors_are_audited_both_ways(test_so, path, fail_closed):
    journal = Journal()
    middleware = StandInMiddleware(provider(test_so("ErroringProvider")), fail_closed=fail_closed)
    run(middleware, call("bash", context={"__run_journal": journal}), Handler(), path)
    [event] = journal.events
    assert event["action"] == ("deny_tool_call" if fail_closed else "allow_tool_call_after_provider_error")
    assert event["changes"]["provider_error"] is True
    assert event["changes"]["reason_codes"] == ["oap.evaluator_error"]


@pytest.mark.parametrize("path", PATHS)
def test_an_allow_is_not_audited(allowlist, path):
    journal = Journal()
    run(StandInMiddleware(allowlist), call("read_file", context={"__run_journal": journal}), Handler(), path)
    assert journal.events == []


@pytest.mark.parametrize("path", PATHS)
def test_a_failing_journal_leaves_the_denial_intact(allowlist, path):
    middleware = StandInMiddleware(allowlist)
    handler = Handler()
    message = run(middleware, call("bash", context={"__run_journal": Journal(fail=True)}), handler, path)
    assert handler.calls == 0 and middleware.audit_failures == 1
    assert message.status == "error" and "(oap.tool_not_allowed)" in message.content
