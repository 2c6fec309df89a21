"""What guardhost mcp adds to a tool call's round trip, measured side by
side in one run: the official MCP Python SDK's client calls the test
server's `echo` tool directly, through a relay that only copies bytes
(mcp/bench/relay.rs: the cost of any process on the path), and through
the proxy, in turn call by call so that all three see the same machine.
Prints p50 and p99 of each, the ratios to the direct call, and what each
adds (at each percentile); the proxy's own work is what it adds beyond
the relay.

    scripts/bench-mcp [--calls N] [--rounds R]

The proxy runs the allowlist (built in) with the config below, so each call
is also decided, with its default logging (warnings). A second, shorter
session through the proxy logs each decision (info), whose own time is
printed as p50 and p99 too.
"""

import argparse
import re
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import client, proxy_command, server_command  # noqa: E402

CONFIG = """
guardrails:
  enabled: true
  provider: {use: builtin:AllowlistProvider, config: {denied_tools: [write_file]}}
"""


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def timed(c, into, i):
    started = time.perf_counter_ns()
    await c.call_tool("echo", {"text": f"call {i}"})
    into.append((time.perf_counter_ns() - started) / 1000)


async def main(calls, rounds, relay):
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "config.yaml"
        config.write_text(CONFIG)
        times = {"direct": [], "relay": [], "proxied": []}
        quiet = {"GUARDHOST_LOG": "warn"}
        async with (
            client(server_command(), env=quiet) as direct,
            client([relay, *server_command()], env=quiet) as relayed,
            client(proxy_command(config), env=quiet) as proxied,
        ):
            ways = {"direct": direct, "relay": relayed, "proxied": proxied}
            # Warm every path (imports, caches, the first decision).
            for i in range(50):
                for way in ways.values():
                    await timed(way, [], i)
            for i in range(calls * rounds):
                for name, way in ways.items():
                    await timed(way, times[name], i)
        # The decisions' own time, from the proxy's log (info) in a file.
        log = Path(folder) / "proxy.log"
        logged = ["sh", "-c", f"exec {shlex.join(proxy_command(config))} 2>>{shlex.quote(str(log))}"]
        async with client(logged, env={"GUARDHOST_LOG": "info"}) as proxied:
            for i in range(calls):
                await timed(proxied, [], i)
        decisions = [int(m) for m in re.findall(r"micros=(\d+)", log.read_text())]
    print(f"{calls * rounds} calls each way, in turn, echo tool, MCP Python SDK client over stdio")
    print(f"{'':10} {'p50 µs':>10} {'p99 µs':>10} {'mean µs':>10} {'ratio p50':>10} {'ratio p99':>10} {'added p50':>10} {'added p99':>10}")
    d50, d99 = percentile(times["direct"], 50), percentile(times["direct"], 99)
    for name, values in times.items():
        p50, p99 = percentile(values, 50), percentile(values, 99)
        print(
            f"{name:10} {p50:10.1f} {p99:10.1f} {statistics.mean(values):10.1f} {p50 / d50:9.3f}x {p99 / d99:9.3f}x"
            f" {p50 - d50:10.1f} {p99 - d99:10.1f}"
        )
    r50, r99 = percentile(times["relay"], 50), percentile(times["relay"], 99)
    p50, p99 = percentile(times["proxied"], 50), percentile(times["proxied"], 99)
    print(f"the proxy beyond the relay: p50 {p50 - r50:.1f} µs, p99 {p99 - r99:.1f} µs")
    if decisions:
        print(
            f"the decision itself ({len(decisions)} calls, from the proxy's log): "
            f"p50 {percentile(decisions, 50)} µs, p99 {percentile(decisions, 99)} µs"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--relay", required=True, help="the byte relay (mcp/bench/relay.rs), built")
    arguments = parser.parse_args()
    anyio.run(main, arguments.calls, arguments.rounds, arguments.relay)
