"""guardhost next to the Python it replaces, measured in the same run.

Sends the mix of tool calls ``guardhost bench`` sends (DeerFlow's 13 tools
with everyday arguments; ``bash``, ``write_file`` and ``str_replace``
denied) through DeerFlow's allowlist middleware algorithm in pure Python
(``deerflow_algorithm.py``), and through guardhost's middleware with
``guardhost bench``, round after round, alternating, on the same machine:

    cargo build --release --workspace
    python3 python/bench/reference.py --guardhost target/release/guardhost

Needs only the standard library. Each round measures every path once; the
table gives, per path, the median over the rounds of p50 / p99 per call
and of calls per second. The calls are the ones ``guardhost bench
--print-mix`` prints, so both sides decide exactly the same calls.
Each call is timed alone (``time.perf_counter_ns`` here, ``Instant`` there),
after a warm-up of a tenth of the calls. Before measuring, both sides decide
the mix once and must agree on every call (which are denied, and the
denial message), or the script stops.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Any

from deerflow_algorithm import PyAllowlist, PyMiddleware, ToolMessage

DENIED = ["bash", "write_file", "str_replace"]


def guardhost_env() -> dict[str, str]:
    """The environment guardhost runs in here: errors only, and no config
    from the caller's environment (every run names its own, or none)."""
    env = dict(os.environ, GUARDHOST_LOG="error")
    env.pop("GUARDHOST_CONFIG", None)
    return env


def python_round(mix: list[dict[str, Any]], calls: int) -> dict[str, float]:
    """One round of the pure-Python algorithm: p50, p99 (ns) and calls/s."""
    middleware = PyMiddleware(PyAllowlist(denied_tools=DENIED))
    result = ToolMessage(content="", tool_call_id="", name=None)
    handler = lambda _request: result  # noqa: E731
    # A fresh request object per call, as a runtime hands one over, made
    # outside the timed part.
    def requests(n: int) -> list[Any]:
        return [SimpleNamespace(tool_call=dict(mix[i % len(mix)]), runtime=SimpleNamespace(context=mix[i % len(mix)]["context"])) for i in range(n)]

    for request in requests(max(1, min(calls // 10, 20_000))):
        middleware.wrap_tool_call(request, handler)
    latencies = []
    clock = time.perf_counter_ns
    batch = requests(calls)
    started = clock()
    for request in batch:
        t = clock()
        middleware.wrap_tool_call(request, handler)
        latencies.append(clock() - t)
    wall = clock() - started
    latencies.sort()
    return {"p50_ns": latencies[len(latencies) // 2], "p99_ns": latencies[(len(latencies) * 99) // 100], "calls_per_second": calls / (wall / 1e9)}


def guardhost_round(binary: str, config: str | None, calls: int, use_async: bool) -> dict[str, float]:
    """One `guardhost bench --json` run."""
    command = [binary, "bench", "--calls", str(calls), "--json"]
    if config:
        command += ["--config", config]
    if use_async:
        command.append("--async")
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=guardhost_env()).stdout
    m = json.loads(out)
    return {"p50_ns": m["p50_ns"], "p99_ns": m["p99_ns"], "calls_per_second": m["calls_per_second"]}


def check_same_decisions(binary: str, config: str | None, mix: list[dict[str, Any]]) -> None:
    """Both sides must decide the mix alike: the same calls denied, with the
    same denial message, or the comparison means nothing."""
    lines = "".join(json.dumps(call) + "\n" for call in mix)
    command = [binary, "run"] + (["--config", config] if config else [])
    answers = subprocess.run(command, input=lines, check=True, capture_output=True, text=True, env=guardhost_env()).stdout.splitlines()
    middleware = PyMiddleware(PyAllowlist(denied_tools=DENIED))
    ran = ToolMessage(content="ran", tool_call_id="")
    for call, answer in zip(mix, answers, strict=True):
        theirs = json.loads(answer)
        ours = middleware.wrap_tool_call(SimpleNamespace(tool_call=call, runtime=SimpleNamespace(context=call["context"])), lambda _r: ran)
        denied = ours is not ran
        if denied != (theirs["status"] == "error") or (denied and ours.content != theirs["content"]):
            raise SystemExit(f"the two sides decide {call['name']!r} differently: {ours} / {theirs}")


def row(name: str, measured: list[dict[str, float]], python_p50: float) -> str:
    p50 = statistics.median(m["p50_ns"] for m in measured)
    p99 = statistics.median(m["p99_ns"] for m in measured)
    rate = statistics.median(m["calls_per_second"] for m in measured)
    return f"| {name} | {p50 / 1000:.2f} µs | {p99 / 1000:.2f} µs | {rate:,.0f} | {python_p50 / p50:.1f}× |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guardhost", default="target/release/guardhost", help="the guardhost executable (release build)")
    parser.add_argument("--calls", type=int, default=200_000, help="calls per path and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    binary = str(pathlib.Path(args.guardhost).resolve())
    printed = subprocess.run([binary, "bench", "--print-mix"], check=True, capture_output=True, text=True, env=guardhost_env())
    mix = [json.loads(line) for line in printed.stdout.splitlines()]
    library = pathlib.Path(binary).parent / "libguardhost_allowlist.so"
    check_same_decisions(binary, None, mix)

    with tempfile.TemporaryDirectory() as tmp:
        so_config = pathlib.Path(tmp) / "allowlist-so.yaml"
        so_config.write_text(
            "guardrails:\n  enabled: true\n  provider:\n"
            f"    use: {library}:AllowlistProvider\n"
            f"    config: {{denied_tools: {json.dumps(DENIED)}}}\n"
        )
        paths = [
            ("DeerFlow's algorithm, pure Python", lambda: python_round(mix, args.calls)),
            ("guardhost, built-in allowlist, sync", lambda: guardhost_round(binary, None, args.calls, False)),
            ("guardhost, built-in allowlist, async", lambda: guardhost_round(binary, None, args.calls, True)),
        ]
        if library.exists():
            check_same_decisions(binary, str(so_config), mix)
            paths.append(("guardhost, allowlist .so, sync", lambda: guardhost_round(binary, str(so_config), args.calls, False)))
        else:
            print(f"note: {library} not found (cargo build --release --workspace); its row is left out", file=sys.stderr)
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name, _ in paths}
        for r in range(args.rounds):
            for name, measure in paths:
                rounds[name].append(measure())
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(f"{args.calls} calls a path and round, {args.rounds} rounds, medians; Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print()
    print("| path | p50 | p99 | calls/s | Python's p50 / this p50 |")
    print("|---|---:|---:|---:|---:|")
    python_p50 = statistics.median(m["p50_ns"] for m in rounds[paths[0][0]])
    for name, _ in paths:
        print(row(name, rounds[name], python_p50))
    return 0


if __name__ == "__main__":
    sys.exit(main())
