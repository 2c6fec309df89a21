"""Several servers behind one guardhost mcp (`mcp.servers`): the SDK's
test server and PyPI's mcp-server-time over stdio, and the test server
over HTTP, seen by one client as one server whose tools and prompts are
named SERVER__NAME; each call decided under its own server's name."""

import json
import subprocess
import sys
import warnings

import pytest

from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from conftest import GUARDHOST, client, dump, http_server, listening, sampled, sdk_http_server, server_command, text_of

pytestmark = pytest.mark.anyio

TIME = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def config_text(servers, denied="[write_file]"):
    return f"""
    guardrails:
      enabled: true
      provider:
        use: builtin:AllowlistProvider
        config: {{denied_tools: {denied}}}
    mcp:
      servers: {json.dumps(servers)}
    """


def mux_command(config):
    return [GUARDHOST, "mcp", "--config", str(config)]


async def test_one_client_sees_every_server_under_its_name(write_config, tmp_path):
    config = write_config(config_text({"notes": {"command": server_command()}, "time": {"command": TIME}}))
    target = tmp_path / "written.txt"
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with client(server_command()) as direct, client(mux_command(config), sampling_callback=sampled) as proxied:
        assert proxied.server_info.name == "guardhost-mcp"
        tools = [t.name for t in (await proxied.list_tools()).tools]
        direct_tools = [t.name for t in (await direct.list_tools()).tools]
        assert [t for t in tools if t.startswith("notes__")] == [
            f"notes__{t}" for t in direct_tools if t != "write_file"
        ]
        assert "time__get_current_time" in tools and "time__convert_time" in tools
        # A call reaches its server under the server's own name for it.
        assert dump(await proxied.call_tool("notes__echo", {"text": "héllo"})) == dump(
            await direct.call_tool("echo", {"text": "héllo"})
        )
        now = await proxied.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert not now.is_error and json.loads(text_of(now))["timezone"] == "UTC"
        # Progress and the server's own requests, through the multiplexer.
        assert text_of(await proxied.call_tool("notes__count", {"n": 2}, progress_callback=on_progress)) == "counted to 2"
        assert progress == [1, 2]
        assert text_of(await proxied.call_tool("notes__sample", {"prompt": "hi"})) == "model said: sampled"
        # Denied for every call on its server: not listed, not callable.
        with pytest.raises(MCPError) as raised:
            await proxied.call_tool("notes__write_file", {"path": str(target), "content": "x"})
        assert raised.value.error.code == -32602
        # Prompts by name, resources by the URI their server listed.
        prompts = [p.name for p in (await proxied.list_prompts()).prompts]
        assert prompts == ["notes__greet"]
        greeting = await proxied.get_prompt("notes__greet", {"name": "Ada"})
        assert dump(greeting) == dump(await direct.get_prompt("greet", {"name": "Ada"}))
        uris = [str(r.uri) for r in (await proxied.list_resources()).resources]
        assert uris == ["note://greeting", "note://other"]
        assert dump(await proxied.read_resource("note://other")) == dump(await direct.read_resource("note://other"))
        with warnings.catch_warnings():
            # Removed from 2026-07-28 on; this client speaks 2025-11-25.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            assert (await proxied.send_ping()) is not None
    assert not target.exists()


async def test_a_server_that_ends_leaves_the_others_serving(write_config):
    config = write_config(config_text({"notes": {"command": server_command()}, "time": {"command": TIME}}))
    async with client(mux_command(config)) as proxied:
        await proxied.list_tools()
        with pytest.raises(MCPError) as raised:
            await proxied.call_tool("notes__crash", {})
        assert raised.value.error.code == -32000
        now = await proxied.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert not now.is_error
        with pytest.raises(MCPError) as gone:
            await proxied.call_tool("notes__echo", {"text": "x"})
        assert gone.value.error.code in (-32000, -32602)


async def test_servers_over_http_and_stdio_together_and_over_listen(write_config):
    with http_server(sdk_http_server) as upstream:
        config = write_config(config_text({"far": {"url": upstream}, "near": {"command": server_command()}}))
        async with client(mux_command(config)) as proxied:
            for name in ("far__echo", "near__echo"):
                assert text_of(await proxied.call_tool(name, {"text": name})) == name
        with listening(config) as (url, _):
            async with client(url) as over_http:
                tools = {t.name for t in (await over_http.list_tools()).tools}
                assert {"far__echo", "near__echo"} <= tools and not any(t.endswith("write_file") for t in tools)
                assert text_of(await over_http.call_tool("near__add", {"a": 2, "b": 3})) == "5"


def test_a_server_name_that_would_make_names_ambiguous_is_refused_at_start(write_config):
    for servers, says in [
        ({"a__b": {"command": server_command()}}, "ambiguous"),
        ({"a": {"command": []}}, "exactly one of command"),
    ]:
        config = write_config(config_text(servers))
        run = subprocess.run(mux_command(config), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert run.returncode == 2, run.stderr
        assert says in run.stderr and "servers" in run.stderr


async def test_upstream_tokens_are_not_inherited_by_the_servers_guardhost_starts(write_config):
    token = "GUARDHOST_TEST_UPSTREAM_TOKEN"
    with http_server(sdk_http_server) as url:
        servers = {"local": {"command": server_command()}, "web": {"url": url, "token_env": token}}
        config = write_config(config_text(servers))
        async with client(mux_command(config), env={token: "s3cret"}) as proxied:
            assert text_of(await proxied.call_tool("local__env", {"name": token})) == "unset"
            assert text_of(await proxied.call_tool("local__env", {"name": "PATH"})) == "set"
            assert text_of(await proxied.call_tool("web__echo", {"text": "hi"})) == "hi"
