"""What guardhost mcp adds to a tool call's round trip, measured side by
side in one run: the official MCP Python SDK's client calls the test
server's `echo` tool directly and through the proxy, interleaved in rounds
so that both see the same machine. Prints p50 and p99 of each, the ratio,
and the proxy's added time (proxied minus direct, at each percentile).

    scripts/bench-mcp [--calls N] [--rounds R]

The proxy runs the allowlist (built in) with the config below, so each call
is also decided.
"""

import argparse
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


async def timed(c, calls, into):
    for i in range(calls):
        started = time.perf_counter_ns()
        await c.call_tool("echo", {"text": f"call {i}"})
        into.append((time.perf_counter_ns() - started) / 1000)


async def main(calls, rounds):
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "config.yaml"
        config.write_text(CONFIG)
        direct_times, proxied_times = [], []
        async with client(server_command(), env={"GUARDHOST_LOG": "warn"}) as direct, client(
            proxy_command(config), env={"GUARDHOST_LOG": "warn"}
        ) as proxied:
            # Warm both paths (imports, caches, the first decision).
            await timed(direct, 50, [])
            await timed(proxied, 50, [])
            for _ in range(rounds):
                await timed(direct, calls, direct_times)
                await timed(proxied, calls, proxied_times)
    print(f"{rounds} rounds x {calls} calls each way, echo tool, MCP Python SDK client over stdio")
    print(f"{'':10} {'p50 µs':>10} {'p99 µs':>10} {'mean µs':>10}")
    for name, values in (("direct", direct_times), ("proxied", proxied_times)):
        print(f"{name:10} {percentile(values, 50):10.1f} {percentile(values, 99):10.1f} {statistics.mean(values):10.1f}")
    d50, p50 = percentile(direct_times, 50), percentile(proxied_times, 50)
    d99, p99 = percentile(direct_times, 99), percentile(proxied_times, 99)
    print(f"ratio proxied/direct: p50 {p50 / d50:.3f}x, p99 {p99 / d99:.3f}x")
    print(f"added by the proxy: p50 {p50 - d50:.1f} µs, p99 {p99 - d99:.1f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=10)
    arguments = parser.parse_args()
    anyio.run(main, arguments.calls, arguments.rounds)
