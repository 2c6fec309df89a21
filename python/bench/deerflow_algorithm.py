"""DeerFlow's allowlist provider and guardrail middleware, as algorithms in
pure Python (standard library only), for benchmarks that compare guardhost
with the Python it replaces in the same run.

The classes take the data types as arguments, so the same algorithm runs
with DeerFlow's own shapes (``guardhost.types`` and LangChain's
``ToolMessage`` in ``bench.py``) or, needing nothing installed
(``reference.py``), with the same dataclasses read from the package's
source file and a plain dataclass for ``ToolMessage``. The plain
``ToolMessage`` costs less to build than LangChain's pydantic one, so a
comparison using it flatters the Python side.
"""

from __future__ import annotations

import importlib.util
import logging
import pathlib
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def _package_types() -> Any:
    """The guardhost package's twins of DeerFlow's dataclasses, read from
    its source file (plain Python: nothing needs building or installing)."""
    path = pathlib.Path(__file__).resolve().parents[1] / "python" / "guardhost" / "types.py"
    spec = importlib.util.spec_from_file_location("guardhost_types", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_types = _package_types()
GuardrailRequest = _types.GuardrailRequest
GuardrailReason = _types.GuardrailReason
GuardrailDecision = _types.GuardrailDecision


@dataclass
class ToolMessage:
    """The fields of LangChain's ``ToolMessage`` that the middleware sets."""

    content: str
    tool_call_id: str
    name: str | None = None
    status: str = "success"


@dataclass
class Types:
    """The classes an algorithm builds its requests, decisions and messages from."""

    request: Any = GuardrailRequest
    reason: Any = GuardrailReason
    decision: Any = GuardrailDecision
    message: Any = ToolMessage


class PyAllowlist:
    """DeerFlow's built-in AllowlistProvider algorithm."""

    name = "allowlist"

    def __init__(self, *, allowed_tools: list[str] | None = None, denied_tools: list[str] | None = None, types: Types | None = None) -> None:
        self._allowed = None if allowed_tools is None else set(allowed_tools)
        self._denied = set(denied_tools or ())
        self._types = types or Types()

    def evaluate(self, request: Any) -> Any:
        decision, reason = self._types.decision, self._types.reason
        tool = request.tool_name
        if self._allowed is not None and tool not in self._allowed:
            return decision(allow=False, reasons=[reason(code="oap.tool_not_allowed", message=f"tool '{tool}' not in allowlist")])
        if tool in self._denied:
            return decision(allow=False, reasons=[reason(code="oap.tool_not_allowed", message=f"tool '{tool}' is denied")])
        return decision(allow=True, reasons=[reason(code="oap.allowed")])

    async def aevaluate(self, request: Any) -> Any:
        return self.evaluate(request)


log = logging.getLogger("bench.deerflow")
log.setLevel(logging.ERROR)  # DeerFlow's denial warning costs only its level check here


class PyMiddleware:
    """DeerFlow's GuardrailMiddleware.wrap_tool_call algorithm."""

    def __init__(self, provider: Any, *, fail_closed: bool = True, passport: str | None = None, types: Types | None = None) -> None:
        self.provider, self.fail_closed, self.passport = provider, fail_closed, passport
        self._types = types or Types()

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        types = self._types
        runtime = getattr(request, "runtime", None)
        context = getattr(runtime, "context", None) if runtime is not None else None
        context = context if isinstance(context, dict) else {}
        call = request.tool_call
        gr = types.request(
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
        try:
            decision = self.provider.evaluate(gr)
        except Exception:  # noqa: BLE001
            decision = types.decision(allow=not self.fail_closed, reasons=[types.reason("oap.evaluator_error", "guardrail provider error")])
        if decision.allow:
            return handler(request)
        log.warning("Guardrail denied: tool=%s policy=%s code=%s", gr.tool_name, decision.policy_id, decision.reasons[0].code if decision.reasons else "unknown")
        first = decision.reasons[0] if decision.reasons else None
        name = str(call.get("name", "unknown_tool"))
        return types.message(
            content=f"Guardrail denied: tool '{name}' was blocked ({first.code if first else 'oap.denied'}). Reason: {first.message if first else 'blocked by guardrail policy'}. Choose an alternative approach.",
            tool_call_id=str(call.get("id", "missing_id")),
            name=name,
            status="error",
        )
