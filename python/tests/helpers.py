"""Tool-call requests and handlers shaped like LangGraph's."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from langchain_core.messages import ToolMessage


def call(name: str | None = "bash", args: dict[str, Any] | None = None, id: str | None = "call-1", context: Any = None) -> SimpleNamespace:
    """A ToolCallRequest-like object: `tool_call` dict and `runtime.context`."""
    tool_call: dict[str, Any] = {"args": args if args is not None else {}}
    if name is not None:
        tool_call["name"] = name
    if id is not None:
        tool_call["id"] = id
    return SimpleNamespace(tool_call=tool_call, runtime=SimpleNamespace(context=context), state={})


class Handler:
    """A tool handler that counts its calls and returns one fixed message."""

    def __init__(self) -> None:
        self.calls = 0
        self.result = ToolMessage(content="ran", tool_call_id="call-1", name="tool")

    def __call__(self, request: Any) -> ToolMessage:
        self.calls += 1
        return self.result

    async def asynchronous(self, request: Any) -> ToolMessage:
        self.calls += 1
        await asyncio.sleep(0)
        return self.result


def run(middleware: Any, request: Any, handler: Handler, path: str) -> Any:
    """Runs `request` through `middleware` on the sync or the async path."""
    if path == "sync":
        return middleware.wrap_tool_call(request, handler)
    return asyncio.run(middleware.awrap_tool_call(request, handler.asynchronous))
