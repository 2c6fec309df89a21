"""guardhost mcp --listen: the streamable HTTP transport towards clients.
The official SDK's client over HTTP to the proxy, which starts a server per
session (the SDK's test server over stdio) or opens a session per client
with a server over HTTP; and raw HTTP for what the transport itself must
refuse (another Host or Origin, a missing token, a wrong header) and for a
stream resumed after its connection broke."""

import asyncio
import http.client
import json
import re
import subprocess
import time
from urllib.parse import urlsplit

import pytest

from mcp.shared.exceptions import MCPError

from conftest import (
    GUARDHOST,
    client,
    denying,
    dump,
    elicited_ada,
    http_server,
    listening,
    sampled,
    sdk_http_server,
    server_command,
    text_of,
)

pytestmark = pytest.mark.anyio

DENY_WRITES = denying("write_file")
LATEST = "2025-11-25"


def initialize_body(id=1, capabilities=None):
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw-http", "version": "1"},
        },
    }


class Raw:
    """Plain HTTP/1.1 to the proxy, headers under the test's control."""

    def __init__(self, url):
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path

    def request(self, method, body=None, headers=None, path=None, accept="application/json, text/event-stream"):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
        sent = {"Accept": accept, "Content-Type": "application/json"}
        sent.update(headers or {})
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        connection.request(method, path or self.path, body=data, headers=sent)
        response = connection.getresponse()
        response.connection = connection
        return response

    def session(self, capabilities=None, token=None):
        """Initializes a session; gives its id."""
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        response = self.request("POST", initialize_body(capabilities=capabilities), auth)
        assert response.status == 200, response.read()
        session = response.getheader("Mcp-Session-Id")
        answer = next(messages(response))
        assert answer["result"]["protocolVersion"] == LATEST
        response.connection.close()
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": LATEST, **auth}
        done = self.request("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
        assert done.status == 202
        return headers


def events(response):
    """The server-sent events of a response: (id, data) each, data "" for
    an event without data."""
    event_id, data = None, None
    while True:
        line = response.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if line == "":
            if data is not None:
                yield event_id, data
            data = None
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data = (data + "\n" if data else "") + line[5:].lstrip(" ")


def messages(response):
    for _, data in events(response):
        if data:
            yield json.loads(data)


def error_of(response):
    body = json.loads(response.read())
    return body["error"]


async def test_each_client_over_http_gets_its_own_server_and_the_same_guard(write_config, tmp_path):
    config = write_config(DENY_WRITES)
    target = tmp_path / "written.txt"
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    callbacks = {"sampling_callback": sampled, "elicitation_callback": elicited_ada}
    with listening(config, "--", *server_command()) as (url, _):
        async with client(server_command(), **callbacks) as direct, client(url, **callbacks) as first, client(
            url, **callbacks
        ) as second:
            assert first.protocol_version == direct.protocol_version == LATEST
            for proxied in (first, second):
                for name, args in [("echo", {"text": "héllo \u2028"}), ("add", {"a": 2, "b": 40})]:
                    assert dump(await proxied.call_tool(name, args)) == dump(await direct.call_tool(name, args))
                # Denied for every call: not listed, and calling it is invalid.
                with pytest.raises(MCPError) as raised:
                    await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
                assert raised.value.error.code == -32602
                listed = [t.name for t in (await proxied.list_tools()).tools]
                assert "write_file" not in listed and "echo" in listed
            # Streams of one request: progress, the server's sampling and
            # elicitation requests, answered by the client.
            assert text_of(await first.call_tool("count", {"n": 3}, progress_callback=on_progress)) == "counted to 3"
            assert progress == [1, 2, 3]
            assert text_of(await first.call_tool("sample", {"prompt": "hi"})) == "model said: sampled"
            assert text_of(await second.call_tool("confirm", {"question": "name?"})) == "user said: Ada"
            # Calls of two sessions at once.
            results = await asyncio.gather(
                first.call_tool("echo", {"text": "one"}), second.call_tool("echo", {"text": "two"})
            )
            assert [text_of(r) for r in results] == ["one", "two"]
            # One server per session: a server's own state (the `add` tool
            # changed by `pull`) is not the other session's.
            await first.call_tool("pull", {})
            await asyncio.sleep(0.2)
            first_tools = {t.name for t in (await first.list_tools()).tools}
            second_tools = {t.name: t.description for t in (await second.list_tools()).tools}
            assert "add" not in first_tools, "a changed tool is withheld (pinning)"
            assert second_tools["add"] == "Adds two numbers."
    assert not target.exists()


async def test_a_server_over_http_gets_a_session_per_client(write_config):
    config = write_config(DENY_WRITES)

    with http_server(sdk_http_server) as upstream, listening(config, "--upstream", upstream) as (url, _):
        async with client(upstream) as direct, client(url, sampling_callback=sampled) as proxied:
            assert dump(await proxied.call_tool("echo", {"text": "x"})) == dump(await direct.call_tool("echo", {"text": "x"}))
            assert text_of(await proxied.call_tool("sample", {"prompt": "hi"})) == "model said: sampled"
            with pytest.raises(MCPError):
                await proxied.call_tool("write_file", {"path": "/nonexistent/x", "content": "x"})


def test_the_transport_refuses_what_it_must_and_says_why(write_config):
    config = write_config(DENY_WRITES)
    with listening(config, "--", *server_command()) as (url, log):
        raw = Raw(url)
        port = raw.port
        # DNS rebinding: another Host, another Origin.
        for headers in ({"Host": "evil.example.com"}, {"Origin": "http://evil.example.com"}):
            refused = raw.request("POST", initialize_body(), headers)
            assert refused.status == 403, headers
            assert "DNS rebinding" in error_of(refused)["message"] or "Origin" in refused.reason + str(headers)
        for origin in (f"http://localhost:{port}", f"http://127.0.0.1:{port}"):
            accepted = raw.request("POST", initialize_body(), {"Origin": origin})
            assert accepted.status == 200 and accepted.getheader("Mcp-Session-Id")
            # A page on an accepted origin may read the answer and its session id.
            assert accepted.getheader("Access-Control-Allow-Origin") == origin
            assert "mcp-session-id" in accepted.getheader("Access-Control-Expose-Headers")
            accepted.connection.close()
            preflight = raw.request("OPTIONS", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
            assert preflight.status == 204 and preflight.getheader("Access-Control-Allow-Origin") == origin
            assert "mcp-session-id" in preflight.getheader("Access-Control-Allow-Headers")
        foreign = raw.request("OPTIONS", headers={"Origin": "http://evil.example.com"})
        assert foreign.status == 403 and foreign.getheader("Access-Control-Allow-Origin") is None
        # Elsewhere than /mcp.
        assert raw.request("POST", initialize_body(), path="/other").status == 404
        # Accept and Content-Type.
        assert raw.request("POST", initialize_body(), accept="application/json").status == 406
        assert raw.request("POST", initialize_body(), {"Content-Type": "text/plain"}).status == 415
        # Not JSON: a parse error, as JSON-RPC says.
        bad = raw.request("POST", b"{not json")
        assert bad.status == 400 and error_of(bad)["code"] == -32700
        # No session, an unknown session, an unknown protocol version.
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        no_session = raw.request("POST", ping)
        assert no_session.status == 400 and "Mcp-Session-Id" in error_of(no_session)["message"]
        assert raw.request("POST", ping, {"Mcp-Session-Id": "0" * 32}).status == 404
        headers = raw.session()
        wrong = raw.request("POST", ping, {**headers, "MCP-Protocol-Version": "1999-01-01"})
        assert wrong.status == 400 and "1999-01-01" in error_of(wrong)["message"]
        # A request answered on its stream; one GET stream at a time.
        answered = raw.request("POST", ping, headers)
        assert answered.getheader("Content-Type") == "text/event-stream"
        assert next(messages(answered)) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        listening_stream = raw.request("GET", headers=headers, accept="text/event-stream")
        assert listening_stream.status == 200
        assert raw.request("GET", headers=headers, accept="text/event-stream").status == 409
        listening_stream.connection.close()
        # DELETE ends the session.
        assert raw.request("DELETE", headers=headers).status == 200
        assert raw.request("POST", ping, headers).status == 404
        assert "evil.example.com" not in log.read_text(), "a refused Host is not logged"


def test_a_bearer_token_is_required_and_never_logged(write_config):
    config = write_config(DENY_WRITES)
    token = "tok-3f1d9a7e-secret"
    env = {"GUARDHOST_TEST_TOKEN": token}
    with listening(config, "--token-env", "GUARDHOST_TEST_TOKEN", "--", *server_command(), env=env) as (url, log):
        raw = Raw(url)
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"}):
            refused = raw.request("POST", initialize_body(), headers)
            assert refused.status == 401 and refused.getheader("WWW-Authenticate") == "Bearer"
        assert raw.request("GET", path="/metrics", accept="text/plain").status == 401
        # A browser's preflight carries no credentials.
        origin = f"http://127.0.0.1:{raw.port}"
        assert raw.request("OPTIONS", headers={"Origin": origin, "Access-Control-Request-Method": "POST"}).status == 204
        headers = raw.session(token=token)
        answered = raw.request("POST", {"jsonrpc": "2.0", "id": 5, "method": "ping"}, headers)
        assert next(messages(answered))["id"] == 5
        assert token not in log.read_text()


def test_listening_beyond_loopback_needs_a_token(write_config):
    config = write_config(DENY_WRITES)
    run = subprocess.run(
        [GUARDHOST, "mcp", "--config", str(config), "--listen", "0.0.0.0:0", "--", *server_command()],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    assert "--token-env" in run.stderr and "0.0.0.0" in run.stderr
    unset = subprocess.run(
        [GUARDHOST, "mcp", "--config", str(config), "--listen", "127.0.0.1:0", "--token-env", "GUARDHOST_NO_SUCH_VAR", "--", *server_command()],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert unset.returncode == 2 and "GUARDHOST_NO_SUCH_VAR" in unset.stderr


def test_a_stream_whose_connection_broke_is_resumed_with_its_answer(write_config):
    config = write_config(DENY_WRITES)
    with listening(config, "--", *server_command()) as (url, _):
        raw = Raw(url)
        headers = raw.session(capabilities={"elicitation": {}})
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "confirm", "arguments": {"question": "name?"}}}
        response = raw.request("POST", call, headers)
        stream = events(response)
        priming_id, priming = next(stream)
        assert priming == "" and priming_id, "a 2025-11-25 stream opens with an event id to resume from"
        asked_id, asked = next(stream)
        asked = json.loads(asked)
        assert asked["method"] == "elicitation/create"
        # The connection breaks before the answer; the client answers the
        # server's question, then resumes the stream.
        response.connection.close()
        reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"answer": "Ada"}}}
        assert raw.request("POST", reply, headers).status == 202
        resumed = raw.request("GET", headers={**headers, "Last-Event-ID": asked_id}, accept="text/event-stream")
        assert resumed.status == 200
        answer = next(messages(resumed))
        assert answer["id"] == 7
        assert answer["result"]["content"][0]["text"] == "user said: Ada"


def test_idle_sessions_end_and_the_longest_idle_makes_room(write_config):
    config = write_config(DENY_WRITES)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with listening(config, "--max-sessions", "1", "--session-idle", "3", "--", *server_command()) as (url, _):
        raw = Raw(url)
        first = raw.session()
        second = raw.session()
        assert raw.request("POST", ping, first).status == 404, "the idle session made room"
        assert raw.request("POST", ping, second).status == 200
        time.sleep(4.5)
        assert raw.request("POST", ping, second).status == 404, "an idle session ends"


def test_metrics_count_decisions_sessions_and_responses(write_config, tmp_path):
    config = write_config(
        """
        guardrails:
          enabled: true
          providers:
            - use: builtin:AllowlistProvider
              name: refused-writes
              config: {denied_tools: [write_file]}
            - use: builtin:AllowlistProvider
              name: refused-moves
              config: {denied_tools: [move_file]}
        """
    )
    with listening(config, "--", *server_command()) as (url, log):
        raw = Raw(url)
        assert raw.request("POST", initialize_body(), {"Host": "evil.example.com"}).status == 403
        headers = raw.session()
        for id, (name, args) in enumerate([("echo", {"text": "x"}), ("write_file", {"path": str(tmp_path / "w"), "content": "x"})]):
            call = {"jsonrpc": "2.0", "id": 10 + id, "method": "tools/call", "params": {"name": name, "arguments": args}}
            assert next(messages(raw.request("POST", call, headers)))["id"] == 10 + id
        metrics = raw.request("GET", path="/metrics", accept="text/plain")
        assert metrics.status == 200 and metrics.getheader("Content-Type").startswith("text/plain")
        lines = metrics.read().decode().splitlines()
        # The decision log names the entry that decided.
        denied = [l for l in log.read_text().splitlines() if " denied server=server" in l and "write_file" in l]
        assert denied and "entry=refused-writes" in denied[0], log.read_text()[-2000:]
    for line in [
        'guardhost_mcp_decisions_total{server="server",method="tools/call",outcome="allow"} 1',
        'guardhost_mcp_decisions_total{server="server",method="tools/call",outcome="deny"} 1',
        'guardhost_mcp_decision_seconds_count{server="server"} 2',
        "guardhost_mcp_sessions_open 1",
        "guardhost_mcp_sessions_started_total 1",
        'guardhost_mcp_http_responses_total{status="403"} 1',
    ]:
        assert line in lines, line
    assert not (tmp_path / "w").exists()


def test_a_server_that_cannot_start_answers_the_initialize_with_an_error(write_config, tmp_path):
    config = write_config(DENY_WRITES)
    with listening(config, "--", str(tmp_path / "no-such-server")) as (url, log):
        response = Raw(url).request("POST", initialize_body())
        assert response.status == 200
        answer = next(messages(response))
        assert answer["id"] == 1 and answer["error"]["code"] == -32000
        assert "cannot start the MCP server" in log.read_text()


def test_a_client_that_cannot_be_asked_waits_for_an_approver_over_v1_pending(write_config):
    config = write_config(
        """
        guardrails:
          enabled: true
          provider:
            use: builtin:ApprovalGuardrailProvider
            config: {ask: [echo], timeout_s: 120}
        """
    )
    with listening(config, "--", *server_command()) as (url, _):
        raw = Raw(url)
        headers = raw.session()  # no elicitation capability

        def call(id):
            body = {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "approve me"}}}
            return next(messages(raw.request("POST", body, headers)))["result"]

        def held_id(result):
            assert result["isError"], result
            return re.search(r"pending id ([0-9a-f]+)", result["content"][0]["text"]).group(1)

        pending_id = held_id(call(1))
        assert held_id(call(2)) == pending_id, "the same call waits under the same id"
        listed = json.loads(raw.request("GET", path="/v1/pending").read())["pending"]
        assert [(p["id"], p["tool"], p["arguments"], p["answer"]) for p in listed] == [
            (pending_id, "echo", {"text": "approve me"}, None)
        ]
        assert raw.request("POST", {"approved": True, "approved_by": "ops"}, path=f"/v1/pending/{pending_id}").status == 200
        assert raw.request("POST", {"approved": True}, path=f"/v1/pending/{pending_id}").status == 409
        ran = call(3)
        assert not ran.get("isError") and ran["content"][0]["text"] == "approve me"
        # An answer is used once: the same call waits again, and a refusal refuses it.
        again = held_id(call(4))
        assert again != pending_id
        assert raw.request("POST", {"approve": True}, path=f"/v1/pending/{again}").status == 400
        assert raw.request("POST", {"approved": False}, path=f"/v1/pending/{again}").status == 200
        refused = call(5)
        assert refused["isError"] and "guardhost.approval_refused" in refused["content"][0]["text"]
        assert raw.request("POST", {"approved": True}, path="/v1/pending/0000").status == 404


async def test_listen_serves_https_with_the_certificate_it_is_given(write_config, tmp_path):
    import ssl

    import httpx2

    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from test_http_upstream import certificates

    ca, cert, key = certificates(tmp_path, ["127.0.0.1", "localhost"])
    config = write_config(DENY_WRITES)
    target = tmp_path / "written.txt"
    tls = ["--tls-cert", str(cert), "--tls-key", str(key)]
    with listening(config, *tls, "--", *server_command()) as (url, log):
        assert url.startswith("https://127.0.0.1:"), url
        trusting = httpx2.AsyncClient(verify=ssl.create_default_context(cafile=str(ca)))
        async with Client(streamable_http_client(url, http_client=trusting)) as proxied:
            assert text_of(await proxied.call_tool("echo", {"text": "over tls"})) == "over tls"
            assert "write_file" not in [t.name for t in (await proxied.list_tools()).tools]
            with pytest.raises(MCPError, match="Unknown tool: write_file"):
                await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
        # Plain HTTP to the TLS port gets no MCP answer; a client that does
        # not trust the certificate cannot connect.
        address = urlsplit(url)
        plain = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            plain.request("POST", address.path, body=json.dumps(initialize_body()))
            plain.getresponse()
        with pytest.raises(BaseException) as raised:
            async with Client(url):
                pass
        assert "CERTIFICATE_VERIFY_FAILED" in repr(raised.value) or "certificate" in repr(raised.value).lower()
    assert not target.exists()


def test_listen_refuses_a_key_that_is_not_the_certificates(write_config, tmp_path):
    from test_http_upstream import certificates

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    _, cert, _ = certificates(first, ["127.0.0.1"])
    _, _, other_key = certificates(second, ["127.0.0.1"])
    config = write_config(DENY_WRITES)
    command = [GUARDHOST, "mcp", "--config", str(config), "--listen", "127.0.0.1:0"]
    command += ["--tls-cert", str(cert), "--tls-key", str(other_key), "--", *server_command()]
    run = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert run.returncode == 2, run.stderr
    assert "cannot serve TLS with the key" in run.stderr and "server-key.pem" in run.stderr, run.stderr
    assert "PRIVATE KEY" not in run.stderr
