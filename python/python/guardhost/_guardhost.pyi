"""Type stubs of the extension module ``guardhost._guardhost``."""

from collections.abc import Callable
from typing import Any, final

__version__: str
SERVER_ENV: str

class GuardhostError(Exception):
    """The base of every error guardhost raises."""

class ConfigError(GuardhostError):
    """A config that cannot be used."""

class BuildError(GuardhostError):
    """A provider that cannot be built."""

class ProviderError(GuardhostError):
    """The provider failed to decide a call."""

class RequestError(GuardhostError):
    """A request that cannot be built (e.g. ``authz_attributes`` not a mapping)."""

class Interrupt(GuardhostError):
    """A provider's control-flow signal; never a decision."""

    message: str
    payload: Any

class ApprovalRequired(GuardhostError):
    """A guard holds the call for a human's approval (``ask``); it did not run."""

    tool: str
    reasons: list[tuple[str, str]]
    ask: dict[str, Any]

@final
class Reason:
    """One reason of a decision."""

    @property
    def code(self) -> str: ...
    @property
    def message(self) -> str: ...

@final
class Decision:
    """What the guardrail decided about one call."""

    @property
    def allow(self) -> bool: ...
    @property
    def reasons(self) -> list[Reason]: ...
    @property
    def policy_id(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def provider_error(self) -> bool: ...
    @property
    def message(self) -> dict[str, Any] | None:
        """The denial tool message (``content``, ``tool_call_id``, ``name``, ``status``), or ``None`` when allowed."""
    def to_dict(self) -> dict[str, Any]: ...

@final
class Guardrail:
    """A guardrail installed from a ``guardrails:`` section."""

    @staticmethod
    def from_path(path: str, program: str | None = None) -> Guardrail | None: ...
    @staticmethod
    def from_yaml(text: str, base_dir: str | None = None, origin: str = "<config>", program: str | None = None) -> Guardrail | None: ...
    @property
    def name(self) -> str: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def fail_closed(self) -> bool: ...
    @property
    def passport(self) -> str | None: ...
    @property
    def may_block(self) -> bool: ...
    def decide(
        self,
        tool_name: str | None,
        args: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        tool_call_id: str | None = None,
        *,
        asynchronous: bool = False,
    ) -> Decision: ...
    def check(
        self, tool_call: dict[str, Any], context: Any = None, asynchronous: bool = False
    ) -> tuple[str, str, str] | dict[str, Any] | None: ...
    def filter_tools(self, tools: list[str], context: dict[str, Any] | None = None) -> list[str]: ...
    @property
    def guards(self) -> list[tuple[str, str, str]]: ...

@final
class Provider:
    """One provider built from ``use:`` and ``config``."""

    def __init__(
        self,
        use_: str,
        config: dict[str, Any] | None = None,
        *,
        isolation: str | None = None,
        timeout_ms: int | None = None,
        sha256: str | None = None,
        allow_insecure_permissions: bool = False,
        base_dir: str | None = None,
        program: str | None = None,
        command: list[str] | None = None,
        transport: str | None = None,
        mode: str | None = None,
        decision_log: dict[str, Any] | None = None,
        decision_cls: Callable[..., Any],
        reason_cls: Callable[..., Any],
        interrupt: Callable[[str, Any], BaseException],
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def may_block(self) -> bool: ...
    def evaluate(self, request: Any, asynchronous: bool = False) -> Any: ...
    def aevaluate_here(self, request: Any) -> Any: ...
    @property
    def _fills_decisions(self) -> bool: ...
    @property
    def _reads(self) -> tuple[bool, bool]: ...
    @property
    def _keeps_gil(self) -> bool: ...

def conformance_json(
    use_: str | None,
    config: dict[str, Any] | None = None,
    quick: bool = False,
    threads: int | None = None,
    iterations: int | None = None,
    latency_budget_us: int | None = None,
    allow_insecure_permissions: bool = False,
    command: list[str] | None = None,
    isolation: str | None = None,
    fuzz_seconds: float | None = None,
    seed: int | None = None,
    program: str | None = None,
) -> tuple[str, str]: ...
def serve_provider(input: int, output: int) -> int: ...
