"""guardhost mcp in front of servers that speak the streamable HTTP
transport (--upstream URL): the SDK's client over stdio to the proxy, the
proxy over HTTP to a server of the same SDK and to npm's server-everything,
compared with the SDK's client over HTTP to the server directly."""

import pytest

from mcp.shared.exceptions import MCPError

from conftest import client, denying, dump, elicited_ada, http_server, proxy_command, sampled, sdk_http_server, text_of
from test_real_servers import npm_server

pytestmark = pytest.mark.anyio

DENY_WRITES = denying("write_file", "get-env")


async def test_calls_streams_and_denials_over_http(write_config, tmp_path):
    config = write_config(DENY_WRITES)
    target = tmp_path / "written.txt"
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    callbacks = {"sampling_callback": sampled, "elicitation_callback": elicited_ada}
    with http_server(sdk_http_server) as url:
        async with client(url, **callbacks) as direct, client(proxy_command(config, upstream=url), **callbacks) as proxied:
            assert proxied.protocol_version == direct.protocol_version
            denied = await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
            assert denied.is_error and text_of(denied).startswith("Guardrail denied: tool 'write_file'")
            for name, args in [("echo", {"text": "héllo"}), ("add", {"a": 2, "b": 40})]:
                assert dump(await proxied.call_tool(name, args)) == dump(await direct.call_tool(name, args))
            assert text_of(await proxied.call_tool("count", {"n": 3}, progress_callback=on_progress)) == "counted to 3"
            assert progress == [1, 2, 3]
            assert text_of(await proxied.call_tool("sample", {"prompt": "hi"})) == "model said: sampled"
            assert text_of(await proxied.call_tool("confirm", {"question": "name?"})) == "user said: Ada"
            assert dump(await proxied.read_resource("note://greeting")) == dump(await direct.read_resource("note://greeting"))
            listed = [t.name for t in (await proxied.list_tools()).tools]
            assert "write_file" not in listed and "echo" in listed
    assert not target.exists()


async def test_an_unreachable_upstream_answers_each_request_with_an_error(write_config):
    config = write_config(DENY_WRITES)
    with http_server(sdk_http_server) as url:
        pass  # started and stopped: nothing listens there now
    with pytest.raises(BaseException) as raised:
        async with client(proxy_command(config, upstream=url)):
            pass
    from test_proxy import the_one

    error = the_one(raised.value, MCPError)
    assert error.error.code == -32000 and "could not answer: cannot connect" in error.error.message


async def test_everything_server_over_http(write_config):
    command = npm_server("server-everything", "streamableHttp")
    config = write_config(DENY_WRITES)

    def everything(port):
        return ["env", f"PORT={port}", *command]

    with http_server(everything) as url:
        async with client(url) as direct, client(proxy_command(config, upstream=url)) as proxied:
            # Before any list: decided and denied for the model to read.
            denied = await proxied.call_tool("get-env", {})
            assert denied.is_error and "Guardrail denied: tool 'get-env'" in text_of(denied)
            for name, args in [("echo", {"message": "héllo"}), ("get-sum", {"a": 2, "b": 3}), ("get-tiny-image", {})]:
                assert dump(await proxied.call_tool(name, args)) == dump(await direct.call_tool(name, args)), name
