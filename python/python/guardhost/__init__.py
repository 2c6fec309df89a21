"""guardhost for Python: DeerFlow-compatible guardrails before every tool call.

The decision is made by a guardhost provider: the built-in allowlist
(``builtin:AllowlistProvider``) or a provider library built against
guardhost's stable ABI (``path/to/libfoo.so:Symbol``, e.g. the OAP provider).

- :func:`load` installs the guardrail of a ``guardrails:`` config (a file or a
  dict) and :meth:`Guardrail.decide` decides one call;
- :func:`conformance` runs the conformance kit against a provider library;
- :mod:`guardhost.deerflow` is a DeerFlow ``GuardrailProvider``
  (``use: guardhost.deerflow:GuardhostProvider``);
- :mod:`guardhost.langchain` is a LangChain 1.x ``AgentMiddleware``.

Errors are :class:`GuardhostError` and its subclasses; their messages are the
``guardhost`` command's.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from typing import Any

from ._guardhost import (
    ApprovalRequired,
    BuildError,
    ConfigError,
    Decision,
    Guardrail,
    GuardhostError,
    Interrupt,
    ProviderError,
    Reason,
    RequestError,
    __version__,
    conformance_json as _conformance_json,
)

__all__ = [
    "ApprovalRequired",
    "BuildError",
    "ConfigError",
    "ConformanceReport",
    "Decision",
    "Guardrail",
    "GuardhostError",
    "Interrupt",
    "ProviderError",
    "Reason",
    "RequestError",
    "__version__",
    "approval",
    "conformance",
    "load",
    "server_program",
]

def approval(ask: Mapping[str, Any], approved: bool = True, approved_by: str | None = None) -> dict[str, Any]:
    """The approval of a call held by ``ask`` (an :class:`ApprovalRequired`'s
    ``.ask``, or the ``ask`` of the LangGraph interrupt
    :class:`guardhost.langchain.GuardrailMiddleware` raises): what to resume
    the run with, or to put in the call's context as ``approval``.

    The approval is bound to the call the ask was about: its digest covers
    the tool, the arguments, the thread, the user, the call's id and the
    deadline, so it approves nothing else, and nothing after the deadline.
    """
    return {
        "approved": approved,
        "approved_by": approved_by,
        "entry": ask["entry"],
        "digest": ask["digest"],
        "deadline": ask["deadline"],
    }


_SERVER = "guardhost-provider-server" + (".exe" if os.name == "nt" else "")


def server_program() -> str | None:
    """The ``guardhost-provider-server`` script this package installed.

    It runs a provider configured with ``isolation: process`` in a child
    process. ``$GUARDHOST_BIN`` (a ``guardhost`` executable), when set, is
    used instead. ``None`` when the script cannot be found.
    """
    candidates = [sysconfig.get_path("scripts")]
    try:
        candidates.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:  # pragma: no cover - no user scheme on this platform
        pass
    candidates.append(os.path.dirname(sys.executable))
    for directory in candidates:
        if directory:
            path = os.path.join(directory, _SERVER)
            if os.path.isfile(path):
                return path
    return shutil.which(_SERVER)


def load(config: str | os.PathLike[str] | Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None) -> Guardrail | None:
    """Loads a guardrail config and installs its guardrail, as ``guardhost check`` does.

    ``config`` is a file path (a DeerFlow ``config.yaml``, whose ``guardrails:``
    section is used, or a file holding the section itself; relative paths in
    it are taken from the file's directory) or a mapping (a whole config or the
    section; relative paths are taken from ``base_dir``, default the working
    directory). ``$ENV_VAR`` strings are resolved from the environment.

    Returns ``None`` when the config leaves the guardrail out
    (``enabled: false``, or no provider), as DeerFlow does.

    Raises :class:`ConfigError` for a config that cannot be used and
    :class:`BuildError` for a provider that cannot be built.
    """
    program = server_program()
    if isinstance(config, (str, os.PathLike)):
        if base_dir is not None:
            raise TypeError("base_dir applies to a mapping config; a file's relative paths are taken from its directory")
        return Guardrail.from_path(os.fspath(config), program)
    if isinstance(config, Mapping):
        try:
            text = json.dumps(dict(config))
        except (TypeError, ValueError) as error:
            raise ConfigError(f"<dict>: the config is not plain data (YAML/JSON values): {error}") from None
        base = os.fspath(base_dir) if base_dir is not None else None
        return Guardrail.from_yaml(text, base, "<dict>", program)
    raise TypeError(f"config must be a file path or a mapping, not {type(config).__name__}")


class ConformanceReport(dict):  # type: ignore[type-arg]
    """The conformance kit's report: the JSON of ``guardhost conformance --format json``.

    A dict (``use``, ``provider``, ``abi_version``, ``cases``, ``seconds``,
    ``passed``) with :attr:`passed` and :attr:`text` (the text report).
    """

    text: str

    @property
    def passed(self) -> bool:
        """Whether no case failed."""
        return bool(self["passed"])

    def failures(self) -> list[dict[str, Any]]:
        """The cases that failed."""
        return [case for case in self["cases"] if case.get("status") == "fail"]


def conformance(
    use: str | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    command: Sequence[str] | None = None,
    quick: bool = False,
    threads: int | None = None,
    iterations: int | None = None,
    latency_budget_us: int | None = None,
    allow_insecure_permissions: bool = False,
    isolation: str | None = None,
    fuzz_seconds: float | None = None,
    seed: int | None = None,
) -> ConformanceReport:
    """Runs the conformance kit against a provider, as ``guardhost conformance`` does.

    ``use`` is what goes after ``use:`` in YAML (relative paths from the
    working directory), or ``command`` a provider program and its arguments
    (run in the working directory); ``config`` is the provider's config.
    ``quick`` uses the kit's quick options (fewer iterations, a 50 ms latency
    budget); ``threads``, ``iterations`` and ``latency_budget_us`` override
    single options; ``allow_insecure_permissions`` loads a library that
    other users could change; ``isolation="process"`` runs a library's code
    in a provider process, where a crash is a failed case rather than the
    end of the interpreter; ``fuzz_seconds`` and ``seed`` set the random
    requests (the report names the seed). The GIL is released while the
    kit runs.
    """
    argv = None if command is None else [os.fspath(part) for part in command]
    report_json, text = _conformance_json(
        use,
        dict(config) if config else None,
        quick,
        threads,
        iterations,
        latency_budget_us,
        allow_insecure_permissions,
        argv,
        isolation,
        fuzz_seconds,
        seed,
        server_program(),
    )
    report = ConformanceReport(json.loads(report_json))
    report.text = text
    return report
