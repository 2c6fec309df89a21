"""Shared set-up of guardhost mcp's tests: the guardhost command, the test
server, configs written to a temporary folder, and clients of the official
MCP SDK connected directly to a server or through the proxy.

scripts/test-mcp sets GUARDHOST_CLI (the command under test) and, when Node
and the npm registry were there, GUARDHOST_MCP_NODE_MODULES (where the npm
servers are installed).
"""

import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from mcp import Client, StdioServerParameters, types

HERE = Path(__file__).resolve().parent
SERVER = HERE / "server_under_test.py"
GUARDHOST = os.environ.get("GUARDHOST_CLI")

if not GUARDHOST:
    pytest.exit("GUARDHOST_CLI is not set: run these tests with scripts/test-mcp", returncode=2)


def server_command(*extra):
    """The test server's command line."""
    return [sys.executable, str(SERVER), *extra]


def proxy_command(config, server=None, name=None, upstream=None):
    """guardhost mcp in front of `server` (the test server by default), or
    of the HTTP server at `upstream`."""
    args = [GUARDHOST, "mcp", "--config", str(config)]
    if name:
        args += ["--name", name]
    if upstream:
        return args + ["--upstream", upstream]
    return args + ["--", *(server or server_command())]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(command_for_port, path="/mcp", scheme="http"):
    """Starts an MCP server over the streamable HTTP transport (its command
    given the port) and gives its URL once it accepts connections."""
    port = free_port()
    process = subprocess.Popen(command_for_port(port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the HTTP server did not start: {process.stderr.read().decode()[-2000:]}")
                time.sleep(0.1)
        yield f"{scheme}://127.0.0.1:{port}{path}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@contextlib.contextmanager
def listening(config, *args, env=None):
    """guardhost mcp --listen on a free loopback port (`args` name the
    server: `"--", *command` or `"--upstream", url`); gives the URL it
    prints and its stderr file, and stops it with SIGTERM at the end,
    expecting it to exit 0 within 10 seconds."""
    log = tempfile.NamedTemporaryFile(prefix="guardhost-mcp-", suffix=".log", delete=False)
    environment = dict(os.environ, GUARDHOST_LOG="info", **(env or {}))
    command = [GUARDHOST, "mcp", "--config", str(config), "--listen", "127.0.0.1:0", *args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=environment)
    try:
        deadline = time.monotonic() + 30
        while True:
            found = re.search(r"serving MCP at (https?://\S+)", Path(log.name).read_text(errors="replace"))
            if found:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"guardhost mcp --listen did not start: {Path(log.name).read_text()[-2000:]}")
            time.sleep(0.05)
        yield found.group(1), Path(log.name)
        process.terminate()
        assert process.wait(timeout=10) == 0, Path(log.name).read_text()[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.unlink(log.name)


def stdio(command, env=None):
    environment = dict(os.environ)
    environment.update(env or {})
    # The proxy's own logs at info, so a failing test shows its decisions.
    environment.setdefault("GUARDHOST_LOG", "info")
    return StdioServerParameters(command=command[0], args=command[1:], env=environment)


@contextlib.asynccontextmanager
async def client(command, env=None, mode="legacy", **callbacks):
    """A client of the official SDK over stdio (or, given a URL, over the
    streamable HTTP transport); the handshake era by default (initialize),
    `mode="auto"` for the 2026-07-28 form."""
    server = command if isinstance(command, str) else stdio(command, env)
    async with Client(server, mode=mode, **callbacks) as c:
        yield c


@pytest.fixture
def anyio_backend():
    """The async tests run on asyncio."""
    return "asyncio"


def sdk_http_server(port):
    """The test server over the streamable HTTP transport, for http_server."""
    return [sys.executable, str(SERVER), "--http", str(port)]


async def elicited_ada(context, params):
    """A client's elicitation callback that accepts, answering "Ada"."""
    return types.ElicitResult(action="accept", content={"answer": "Ada"})


async def sampled(context, params):
    """A client's sampling callback that answers "sampled"."""
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="sampled"), model="test"
    )


@pytest.fixture
def write_config(tmp_path):
    """Writes a config file (YAML text, dedented) and gives its path."""

    def write(text, name="config.yaml"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


def denying(*tools):
    """A config whose built-in allowlist denies `tools`."""
    names = ", ".join(tools)
    return f"""
    guardrails:
      enabled: true
      provider:
        use: builtin:AllowlistProvider
        config: {{denied_tools: [{names}]}}
"""


def text_of(result):
    """A tool result's text."""
    return "".join(part.text for part in result.content if part.type == "text")


def dump(result):
    """A result as JSON, for comparing the direct answer with the proxied one."""
    return result.model_dump(mode="json", exclude_none=True)
