"""``guardhost.langchain.GuardrailMiddleware``: guardhost in a LangChain 1.x agent.

.. code-block:: python

    from langchain.agents import create_agent
    from guardhost.langchain import GuardrailMiddleware

    agent = create_agent(model, tools, middleware=[GuardrailMiddleware("config.yaml")])

Every tool call is decided before it runs, exactly as DeerFlow's
``GuardrailMiddleware`` decides it: an allowed call returns what the tool
returns, unchanged; a denied call never runs and returns DeerFlow's error
``ToolMessage``, so the agent reads the reason and goes on.

Beyond DeerFlow: a call a guard holds for approval (``ask``) pauses the
graph with a LangGraph interrupt whose value says what to approve
(``{"type": "guardhost.approval", "tool", "tool_call_id", "args",
"reasons", "ask"}``); resume it with ``Command(resume=guardhost.approval(ask,
approved_by=...))``. The approval is checked against the call's digest: it
runs that call, once it is decided again, and nothing else. A call a guard
rewrote runs with the rewritten arguments.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage

from langgraph.errors import GraphInterrupt
from langgraph.types import Interrupt as LangGraphInterrupt
from langgraph.types import interrupt

from . import load
from ._guardhost import ApprovalRequired, Guardrail, Interrupt

__all__ = ["GuardrailMiddleware"]


def _slow_denial(denial: tuple[str, str, str]) -> ToolMessage:
    content, tool_call_id, name = denial
    return ToolMessage(content=content, tool_call_id=tool_call_id, name=name, status="error")


def _denial_factory() -> Callable[[tuple[str, str, str]], ToolMessage]:
    """The denial ``ToolMessage`` maker.

    Validating a ``ToolMessage`` costs more than deciding the call, and a
    denial's fields are plain strings that need no validation. So a denial is
    made from the field values of a validated template, with fresh copies
    of its mutable defaults, the way pydantic's ``model_construct`` makes a
    model. This is checked once, at import, against a validated message
    (equal, same dump, same fields set); when it does not hold (another
    pydantic or LangChain), every denial is validated.
    """
    reference = ToolMessage(content="c", tool_call_id="i", name="n", status="error")
    try:
        template = dict(reference.__dict__)
        mutable = tuple(key for key, value in template.items() if isinstance(value, (dict, list, set)))
        fields_set = frozenset(reference.model_fields_set)
        has_extra = reference.__pydantic_extra__ is not None
        private = reference.__pydantic_private__
        new = ToolMessage.__new__
        set_attribute = object.__setattr__

        def fast(denial: tuple[str, str, str]) -> ToolMessage:
            fields = template.copy()
            fields["content"], fields["tool_call_id"], fields["name"] = denial
            for key in mutable:
                fields[key] = fields[key].copy()
            message = new(ToolMessage)
            set_attribute(message, "__dict__", fields)
            set_attribute(message, "__pydantic_fields_set__", set(fields_set))
            set_attribute(message, "__pydantic_extra__", {} if has_extra else None)
            set_attribute(message, "__pydantic_private__", None if private is None else dict(private))
            return message

        probe = fast(("c", "i", "n"))
        if (
            type(probe) is ToolMessage
            and probe == reference
            and probe.model_dump() == reference.model_dump()
            and probe.model_fields_set == reference.model_fields_set
            and probe.additional_kwargs is not fast(("c", "i", "n")).additional_kwargs
        ):
            return fast
    except Exception:  # noqa: BLE001 - any surprise: validate every denial
        pass
    return _slow_denial


_denial = _denial_factory()


def _graph_interrupt(error: Interrupt) -> GraphInterrupt:
    payload = getattr(error, "payload", None)
    value = payload if payload is not None else getattr(error, "message", str(error))
    return GraphInterrupt([LangGraphInterrupt(value=value)])


def _context(request: Any) -> Any:
    runtime = getattr(request, "runtime", None)
    return getattr(runtime, "context", None) if runtime is not None else None


def _ask_approval(request: Any, context: Any, held: ApprovalRequired) -> dict[str, Any]:
    """Pauses the graph for the approval ``held`` asks for; once resumed,
    the context to decide the call again with (the answer as its
    ``approval``, after those given before)."""
    tool_call = request.tool_call
    answer = interrupt(
        {
            "type": "guardhost.approval",
            "tool": held.tool,
            "tool_call_id": tool_call.get("id"),
            "args": tool_call.get("args"),
            "reasons": [list(reason) for reason in held.reasons],
            "ask": held.ask,
        }
    )
    context = dict(context) if isinstance(context, dict) else {}
    given = context.get("approval")
    approvals = [] if given is None else list(given) if isinstance(given, list) else [given]
    # Whatever the resume value is goes to the guard: one that is not an
    # approval of this call is refused there, saying why.
    context["approval"] = approvals + [answer]
    return context


def _tool_name(tool: Any) -> str | None:
    name = tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)
    return name if isinstance(name, str) and name else None


def _visible(guardrail: Guardrail, request: Any) -> Any:
    """``request`` (a ``ModelRequest``) with only the tools the config's
    ``authorization:`` provider lets its caller use. A tool whose name
    cannot be read is removed: the filter cannot tell what it is."""
    tools = list(getattr(request, "tools", None) or [])
    if not tools:
        return request
    names = [_tool_name(tool) for tool in tools]
    allowed = set(guardrail.filter_tools([name for name in names if name is not None], _context(request)))
    kept = [tool for tool, name in zip(tools, names) if name is not None and name in allowed]
    if len(kept) == len(tools):
        return request
    return request.override(tools=kept)


def _rewritten(request: Any, args: dict[str, Any]) -> Any:
    return request.override(tool_call={**request.tool_call, "args": args})


class GuardrailMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """A LangChain ``AgentMiddleware`` that asks a guardhost provider before every tool call.

    Build it from a ``guardrails:`` config (``config``: a file path or a
    mapping, as :func:`guardhost.load` takes), or from keyword arguments:
    ``use`` (a provider library) or ``command`` (a provider program, which
    runs with ``isolation: process``), ``provider_config``, ``fail_closed`` (default
    true), ``mode`` (``enforce``, default; ``warn`` or ``observe`` let denied
    calls run and say what would have been denied), ``passport``,
    ``isolation``, ``transport``, ``timeout_ms``, ``sha256``,
    ``allow_insecure_permissions``; relative paths are taken from
    ``base_dir`` (default: the working directory). A config that leaves the
    guardrail out (``enabled: false``) gives a middleware that lets every
    call through.

    A provider's interrupt is raised as LangGraph's ``GraphInterrupt``, so
    the graph pauses; a provider error is decided by ``fail_closed``. A
    call held for approval (``ask``) pauses the graph with LangGraph's
    ``interrupt`` (resume with :func:`guardhost.approval`); a rewritten call
    runs with its new arguments.

    The runtime context (``request.runtime.context``, when it is a dict)
    supplies the request's attribution (``thread_id``, ``user_id``,
    ``authz_attributes`` ...), as in DeerFlow.
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        *,
        use: str | None = None,
        command: list[str] | None = None,
        provider_config: Mapping[str, Any] | None = None,
        fail_closed: bool = True,
        passport: str | None = None,
        isolation: str | None = None,
        timeout_ms: int | None = None,
        sha256: str | None = None,
        allow_insecure_permissions: bool = False,
        base_dir: str | os.PathLike[str] | None = None,
        transport: str | None = None,
        mode: str | None = None,
    ) -> None:
        super().__init__()
        given = [what for what, value in (("config", config), ("use", use), ("command", command)) if value is not None]
        if len(given) != 1:
            raise TypeError("GuardrailMiddleware takes a config (a file path or a mapping), use=... or command=[...], exactly one of them")
        if config is None:
            provider: dict[str, Any] = {"config": dict(provider_config or {})}
            if use is not None:
                provider["use"] = use
            else:
                assert command is not None
                provider["command"] = [os.fspath(part) for part in command]
                provider["isolation"] = isolation or "process"
            for key, value in (
                ("isolation", isolation),
                ("transport", transport),
                ("timeout_ms", timeout_ms),
                ("sha256", sha256),
            ):
                if value is not None:
                    provider[key] = value
            if allow_insecure_permissions:
                provider["allow_insecure_permissions"] = True
            section: dict[str, Any] = {"enabled": True, "fail_closed": fail_closed, "passport": passport, "provider": provider}
            if mode is not None:
                section["mode"] = mode
            guardrail = load({"guardrails": section}, base_dir=base_dir)
        elif isinstance(config, Mapping):
            guardrail = load(config, base_dir=base_dir)
        else:
            assert config is not None
            guardrail = load(config)
        self.guardrail: Guardrail | None = guardrail
        """The installed guardrail; ``None`` when the config leaves it out."""
        self._filters = guardrail is not None and any(kind == "authorization" for _, kind, _ in guardrail.guards)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """With an ``authorization:`` section: the model is offered only the
        tools its caller may use (DeerFlow's assembly-time filter, per model
        call, from the runtime context); otherwise the request unchanged."""
        if not self._filters:
            return handler(request)
        assert self.guardrail is not None
        return handler(_visible(self.guardrail, request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """The async :meth:`wrap_model_call` (the filter runs in a worker
        thread when its provider can block)."""
        if not self._filters:
            return await handler(request)
        guardrail = self.guardrail
        assert guardrail is not None
        if guardrail.may_block:
            return await handler(await asyncio.to_thread(_visible, guardrail, request))
        return await handler(_visible(guardrail, request))

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Decides the call; runs ``handler`` only when it is allowed."""
        guardrail = self.guardrail
        if guardrail is None:
            return handler(request)
        context = _context(request)
        while True:
            try:
                result = guardrail.check(request.tool_call, context)
                break
            except Interrupt as error:
                raise _graph_interrupt(error) from None
            except ApprovalRequired as held:
                context = _ask_approval(request, context, held)
        if result is None:
            return handler(request)
        if isinstance(result, dict):
            return handler(_rewritten(request, result))
        return _denial(result)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """The async :meth:`wrap_tool_call`, through the provider's ``aevaluate``;
        a provider that can block (``timeout_ms``, ``isolation: process``)
        decides in a worker thread, so the event loop never waits on it."""
        guardrail = self.guardrail
        if guardrail is None:
            return await handler(request)
        context = _context(request)
        while True:
            try:
                if guardrail.may_block:
                    result = await asyncio.to_thread(guardrail.check, request.tool_call, context, True)
                else:
                    result = guardrail.check(request.tool_call, context, True)
                break
            except Interrupt as error:
                raise _graph_interrupt(error) from None
            except ApprovalRequired as held:
                context = _ask_approval(request, context, held)
        if result is None:
            return await handler(request)
        if isinstance(result, dict):
            return await handler(_rewritten(request, result))
        return _denial(result)
