"""guardhost mcp in front of published MCP servers, driven by the official
Python SDK: @modelcontextprotocol/server-filesystem and server-everything
(npm; scripts/test-mcp installs them and sets GUARDHOST_MCP_NODE_MODULES)
and mcp-server-time (PyPI, in the tests' virtualenv). An allowed call's
result is the direct one; a denied write leaves nothing behind."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp import types
from mcp.shared.exceptions import MCPError

from conftest import GUARDHOST, client, dump, proxy_command, sampled, text_of

pytestmark = pytest.mark.anyio

NODE_MODULES = os.environ.get("GUARDHOST_MCP_NODE_MODULES")


def npm_server(package, *args):
    if not NODE_MODULES or shutil.which("node") is None:
        message = f"{package} needs Node.js and npm's packages (scripts/test-mcp installs them; GUARDHOST_MCP_NODE_MODULES is unset)"
        if os.environ.get("GUARDHOST_REQUIRE_MCP_SERVERS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    entry = Path(NODE_MODULES) / "@modelcontextprotocol" / package / "dist" / "index.js"
    assert entry.is_file(), f"{entry} is missing: reinstall with scripts/test-mcp"
    return ["node", str(entry), *args]


FILES_CONFIG = """
    guardrails:
      enabled: true
      provider:
        use: builtin:AllowlistProvider
        config: {denied_tools: [write_file, edit_file, move_file, create_directory]}
    mcp: {name: files}
"""


async def test_filesystem_reads_pass_byte_for_byte_and_writes_are_refused(write_config, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("first line\nsecond line, ünïcode \u2028 and \"quotes\"\n")
    server = npm_server("server-filesystem", str(root))
    config = write_config(FILES_CONFIG)
    target = root / "planted.txt"
    async with client(server) as direct, client(proxy_command(config, server)) as proxied:
        # Before any list the call is decided and denied for the model to read.
        denied = await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
        assert denied.is_error
        assert text_of(denied).startswith("Guardrail denied: tool 'write_file' was blocked")
        for name, args in [
            ("read_text_file", {"path": str(root / "notes.txt")}),
            ("list_directory", {"path": str(root)}),
            ("get_file_info", {"path": str(root / "notes.txt")}),
        ]:
            assert dump(await proxied.call_tool(name, args)) == dump(await direct.call_tool(name, args))
        listed = {t.name for t in (await proxied.list_tools()).tools}
        every = {t.name for t in (await direct.list_tools()).tools}
        assert every - listed == {"write_file", "edit_file", "move_file", "create_directory"}
        # Once listed without it, the tool is unknown to this client.
        with pytest.raises(MCPError) as raised:
            await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
        assert raised.value.error.code == -32602
    assert not target.exists()


async def test_everything_servers_results_progress_and_sampling_are_relayed(write_config):
    server = npm_server("server-everything")
    config = write_config(
        """
        guardrails:
          enabled: true
          provider:
            use: builtin:AllowlistProvider
            config: {denied_tools: [get-env]}
        """
    )
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with client(server, sampling_callback=sampled) as direct, client(
        proxy_command(config, server), sampling_callback=sampled
    ) as proxied:
        for name, args in [
            ("echo", {"message": "héllo"}),
            ("get-sum", {"a": 2, "b": 3}),
            ("get-tiny-image", {}),
            ("get-structured-content", {"location": "New York"}),
            ("get-annotated-message", {"messageType": "error", "includeImage": True}),
        ]:
            assert dump(await proxied.call_tool(name, args)) == dump(await direct.call_tool(name, args)), name
        result = await proxied.call_tool(
            "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress
        )
        assert not result.is_error
        assert progress == [1, 2, 3]
        answer = await proxied.call_tool("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5})
        assert "sampled" in text_of(answer)
        resources = await proxied.list_resources()
        assert dump(resources) == dump(await direct.list_resources())
        assert "get-env" not in {t.name for t in (await proxied.list_tools()).tools}
        # Listed without it: unknown to this client.
        with pytest.raises(MCPError) as raised:
            await proxied.call_tool("get-env", {})
        assert raised.value.error.code == -32602


async def test_time_server_answers_through_the_proxy_as_directly(write_config):
    server = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
    config = write_config(
        """
        guardrails:
          enabled: true
          provider: {use: builtin:AllowlistProvider, config: {denied_tools: [get_current_time]}}
        """
    )
    async with client(server) as direct, client(proxy_command(config, server)) as proxied:
        # The first call, before the client has listed the tools: denied for
        # the model to read.
        denied = await proxied.call_tool("get_current_time", {"timezone": "UTC"})
        assert denied.is_error and "Guardrail denied: tool 'get_current_time'" in text_of(denied)
        args = {"source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo"}
        assert dump(await proxied.call_tool("convert_time", args)) == dump(await direct.call_tool("convert_time", args))


async def test_the_example_config_reads_capped_writes_approved_moves_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 301)))
    server = npm_server("server-filesystem", str(root))
    # The example as shipped, copied so that its pins file lands in tmp_path.
    example = Path(__file__).resolve().parents[2] / "examples" / "mcp" / "config.yaml"
    config = tmp_path / "config.yaml"
    config.write_text(example.read_text())
    asked = []

    async def approve(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept")

    async with client(proxy_command(config, server), elicitation_callback=approve) as proxied:
        listed = {t.name for t in (await proxied.list_tools()).tools}
        assert {"read_text_file", "write_file"} <= listed
        assert not {"move_file", "create_directory"} & listed
        text = text_of(await proxied.call_tool("read_text_file", {"path": str(root / "long.txt")}))
        assert text.splitlines()[-1] == "line 200"
        written = await proxied.call_tool("write_file", {"path": str(root / "new.txt"), "content": "approved"})
        assert not written.is_error, text_of(written)
    assert (root / "new.txt").read_text() == "approved"
    assert len(asked) == 1 and "write_file" in asked[0]
    assert (tmp_path / "mcp-pins.json").is_file()


EXAMPLE_CEDAR = Path(__file__).resolve().parents[2] / "examples" / "mcp" / "cedar"


def test_the_cedar_example_passes_its_policy_tests():
    tests = subprocess.run([GUARDHOST, "test", str(EXAMPLE_CEDAR / "tests.yaml")], capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert tests.stdout.endswith("7 tests: 7 passed, 0 failed\n"), tests.stdout


async def test_the_cedar_example_in_front_of_the_filesystem_server(tmp_path):
    # The example, its /srv/projects made a folder of the test's own.
    projects = tmp_path / "projects"
    (projects / "notes").mkdir(parents=True)
    (projects / "readme.md").write_text("read me\n")
    (projects / ".env").write_text("TOKEN=not-for-models\n")
    example = tmp_path / "cedar"
    shutil.copytree(EXAMPLE_CEDAR, example)
    policies = example / "policies" / "files.cedar"
    policies.write_text(policies.read_text().replace("/srv/projects", str(projects)))
    server = npm_server("server-filesystem", str(projects))
    config = example / "config.yaml"
    async with client(server) as direct, client(proxy_command(config, server)) as proxied:
        read = {"path": str(projects / "readme.md")}
        assert dump(await proxied.call_tool("read_text_file", read)) == dump(await direct.call_tool("read_text_file", read))
        secret = await proxied.call_tool("read_text_file", {"path": str(projects / ".env")})
        assert secret.is_error and "(cedar.forbid)" in text_of(secret), text_of(secret)
        note = await proxied.call_tool("write_file", {"path": str(projects / "notes" / "today.md"), "content": "hi"})
        assert not note.is_error, text_of(note)
        out = await proxied.call_tool("write_file", {"path": str(projects / "notes" / ".." / "build.sh"), "content": "x"})
        assert out.is_error and "Guardrail denied: tool 'write_file'" in text_of(out)
    assert (projects / "notes" / "today.md").read_text() == "hi"
    assert not (projects / "build.sh").exists()
