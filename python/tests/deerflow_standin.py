"""A DeerFlow-shaped GuardrailMiddleware for the tests.

DeerFlow itself is not a dependency. This stand-in has the attribute names
and the algorithm of DeerFlow's `deerflow.guardrails.middleware.GuardrailMiddleware`
(CONTRACT.md, "GuardrailMiddleware"), written for these tests: it builds a
GuardrailRequest from the tool call and the runtime context, asks the
provider, re-raises LangGraph's control-flow signals, turns other provider
errors into a fail-closed denial or a fail-open pass, answers a denial
with the error ToolMessage without calling the handler, and records an
audit event in the run's journal (`context["__run_journal"]`) for every
denial and every provider error.
"""

from __future__ import annotations

import importlib
import inspect
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp

from guardhost.types import GuardrailDecision, GuardrailReason, GuardrailRequest


def resolve_variable(path: str) -> Any:
    """`package.module:Attr` → the attribute (DeerFlow's resolver, simplified)."""
    module, _, attr = path.rpartition(":")
    return getattr(importlib.import_module(module), attr)


def build_provider(use: str, config: dict[str, Any] | None) -> Any:
    """What DeerFlow's middleware builder does with `guardrails.provider`:
    kwargs from `config`, plus `framework="deerflow"` only for constructors
    that declare `framework` or take `**kwargs`, unless config sets it."""
    cls = resolve_variable(use)
    kwargs = dict(config or {})
    if "framework" not in kwargs:
        parameters = inspect.signature(cls.__init__).parameters.values()
        if any(p.name == "framework" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            kwargs["framework"] = "deerflow"
    return cls(**kwargs)


class StandInMiddleware:
    """DeerFlow's GuardrailMiddleware, as far as these tests need it."""

    def __init__(self, provider: Any, *, fail_closed: bool = True, passport: str | None = None) -> None:
        self.provider = provider
        self.fail_closed = fail_closed
        self.passport = passport
        self.decisions: list[Any] = []
        self.errors: list[BaseException] = []
        self.audit_failures = 0

    @staticmethod
    def _context(request: Any) -> dict[str, Any]:
        runtime = getattr(request, "runtime", None)
        context = getattr(runtime, "context", None) if runtime is not None else None
        return context if isinstance(context, dict) else {}

    def _request(self, request: Any) -> GuardrailRequest:
        call, context = request.tool_call, self._context(request)
        return GuardrailRequest(
            tool_name=str(call.get("name", "")),
            tool_input=call.get("args", {}),
            agent_id=self.passport,
            thread_id=context.get("thread_id"),
            is_subagent=bool(context.get("is_subagent")),
            timestamp=datetime.now(UTC).isoformat(),
            user_id=context.get("user_id"),
            user_role=context.get("user_role"),
            oauth_provider=context.get("oauth_provider"),
            oauth_id=context.get("oauth_id"),
            run_id=context.get("run_id"),
            tool_call_id=call.get("id"),
            channel_user_id=context.get("channel_user_id"),
            is_internal=context.get("is_internal") is True,
            authz_attributes=dict(context.get("authz_attributes") or {}),
        )

    @staticmethod
    def _denied(request: Any, decision: Any) -> ToolMessage:
        call = request.tool_call
        name = str(call.get("name", "unknown_tool"))
        first = decision.reasons[0] if decision.reasons else None
        code = first.code if first else "oap.denied"
        message = first.message if first else "blocked by guardrail policy"
        return ToolMessage(
            content=f"Guardrail denied: tool '{name}' was blocked ({code}). Reason: {message}. Choose an alternative approach.",
            tool_call_id=str(call.get("id", "missing_id")),
            name=name,
            status="error",
        )

    def _record(self, context: dict[str, Any], gr: GuardrailRequest, decision: Any, *, action: str, provider_error: bool) -> None:
        """DeerFlow's `_record_guardrail_event`: best effort, never changes the outcome."""
        journal = context.get("__run_journal")
        if journal is None:
            return
        changes = {
            "tool_name": gr.tool_name,
            "tool_call_id": gr.tool_call_id,
            "agent_id": gr.agent_id,
            "is_subagent": gr.is_subagent,
            "user_role": gr.user_role,
            "allow": decision.allow,
            "policy_id": decision.policy_id,
            "reason_codes": [r.code for r in decision.reasons if r.code],
            "reason_messages": [r.message[:500] for r in decision.reasons if r.message],
            "fail_closed": self.fail_closed,
            "provider_error": provider_error,
        }
        try:
            journal.record_middleware(tag="guardrail", name="GuardrailMiddleware", hook="wrap_tool_call", action=action, changes=changes)
        except Exception:  # noqa: BLE001 - "Failed to record middleware:guardrail event"
            self.audit_failures += 1

    def _audit(self, request: Any, gr: GuardrailRequest, decision: Any, provider_error: bool) -> None:
        if not decision.allow:
            self._record(self._context(request), gr, decision, action="deny_tool_call", provider_error=provider_error)
        elif provider_error:
            self._record(self._context(request), gr, decision, action="allow_tool_call_after_provider_error", provider_error=True)

    def _on_error(self, error: BaseException) -> GuardrailDecision:
        self.errors.append(error)
        mode = "fail-closed" if self.fail_closed else "fail-open"
        return GuardrailDecision(
            allow=not self.fail_closed,
            reasons=[GuardrailReason(code="oap.evaluator_error", message=f"guardrail provider error ({mode})")],
        )

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        gr = self._request(request)
        provider_error = False
        try:
            decision = self.provider.evaluate(gr)
        except GraphBubbleUp:
            raise
        except Exception as error:  # noqa: BLE001 - DeerFlow's fail_closed
            decision, provider_error = self._on_error(error), True
        self.decisions.append(decision)
        self._audit(request, gr, decision, provider_error)
        return handler(request) if decision.allow else self._denied(request, decision)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        gr = self._request(request)
        provider_error = False
        try:
            decision = await self.provider.aevaluate(gr)
        except GraphBubbleUp:
            raise
        except Exception as error:  # noqa: BLE001
            decision, provider_error = self._on_error(error), True
        self.decisions.append(decision)
        self._audit(request, gr, decision, provider_error)
        return (await handler(request)) if decision.allow else self._denied(request, decision)
