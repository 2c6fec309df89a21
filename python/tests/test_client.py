"""`guardhost.client`: the decision service's client against the real
`guardhost-server` binary on a loopback port and a Unix socket: the same
decisions as the package's own `guardhost.load(...).decide`, batches,
tokens, refusals."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

import guardhost
from guardhost.client import DecisionClient, ServiceError

SERVER = pathlib.Path(os.environ.get("GUARDHOST_SERVER_CLI", pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "guardhost-server"))

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the server tests run on Linux")


def start(tmp_path: pathlib.Path, allowlist_so: str, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    assert SERVER.is_file(), f"{SERVER} is missing: run scripts/test-python (it builds guardhost-server)"
    config = tmp_path / "config.yaml"
    config.write_text(f"guardrails:\n  enabled: true\n  provider:\n    use: {allowlist_so}\n    config: {{denied_tools: [bash]}}\n")
    listen = [] if "--unix" in args else ["--listen", "127.0.0.1:0"]
    process = subprocess.Popen(
        [str(SERVER), "--config", str(config), *listen, *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    match = re.search(r"listening on (\S+)", line)
    assert match, line
    return process, match.group(1)


@pytest.fixture
def server(tmp_path, allowlist_so):
    process, url = start(tmp_path, allowlist_so)
    yield url
    process.terminate()
    assert process.wait(timeout=10) == 0


def test_the_service_decides_as_the_package_does(server, allowlist_so):
    local = guardhost.load({"guardrails": {"enabled": True, "provider": {"use": allowlist_so, "config": {"denied_tools": ["bash"]}}}})
    assert local is not None
    with DecisionClient(server) as client:
        assert client.ready()
        for name, args in [("bash", {"command": "ls"}), ("read_file", {"path": "/x"}), ("bash", {})]:
            remote = client.decide(name, args, id="c-1", context={"thread_id": "t-1"})
            mine = local.decide(name, args, {"thread_id": "t-1"})
            assert remote["allow"] == mine.allow
            assert [(r["code"], r["message"]) for r in remote["reasons"]] == [(r.code, r.message) for r in mine.reasons]
            assert remote["outcome"] == ("allow" if mine.allow else "deny")
        decisions = client.decide_batch([{"name": "bash"}, {"name": "ls"}])
        assert [d["outcome"] for d in decisions] == ["deny", "allow"]
        assert [d["line"] for d in decisions] == [1, 2]
        bad = client.decide(None, {"x": 1}, context={"authz_attributes": 5})
        assert bad["outcome"] == "error" and "authz_attributes" in bad["error"]["message"]
        assert 'guardhost_decisions_total{entry="allowlist",provider="allowlist",outcome="deny"' in client.metrics()


def test_a_token_is_needed_when_set_and_a_refusal_raises(tmp_path, allowlist_so):
    process, url = start(tmp_path, allowlist_so, "--token-env", "GH_TEST_TOKEN", env={"GH_TEST_TOKEN": "s3cret"})
    try:
        with pytest.raises(ServiceError) as refused:
            DecisionClient(url).decide("ls")
        assert refused.value.status == 401 and refused.value.kind == "unauthorized"
        assert DecisionClient(url, token="s3cret").decide("bash")["outcome"] == "deny"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_unix_socket(tmp_path, allowlist_so):
    socket = tmp_path / "guardhost.sock"
    process, url = start(tmp_path, allowlist_so, "--unix", str(socket))
    try:
        assert url == f"unix:{socket}"
        client = DecisionClient(url)
        for _ in range(3):
            assert client.decide("bash")["outcome"] == "deny"
        client.close()
    finally:
        process.terminate()
        process.wait(timeout=10)
    # The socket is removed at shutdown.
    deadline = time.time() + 5
    while socket.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert not socket.exists()


def test_a_bad_url_is_refused_saying_what_to_write():
    with pytest.raises(ValueError, match="http://host:port or unix:/path"):
        DecisionClient("ftp://x")


def test_an_answer_with_a_key_twice_is_refused_naming_it():
    """A real HTTP server (not guardhost's, which never sends one) answers
    with a key twice: the client names it instead of reading the last."""
    import http.server
    import threading

    answers = [
        b'{"line": 1, "outcome": "deny", "outcome": "allow", "tool_call_id": "c", "name": "bash"}',
        b'{"decisions": [{"line": 1, "outcome": "allow"}, {"line": 2, "reasons": [{"code": "a", "code": "b"}]}]}',
        b'{"line": 1, "outcome": "deny"} trailing',
    ]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            body = answers.pop(0)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        client = DecisionClient(f"http://127.0.0.1:{httpd.server_address[1]}")
        with pytest.raises(guardhost.GuardhostError, match="POST /v1/decide: the answer has the key `outcome` twice"):
            client.decide("bash")
        with pytest.raises(guardhost.GuardhostError, match=re.escape("the key `decisions[1].reasons[0].code` twice")):
            client.decide_batch([{"name": "a"}, {"name": "b"}])
        with pytest.raises(guardhost.GuardhostError, match="the answer is not JSON"):
            client.decide("ls")
    finally:
        httpd.shutdown()
