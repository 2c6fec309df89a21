"""The official MCP conformance suite (`@modelcontextprotocol/conformance`,
npm; scripts/test-mcp installs it) through guardhost mcp --listen
--upstream: every server scenario against a server written with the
official Python SDK (conformance_server.py), directly and through the
proxy, check by check. With an allow-all guardrail the proxy must not
change one check's status; with one tool denied, only that tool's scenario
may fail."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HERE, http_server, listening
from test_real_servers import npm_server

SUITE_TIMEOUT = 300

ALLOW_ALL = """
    guardrails:
      enabled: true
      fail_closed: true
      provider:
        use: builtin:AllowlistProvider
        config: {}
"""

DENY_IMAGE = """
    guardrails:
      enabled: true
      fail_closed: true
      provider:
        use: builtin:AllowlistProvider
        config: {denied_tools: [test_image_content]}
"""


def conformance_server(port):
    return [sys.executable, str(HERE / "conformance_server.py"), "--port", str(port)]


def run_suite(suite, url, out):
    """Every server scenario (`--suite all`) against url: each check's
    status by (scenario, check)."""
    run = subprocess.run(
        [*suite, "server", "--url", url, "--suite", "all", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT,
    )
    statuses = {}
    for checks in sorted(Path(out).glob("*/checks.json")):
        # Results folders are named server-SCENARIO-TIMESTAMP.
        scenario = checks.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        for check in json.loads(checks.read_text()):
            statuses[(scenario, check["id"])] = check["status"]
    assert statuses, f"the suite reported nothing:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return statuses


def test_the_suite_passes_through_the_proxy_exactly_as_directly(write_config, tmp_path):
    suite = npm_server("conformance")
    with http_server(conformance_server) as upstream:
        direct = run_suite(suite, upstream, tmp_path / "direct")
        failed = sorted(k for k, status in direct.items() if status == "FAILURE")
        assert not failed, f"the conformance server itself fails: {failed}"
        assert len({scenario for scenario, _ in direct}) >= 30, sorted(direct)

        with listening(write_config(ALLOW_ALL), "--upstream", upstream) as (url, _):
            proxied = run_suite(suite, url, tmp_path / "proxied")
        assert proxied == direct

        with listening(write_config(DENY_IMAGE, "deny.yaml"), "--upstream", upstream) as (url, _):
            denied = run_suite(suite, url, tmp_path / "denied")
        changed = {k: (direct.get(k), denied.get(k)) for k in direct.keys() | denied.keys() if direct.get(k) != denied.get(k)}
        assert changed == {("tools-call-image", "tools-call-image"): ("SUCCESS", "FAILURE")}
