"""``guardhost.deerflow:GuardhostProvider``: a guardhost provider inside DeerFlow.

DeerFlow builds it from its ``config.yaml`` with its own ``resolve_variable``
and the keys of ``provider.config`` as keyword arguments::

    guardrails:
      enabled: true
      provider:
        use: guardhost.deerflow:GuardhostProvider
        config:
          use: plugins/libguardhost_oap.so:OAPGuardrailProvider
          config: {passport_path: ./passport.json}
          isolation: process          # optional, as timeout_ms, sha256, allow_insecure_permissions

DeerFlow's ``GuardrailMiddleware`` then calls :meth:`GuardhostProvider.evaluate`
/ :meth:`GuardhostProvider.aevaluate` before every tool call; ``fail_closed``
and ``passport`` stay DeerFlow's.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timezone
from typing import Any

from . import server_program
from ._guardhost import BuildError, Interrupt, Provider
from . import types as _types

__all__ = ["GuardhostProvider"]

_FRAMEWORK_REFUSED = "does not accept config key `framework`"


def _decision_classes() -> tuple[Any, Any]:
    """DeerFlow's ``GuardrailDecision``/``GuardrailReason`` when importable, else guardhost's."""
    try:
        from deerflow.guardrails.provider import GuardrailDecision, GuardrailReason
    except ImportError:
        return _types.GuardrailDecision, _types.GuardrailReason
    return GuardrailDecision, GuardrailReason


def _interrupt_factory() -> Any:
    """What a provider's interrupt becomes: LangGraph's ``GraphInterrupt`` when
    LangGraph is installed (a ``GraphBubbleUp``, which DeerFlow re-raises), else
    :class:`guardhost.Interrupt`."""
    try:
        from langgraph.errors import GraphInterrupt
        from langgraph.types import Interrupt as LangGraphInterrupt
    except ImportError:

        def plain(message: str, payload: Any) -> BaseException:
            error = Interrupt(message)
            error.message = message  # type: ignore[attr-defined]
            error.payload = payload  # type: ignore[attr-defined]
            return error

        return plain

    def graph(message: str, payload: Any) -> BaseException:
        value = payload if payload is not None else message
        return GraphInterrupt([LangGraphInterrupt(value=value)])

    return graph



def _aevaluate_of(here: Any, may_block: bool) -> Any:
    """``GuardhostProvider.aevaluate`` for one provider, bound once: the
    core's ``aevaluate_here``, in a worker thread when the provider can
    block, else called in place (no attribute is read per call)."""
    if may_block:

        async def aevaluate(request: Any) -> Any:
            return await asyncio.to_thread(here, request)

    else:

        async def aevaluate(request: Any) -> Any:
            return here(request)

    aevaluate.__doc__ = GuardhostProvider.aevaluate.__doc__
    return aevaluate

class GuardhostProvider:
    """A DeerFlow ``GuardrailProvider`` whose decisions a guardhost provider makes.

    Keyword arguments (the keys of DeerFlow's ``provider.config``):

    - ``use``: the guardhost provider, ``path/to/libfoo.so:Symbol`` or
      ``builtin:AllowlistProvider``;
    - ``command``: instead of ``use``, a provider program and its arguments
      (``["python3", "my_provider.py"]``), run with ``isolation: process``
      in ``base_dir`` and spoken to over the provider protocol;
    - ``config``: that provider's own config (its constructor's keys);
    - ``isolation``: ``in_process`` (default) or ``process`` (a child
      process, whose crash or hang becomes a provider error);
    - ``timeout_ms``: give up on a call after this long (a provider error);
    - ``transport``: with ``isolation: process``, ``shared_memory`` (the
      default where it can be set up) or ``pipes``;
    - ``mode``: ``enforce`` (default), or ``warn`` / ``observe``: a denial is
      returned as an allow whose reason (``guardhost.shadow``) and metadata
      (``would_deny``) say what would have been denied, to try a policy on
      live traffic first (``warn`` and ``observe`` answer alike here:
      DeerFlow does the logging; a provider error is still DeerFlow's
      ``fail_closed``'s to decide);
    - ``decision_log``: every decision as a JSON line, the keys of a
      config's ``guardrails.decision_log`` (``{"path": ..., "args": ...,
      "mask": [...]}``; a relative path starts at ``base_dir``); a provider
      error is logged with outcome ``error``, DeerFlow deciding the call;
    - ``sha256``: the library's expected SHA-256 (hex);
    - ``allow_insecure_permissions``: load a library writable by others;
    - ``base_dir``: where relative paths (the library, path keys such as the
      OAP provider's ``passport_path``) are taken from; default: the working
      directory, since DeerFlow does not pass its config file's location;
    - ``framework``: injected by DeerFlow (``"deerflow"``); forwarded to the
      guardhost provider when it accepts ``framework``, exactly once.

    A bad ``use:``, a missing library, a failed ABI check, a SHA-256 mismatch
    or an unknown key raises :class:`guardhost.BuildError` here, with the
    ``guardhost`` command's message (naming the resolved path).
    """

    def __init__(
        self,
        use: str | None = None,
        config: dict[str, Any] | None = None,
        *,
        command: list[str] | None = None,
        isolation: str | None = None,
        timeout_ms: int | None = None,
        sha256: str | None = None,
        allow_insecure_permissions: bool = False,
        base_dir: str | os.PathLike[str] | None = None,
        framework: str | None = None,
        transport: str | None = None,
        mode: str | None = None,
        decision_log: dict[str, Any] | None = None,
    ) -> None:
        decision_cls, reason_cls = _decision_classes()
        config = dict(config or {})
        base = os.fspath(base_dir) if base_dir is not None else None

        if (use is None) == (command is None):
            raise TypeError("GuardhostProvider takes use=... (a provider library) or command=[...] (a provider program), exactly one of them")
        argv = None if command is None else [os.fspath(part) for part in command]
        if argv is not None and isolation is None:
            isolation = "process"

        def build(provider_config: dict[str, Any]) -> Provider:
            return Provider(
                use or "",
                provider_config,
                command=argv,
                isolation=isolation,
                timeout_ms=timeout_ms,
                transport=transport,
                mode=mode,
                decision_log=decision_log,
                sha256=sha256,
                allow_insecure_permissions=bool(allow_insecure_permissions),
                base_dir=base,
                program=server_program(),
                decision_cls=decision_cls,
                reason_cls=reason_cls,
                interrupt=_interrupt_factory(),
            )

        # The host injects `framework: deerflow` itself into a provider that
        # declares `framework` (or takes any key) unless the config sets it;
        # another value is passed only where the provider accepts the key.
        if framework is not None and framework != "deerflow" and "framework" not in config:
            try:
                core = build({**config, "framework": framework})
            except BuildError as error:
                if _FRAMEWORK_REFUSED not in str(error):
                    raise
                core = build(config)
        else:
            core = build(config)
        self._core = core
        self.name: str = core.name
        """The guardhost provider's name (e.g. ``allowlist``, ``oap``)."""
        # The hot path, without a Python frame in between.
        self.evaluate = core.evaluate  # type: ignore[method-assign]
        self._aevaluate_here = core.aevaluate_here
        self._may_block: bool = core.may_block
        self.aevaluate = _aevaluate_of(core.aevaluate_here, core.may_block)  # type: ignore[method-assign]

    @property
    def info(self) -> dict[str, Any]:
        """What guardhost knows about the provider (source, ABI, keys, isolation ...)."""
        return self._core.info

    def evaluate(self, request: Any) -> Any:  # noqa: F811 - replaced per instance by the core's
        """Decides one tool call: DeerFlow's ``GuardrailRequest`` in (read by
        attribute; only what the provider reads), a ``GuardrailDecision`` out.
        The GIL is released while the provider decides, unless it declares
        that it never blocks. A provider error raises
        :class:`guardhost.ProviderError` (DeerFlow's ``fail_closed`` then
        decides); an interrupt raises LangGraph's ``GraphInterrupt`` (or
        :class:`guardhost.Interrupt` without LangGraph)."""
        return self._core.evaluate(request)

    async def aevaluate(self, request: Any) -> Any:  # noqa: F811 - replaced per instance
        """The async :meth:`evaluate`, through the provider's ``aevaluate``. A
        provider that can block (``timeout_ms``, ``isolation: process``) runs in
        a worker thread, so the event loop never waits on it."""
        if self._may_block:
            return await asyncio.to_thread(self._aevaluate_here, request)
        return self._aevaluate_here(request)

    def filter_resources(self, principal: Any, resource_type: str, candidates: list[str]) -> list[str]:
        """DeerFlow's assembly-time filter (``AuthorizationProvider.filter_resources``):
        the ``candidates`` the ``principal`` may use, in their order, each
        asked about as a call without arguments. guardhost providers decide
        tool calls: ``resource_type`` must be ``"tool"`` (any other raises
        ``ValueError``, so that DeerFlow's ``fail_closed`` decides). A
        provider error raises :class:`guardhost.ProviderError`, likewise."""
        if resource_type != "tool":
            raise ValueError(f"guardhost providers decide tool calls: resource type {resource_type!r} cannot be filtered (only 'tool')")
        read = lambda name, default=None: getattr(principal, name, default)  # noqa: E731
        attributes = read("attributes") or {}
        allowed = []
        for candidate in candidates:
            request = _FilterRequest(
                tool_name=candidate,
                user_id=read("user_id"),
                user_role=read("role"),
                oauth_provider=read("oauth_provider"),
                oauth_id=read("oauth_id"),
                channel_user_id=read("channel_user_id"),
                is_internal=bool(read("is_internal", False)),
                authz_attributes=dict(attributes),
            )
            if self._core.evaluate(request).allow:
                allowed.append(candidate)
        return allowed

    def __repr__(self) -> str:
        return f"GuardhostProvider(name={self.name!r}, source={self.info['source']!r})"


class _FilterRequest:
    """A ``GuardrailRequest``-shaped call without arguments, for the filter."""

    def __init__(self, **fields: Any) -> None:
        self.tool_input: dict[str, Any] = {}
        self.agent_id = self.thread_id = self.run_id = self.tool_call_id = None
        self.is_subagent = False
        self.timestamp = datetime.now(timezone.utc).isoformat()
        self.__dict__.update(fields)
