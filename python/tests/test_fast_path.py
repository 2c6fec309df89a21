"""The fast path of `GuardhostProvider.evaluate`: DeerFlow's decision
dataclasses filled in directly, and only what the provider reads read from
the request. Whatever path a decision takes, it must be the object the
class itself builds."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import pytest

import guardhost
from guardhost._guardhost import Provider
from guardhost.deerflow import GuardhostProvider
from guardhost.types import GuardrailDecision, GuardrailReason, GuardrailRequest

LISTS = {"denied_tools": ["bash"]}


def core(use: str, decision_cls: Any = GuardrailDecision, reason_cls: Any = GuardrailReason, **kwargs: Any) -> Provider:
    return Provider(use, LISTS, decision_cls=decision_cls, reason_cls=reason_cls, interrupt=lambda m, p: Exception(m), **kwargs)


def test_deerflows_dataclasses_are_filled_in_and_equal_what_they_build(allowlist_so):
    provider = GuardhostProvider(use=allowlist_so, config=LISTS)
    assert provider._core._fills_decisions
    allowed = provider.evaluate(GuardrailRequest(tool_name="ls", tool_input={}))
    assert type(allowed) is GuardrailDecision and type(allowed.reasons[0]) is GuardrailReason
    assert allowed == GuardrailDecision(allow=True, reasons=[GuardrailReason(code="oap.allowed")])
    assert vars(allowed) == vars(GuardrailDecision(True, [GuardrailReason("oap.allowed", "")], None, {}))
    assert list(vars(allowed)) == ["allow", "reasons", "policy_id", "metadata"]
    denied = provider.evaluate(GuardrailRequest(tool_name="bash", tool_input={"command": "ls"}))
    assert dataclasses.asdict(denied) == {
        "allow": False,
        "reasons": [{"code": "oap.tool_not_allowed", "message": "tool 'bash' is denied"}],
        "policy_id": None,
        "metadata": {},
    }
    assert repr(denied) == repr(GuardrailDecision(False, [GuardrailReason("oap.tool_not_allowed", "tool 'bash' is denied")]))
    # Each decision is an object of its own: changing one changes no other.
    allowed.reasons.append(GuardrailReason("x.y"))
    allowed.metadata["k"] = 1
    again = provider.evaluate(GuardrailRequest(tool_name="ls", tool_input={}))
    assert again.reasons == [GuardrailReason(code="oap.allowed")] and again.metadata == {}


@dataclasses.dataclass
class Checked:
    """DeerFlow's fields, and a `__post_init__` that must run."""

    allow: bool
    reasons: list = dataclasses.field(default_factory=list)
    policy_id: str | None = None
    metadata: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.checked = True


@dataclasses.dataclass
class Extra:
    """A decision class with a field DeerFlow's has not."""

    allow: bool
    reasons: list = dataclasses.field(default_factory=list)
    policy_id: str | None = None
    metadata: dict = dataclasses.field(default_factory=dict)
    tag: str = "extra"


@dataclasses.dataclass(frozen=True)
class Frozen:
    code: str
    message: str = ""


class Written:
    """Not a dataclass: an `__init__` of its own."""

    def __init__(self, code: str, message: str = "") -> None:
        self.code, self.message = code.upper(), message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Written) and (self.code, self.message) == (other.code, other.message)


@pytest.mark.parametrize(
    ("decision_cls", "reason_cls"),
    [(Checked, GuardrailReason), (Extra, GuardrailReason), (GuardrailDecision, Frozen), (GuardrailDecision, Written)],
)
def test_any_other_class_is_called(allowlist_so, decision_cls, reason_cls):
    provider = core(allowlist_so, decision_cls, reason_cls)
    assert not provider._fills_decisions
    decision = provider.evaluate(GuardrailRequest(tool_name="bash", tool_input={}))
    assert type(decision) is decision_cls and type(decision.reasons[0]) is reason_cls
    assert decision == decision_cls(False, [reason_cls("oap.tool_not_allowed", "tool 'bash' is denied")], None, {})
    if decision_cls is Checked:
        assert decision.checked
    if decision_cls is Extra:
        assert decision.tag == "extra"


def test_a_subclass_that_keeps_the_generated_init_is_filled_in(allowlist_so):
    class Mine(GuardrailDecision):
        def summary(self) -> str:
            return "allowed" if self.allow else "denied"

    provider = core(allowlist_so, Mine)
    assert provider._fills_decisions
    decision = provider.evaluate(GuardrailRequest(tool_name="ls", tool_input={}))
    assert type(decision) is Mine and decision.summary() == "allowed"


def test_only_what_the_provider_reads_is_read(allowlist_so, oap_so, passport, tmp_path):
    # The allowlist reads the tool's name alone (ABI 1.3 declarations).
    assert core(allowlist_so)._reads == (False, False)
    # A decision log records the arguments and the caller: all is read.
    logged = core(allowlist_so, decision_log={"path": str(tmp_path / "decisions.jsonl")})
    assert logged._reads == (True, True)
    oap = Provider(oap_so, {"passport_path": str(passport)}, decision_cls=GuardrailDecision, reason_cls=GuardrailReason, interrupt=lambda m, p: Exception(m))
    assert oap._reads == (True, True)


def test_requests_are_checked_alike_whatever_is_read(allowlist_so):
    provider = core(allowlist_so)
    assert provider._reads == (False, False)
    with pytest.raises(guardhost.RequestError, match="request.tool_input must be a dict"):
        provider.evaluate(types.SimpleNamespace(tool_name="ls", tool_input=[1]))
    with pytest.raises(guardhost.RequestError, match="authz_attributes must be a Mapping, got list"):
        provider.evaluate(types.SimpleNamespace(tool_name="ls", tool_input={}, authz_attributes=[1]))
    with pytest.raises(AttributeError, match="the request has no `tool_input`"):
        provider.evaluate(types.SimpleNamespace(tool_name="ls"))
    # Fields it does not read may hold anything.
    odd = types.SimpleNamespace(tool_name="ls", tool_input={}, user_id=object(), timestamp=3)
    assert provider.evaluate(odd).allow


def test_a_librarys_static_codes_are_made_into_strings_once(allowlist_so):
    # The allowlist's codes are the library's static text (ABI 1.4 `decide`):
    # the string made for one is handed out again, equal and the same object.
    provider = GuardhostProvider(use=allowlist_so, config={"denied_tools": ["bash", "rm"]})
    first = provider.evaluate(GuardrailRequest(tool_name="ls", tool_input={}))
    second = provider.evaluate(GuardrailRequest(tool_name="cat", tool_input={}))
    assert first.reasons[0].code == "oap.allowed" and first.reasons[0].code is second.reasons[0].code
    bash = provider.evaluate(GuardrailRequest(tool_name="bash", tool_input={}))
    rm = provider.evaluate(GuardrailRequest(tool_name="rm", tool_input={}))
    assert bash.reasons[0].code is rm.reasons[0].code
    # A message made per call (it names the tool) is a string of its own.
    assert (bash.reasons[0].message, rm.reasons[0].message) == ("tool 'bash' is denied", "tool 'rm' is denied")


def test_aevaluate_is_a_coroutine_function_bound_per_provider(allowlist_so):
    import asyncio
    import inspect

    provider = GuardhostProvider(use=allowlist_so, config=LISTS)
    assert inspect.iscoroutinefunction(provider.aevaluate)
    assert provider.aevaluate.__doc__ == GuardhostProvider.aevaluate.__doc__
    denied = asyncio.run(provider.aevaluate(GuardrailRequest(tool_name="bash", tool_input={})))
    assert denied == provider.evaluate(GuardrailRequest(tool_name="bash", tool_input={}))
