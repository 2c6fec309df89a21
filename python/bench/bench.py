"""Benchmarks of the guardhost Python package (not tests: numbers only).

Measures in one run, on the same machine and the same requests:

- ``GuardhostProvider.evaluate`` (allow and deny) and ``aevaluate`` through
  the allowlist library, next to a pure-Python allowlist provider written
  to DeerFlow's algorithm;
- the guardhost LangChain middleware's ``wrap_tool_call`` (allow and deny),
  next to a pure-Python middleware written to DeerFlow's ``wrap_tool_call``
  algorithm with that pure-Python allowlist;
- an OAP decision from Python (``GuardhostProvider.evaluate`` through the OAP
  library and ``examples/oap/passport.json``).

Each figure is the best of ``--rounds`` rounds of ``--iterations`` calls
(``time.perf_counter_ns``), per call. Run it with release-built libraries::

    cargo build --release -p guardhost-allowlist -p guardhost-oap
    python python/bench/bench.py --lib-dir target/release
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import time
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from langchain_core.messages import ToolMessage

from deerflow_algorithm import PyAllowlist, PyMiddleware, Types
from guardhost.deerflow import GuardhostProvider
from guardhost.langchain import GuardrailMiddleware
from guardhost.types import GuardrailDecision, GuardrailReason, GuardrailRequest

REPO = pathlib.Path(__file__).resolve().parents[2]


def best_ns(fn: Any, iterations: int, rounds: int) -> float:
    """Best per-call nanoseconds over `rounds` rounds of `iterations` calls."""
    for _ in range(min(iterations, 1000)):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(iterations):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / iterations)
    return best


def best_async_ns(coroutine_fn: Any, iterations: int, rounds: int) -> float:
    """`best_ns` for a coroutine function: each round awaits it `iterations`
    times in one task on one event loop."""

    async def repeat(n: int) -> int:
        start = time.perf_counter_ns()
        for _ in range(n):
            await coroutine_fn()
        return time.perf_counter_ns() - start

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(repeat(min(iterations, 1000)))
        return min(loop.run_until_complete(repeat(iterations)) / iterations for _ in range(rounds))
    finally:
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib-dir", default=str(REPO / "target" / "release"), help="where the provider libraries are")
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    lib = pathlib.Path(args.lib_dir).resolve()
    allowlist_so = f"{lib / 'libguardhost_allowlist.so'}:AllowlistProvider"
    oap_so = f"{lib / 'libguardhost_oap.so'}:OAPGuardrailProvider"
    lists = {"denied_tools": ["bash", "write_file", "str_replace"]}

    context = {"thread_id": "thread-1", "user_id": "user-1", "run_id": "run-1"}
    request = GuardrailRequest(
        tool_name="read_file", tool_input={"path": "/mnt/user-data/workspace/notes.md"},
        thread_id="thread-1", user_id="user-1", run_id="run-1", tool_call_id="call-1",
        timestamp=datetime.now(UTC).isoformat(),
    )
    guardhost_provider = GuardhostProvider(use=allowlist_so, config=lists, framework="deerflow")
    # DeerFlow's own shapes: its dataclasses and LangChain's ToolMessage.
    types = Types(request=GuardrailRequest, reason=GuardrailReason, decision=GuardrailDecision, message=ToolMessage)
    python_provider = PyAllowlist(**lists, types=types)
    oap = GuardhostProvider(use=oap_so, config={"passport_path": str(REPO / "examples" / "oap" / "passport.json")}, framework="deerflow")
    oap_request = GuardrailRequest(tool_name="bash", tool_input={"command": "ls -la /mnt/user-data/workspace"}, tool_call_id="call-1")
    denied = GuardrailRequest(tool_name="bash", tool_input={"command": "curl https://example.com"}, thread_id="thread-1", user_id="user-1", run_id="run-1", tool_call_id="call-2", timestamp=request.timestamp)
    assert guardhost_provider.evaluate(request).allow and python_provider.evaluate(request).allow
    assert guardhost_provider.evaluate(denied) == python_provider.evaluate(denied)
    assert oap.evaluate(oap_request).allow

    result = ToolMessage(content="ok", tool_call_id="call-1", name="read_file")
    handler = lambda _request: result  # noqa: E731
    allow_call = SimpleNamespace(tool_call={"name": "read_file", "args": {"path": "/mnt/user-data/workspace/notes.md"}, "id": "call-1"}, runtime=SimpleNamespace(context=context))
    deny_call = SimpleNamespace(tool_call={"name": "bash", "args": {"command": "curl https://example.com"}, "id": "call-2"}, runtime=SimpleNamespace(context=context))
    ours = GuardrailMiddleware(use=allowlist_so, provider_config=lists)
    theirs = PyMiddleware(PyAllowlist(**lists, types=types), types=types)
    for mw in (ours, theirs):
        assert mw.wrap_tool_call(allow_call, handler) is result
        assert mw.wrap_tool_call(deny_call, handler).status == "error"
    assert ours.wrap_tool_call(deny_call, handler).content == theirs.wrap_tool_call(deny_call, handler).content

    n, r = args.iterations, args.rounds
    rows = [
        ("provider.evaluate, allowlist .so via GuardhostProvider", best_ns(lambda: guardhost_provider.evaluate(request), n, r)),
        ("provider.evaluate, pure-Python allowlist (DeerFlow's)", best_ns(lambda: python_provider.evaluate(request), n, r)),
        ("provider.evaluate deny, allowlist .so", best_ns(lambda: guardhost_provider.evaluate(denied), n, r)),
        ("provider.evaluate deny, pure-Python allowlist", best_ns(lambda: python_provider.evaluate(denied), n, r)),
        ("provider.aevaluate, allowlist .so", best_async_ns(lambda: guardhost_provider.aevaluate(request), n, r)),
        ("provider.aevaluate, pure-Python allowlist", best_async_ns(lambda: python_provider.aevaluate(request), n, r)),
        ("wrap_tool_call allow, guardhost middleware (.so)", best_ns(lambda: ours.wrap_tool_call(allow_call, handler), n, r)),
        ("wrap_tool_call allow, DeerFlow-algorithm middleware", best_ns(lambda: theirs.wrap_tool_call(allow_call, handler), n, r)),
        ("wrap_tool_call deny, guardhost middleware (.so)", best_ns(lambda: ours.wrap_tool_call(deny_call, handler), n, r)),
        ("wrap_tool_call deny, DeerFlow-algorithm middleware", best_ns(lambda: theirs.wrap_tool_call(deny_call, handler), n, r)),
        ("OAP decision from Python (GuardhostProvider.evaluate)", best_ns(lambda: oap.evaluate(oap_request), n, r)),
    ]
    # Where GuardhostProvider.evaluate's time goes: the same library with
    # decision classes that build nothing (Python lambdas), on an empty and
    # on the full request, and the dataclasses' own construction.
    from guardhost._guardhost import Provider

    def core(decision_cls: Any, reason_cls: Any) -> Provider:
        return Provider(allowlist_so, lists, decision_cls=decision_cls, reason_cls=reason_cls, interrupt=lambda m, p: Exception(m))

    nothing = core(lambda *a: None, lambda *a: None)
    empty = GuardrailRequest(tool_name="read_file", tool_input={})
    rows += [
        ("  breakdown: empty request, no decision objects", best_ns(lambda: nothing.evaluate(empty), n, r)),
        ("  breakdown: full request, no decision objects", best_ns(lambda: nothing.evaluate(request), n, r)),
        ("  breakdown: GuardrailDecision + GuardrailReason alone", best_ns(lambda: GuardrailDecision(allow=True, reasons=[GuardrailReason(code="oap.allowed")]), n, r)),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'what':<{width}}  per call")
    for name, ns in rows:
        print(f"{name:<{width}}  {ns / 1000:7.2f} µs")
    ratios = {
        "evaluate allow: guardhost / pure Python": rows[0][1] / rows[1][1],
        "evaluate deny: guardhost / pure Python": rows[2][1] / rows[3][1],
        "aevaluate allow: guardhost / pure Python": rows[4][1] / rows[5][1],
        "wrap_tool_call allow: guardhost / DeerFlow": rows[6][1] / rows[7][1],
        "wrap_tool_call deny: guardhost / DeerFlow": rows[8][1] / rows[9][1],
    }
    for name, ratio in ratios.items():
        print(f"{name:<{width}}  {ratio:7.2f}x")


if __name__ == "__main__":
    main()
