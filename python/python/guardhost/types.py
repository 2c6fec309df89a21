"""guardhost's own request and decision dataclasses.

They have exactly the fields of DeerFlow's ``deerflow.guardrails.provider``
dataclasses; :class:`guardhost.deerflow.GuardhostProvider` returns DeerFlow's
own classes when DeerFlow is importable and these otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["GuardrailDecision", "GuardrailReason", "GuardrailRequest"]


@dataclass
class GuardrailRequest:
    """What a provider is asked about one tool call (DeerFlow's fields and defaults)."""

    tool_name: str
    tool_input: dict[str, Any]
    agent_id: str | None = None
    thread_id: str | None = None
    is_subagent: bool = False
    timestamp: str = ""
    user_id: str | None = None
    user_role: str | None = None
    oauth_provider: str | None = None
    oauth_id: str | None = None
    run_id: str | None = None
    tool_call_id: str | None = None
    channel_user_id: str | None = None
    is_internal: bool = False
    authz_attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class GuardrailReason:
    """Why a decision was made: a namespaced ``code`` and a ``message``."""

    code: str
    message: str = ""


@dataclass
class GuardrailDecision:
    """A provider's verdict."""

    allow: bool
    reasons: list[GuardrailReason] = field(default_factory=list)
    policy_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
