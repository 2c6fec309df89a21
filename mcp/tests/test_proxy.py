"""guardhost mcp between the official Python SDK's client and a server of
the same SDK (server_under_test.py): what is allowed is the direct answer,
what is denied never reaches the server, and everything else is relayed."""

import asyncio
import json
import subprocess
import sys

import pytest

from mcp import types
from mcp.shared.exceptions import MCPError

from conftest import GUARDHOST, client, denying, dump, elicited_ada, proxy_command, sampled, server_command, text_of

pytestmark = pytest.mark.anyio

DENY_WRITES = denying("write_file")


async def test_an_allowed_call_is_answered_as_the_server_answers_it(write_config):
    config = write_config(DENY_WRITES)
    async with client(server_command()) as direct, client(proxy_command(config)) as proxied:
        for name, args in [("echo", {"text": "héllo \u2028 \"quoted\""}), ("add", {"a": 2, "b": 40})]:
            assert dump(await proxied.call_tool(name, args)) == dump(await direct.call_tool(name, args))
        assert proxied.server_info == direct.server_info
        assert proxied.protocol_version == direct.protocol_version == "2025-11-25"


async def test_a_denied_call_never_reaches_the_server(write_config, tmp_path):
    config = write_config(DENY_WRITES)
    target = tmp_path / "written.txt"
    async with client(proxy_command(config)) as proxied:
        result = await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
    assert result.is_error
    assert text_of(result).startswith("Guardrail denied: tool 'write_file' was blocked (oap.tool_not_allowed).")
    assert not target.exists()


async def test_a_tool_denied_for_every_call_is_not_listed_and_calling_it_is_invalid(write_config):
    config = write_config(DENY_WRITES)
    async with client(server_command()) as direct, client(proxy_command(config)) as proxied:
        names = [t.name for t in (await direct.list_tools()).tools]
        listed = [t.name for t in (await proxied.list_tools()).tools]
        assert listed == [n for n in names if n != "write_file"]
        with pytest.raises(MCPError) as raised:
            await proxied.call_tool("write_file", {"path": "/tmp/x", "content": "x"})
        assert raised.value.error.code == -32602
        assert "Unknown tool: write_file" in raised.value.error.message


async def test_a_rewrite_changes_what_the_server_receives(write_config):
    config = write_config(
        """
        guardrails:
          enabled: true
          provider:
            use: builtin:ApprovalGuardrailProvider
            config: {set: {echo: {text: forced}}}
        """
    )
    async with client(proxy_command(config)) as proxied:
        assert text_of(await proxied.call_tool("echo", {"text": "mine"})) == "forced"


async def test_a_rewrite_of_a_resource_read_changes_the_uri_the_server_reads(write_config):
    config = write_config(
        """
        guardrails:
          enabled: true
          provider:
            use: builtin:ApprovalGuardrailProvider
            config: {set: {resources/read: {uri: "note://other"}}}
        """
    )
    async with client(proxy_command(config)) as proxied:
        read = await proxied.read_resource("note://greeting")
    assert [c.text for c in read.contents] == ["the other note"]


ASK_ADD = """
    guardrails:
      enabled: true
      provider:
        use: builtin:ApprovalGuardrailProvider
        config: {ask: [add], timeout_s: 30}
"""


def answering(action, asked=None):
    """An elicitation callback that answers `action`, keeping each
    question's parameters in `asked`."""

    async def answer(context, params):
        if asked is not None:
            asked.append(params)
        return types.ElicitResult(action=action)

    return answer


async def test_an_ask_becomes_an_elicitation_and_accept_runs_the_call(write_config):
    config = write_config(ASK_ADD)
    asked = []
    accept = answering("accept", asked)

    async with client(proxy_command(config), elicitation_callback=accept) as proxied:
        # A tool that waits for approval is listed: some calls of it run.
        assert "add" in [t.name for t in (await proxied.list_tools()).tools]
        result = await proxied.call_tool("add", {"a": 1, "b": 2})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "3"
    assert len(asked) == 1
    message = asked[0].message
    assert "Approve the call of tool 'add'" in message and '"a": 1' in message and "sha256:" in message


async def test_a_declined_ask_is_refused(write_config):
    config = write_config(ASK_ADD)

    async def decline(context, params):
        return types.ElicitResult(action="decline")

    async with client(proxy_command(config), elicitation_callback=decline) as proxied:
        result = await proxied.call_tool("add", {"a": 1, "b": 2})
        # Tools the ask does not name run unasked.
        assert text_of(await proxied.call_tool("echo", {"text": "free"})) == "free"
    assert result.is_error
    assert "was not approved (guardhost.approval_refused)" in text_of(result)
    assert "the user declined it" in text_of(result)


async def test_an_ask_in_the_2026_07_28_form_is_an_input_request_and_accept_runs_the_call(write_config):
    config = write_config(ASK_ADD)
    asked = []
    accept = answering("accept", asked)

    async with client(proxy_command(config), mode="auto", elicitation_callback=accept) as proxied:
        # The SDK puts the proxy's InputRequiredResult to the callback and
        # sends the call again with the answer and the state.
        result = await proxied.call_tool("add", {"a": 1, "b": 2})
        assert not result.is_error, text_of(result)
        assert text_of(result) == "3"
        assert text_of(await proxied.call_tool("echo", {"text": "free"})) == "free"
    assert len(asked) == 1
    assert "Approve the call of tool 'add'" in asked[0].message and '"b": 2' in asked[0].message

    async with client(proxy_command(config), mode="auto", elicitation_callback=answering("decline")) as proxied:
        result = await proxied.call_tool("add", {"a": 1, "b": 2})
    assert result.is_error and "the user declined it" in text_of(result), text_of(result)


async def test_a_2026_07_28_approval_binds_its_call_and_its_state(write_config):
    config = write_config(ASK_ADD)
    accepted = {"guardhost/approval": types.ElicitResult(action="accept")}
    async with client(proxy_command(config), mode="auto", elicitation_callback=elicited_ada) as proxied:
        session = proxied.session
        first = await session.call_tool("add", {"a": 1, "b": 2}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        state = first.request_state
        assert state.startswith("guardhost.1.") and list(first.input_requests) == ["guardhost/approval"]
        # Other arguments under the same approval: refused, not run.
        other = await session.call_tool("add", {"a": 5, "b": 5}, input_responses=accepted, request_state=state)
        assert other.is_error and "guardhost.approval_mismatch" in text_of(other), text_of(other)
        # A state changed on the way: refused.
        forged = state[:-4] + ("0000" if not state.endswith("0000") else "1111")
        refused = await session.call_tool("add", {"a": 1, "b": 2}, input_responses=accepted, request_state=forged)
        assert refused.is_error and "not one this guardhost process issued" in text_of(refused), text_of(refused)
        # Back with no answer to it: refused.
        silent = await session.call_tool("add", {"a": 1, "b": 2}, request_state=state)
        assert silent.is_error and "came back without an answer" in text_of(silent), text_of(silent)
        # The call it was issued for, accepted: it runs.
        ran = await session.call_tool("add", {"a": 1, "b": 2}, input_responses=accepted, request_state=state)
        assert not ran.is_error and text_of(ran) == "3", text_of(ran)


async def test_an_ask_to_a_client_that_cannot_be_asked_is_a_denial_that_says_so(write_config):
    config = write_config(ASK_ADD)
    async with client(proxy_command(config)) as proxied:
        result = await proxied.call_tool("add", {"a": 1, "b": 2})
    assert result.is_error
    assert "held for approval (guardhost.approval_required)" in text_of(result)
    assert "declared no elicitation capability" in text_of(result)


async def test_progress_sampling_and_the_servers_own_elicitation_are_relayed(write_config):
    config = write_config(DENY_WRITES)
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async def answer(context, params):
        assert params.message == "your name?"
        return types.ElicitResult(action="accept", content={"answer": "Ada"})

    async with client(proxy_command(config), sampling_callback=sampled, elicitation_callback=answer) as proxied:
        counted = await proxied.call_tool("count", {"n": 3}, progress_callback=on_progress)
        assert text_of(counted) == "counted to 3"
        assert [p[0] for p in progress] == [1, 2, 3]
        assert text_of(await proxied.call_tool("sample", {"prompt": "hi"})) == "model said: sampled"
        assert text_of(await proxied.call_tool("confirm", {"question": "your name?"})) == "user said: Ada"


async def test_resources_and_prompts_are_decided_under_their_method_names(write_config):
    open_config = write_config(DENY_WRITES, "open.yaml")
    closed = write_config(
        """
        guardrails:
          enabled: true
          provider:
            use: builtin:AllowlistProvider
            config: {denied_tools: [resources/read, prompts/get]}
        """,
        "closed.yaml",
    )
    async with client(server_command()) as direct, client(proxy_command(open_config)) as proxied:
        assert dump(await proxied.read_resource("note://greeting")) == dump(await direct.read_resource("note://greeting"))
        assert dump(await proxied.get_prompt("greet", {"name": "Ada"})) == dump(
            await direct.get_prompt("greet", {"name": "Ada"})
        )
    async with client(proxy_command(closed)) as proxied:
        for attempt in (proxied.read_resource("note://greeting"), proxied.get_prompt("greet", {"name": "Ada"})):
            with pytest.raises(MCPError) as raised:
                await attempt
            assert raised.value.error.code == -32001
            assert "Guardrail denied" in raised.value.error.message


async def test_a_tool_whose_definition_changes_is_withheld_until_accepted(write_config):
    config = write_config(DENY_WRITES + "    mcp: {name: tests, pins: pins.json}\n")
    async with client(proxy_command(config)) as proxied:
        assert "add" in [t.name for t in (await proxied.list_tools()).tools]
        assert text_of(await proxied.call_tool("add", {"a": 1, "b": 1})) == "2"
        await proxied.call_tool("pull", {})
        listed = [t.name for t in (await proxied.list_tools()).tools]
        assert "add" not in listed and "echo" in listed
        refused = await proxied.call_tool("add", {"a": 1, "b": 1})
        assert refused.is_error
        assert "(guardhost.mcp.tool_changed)" in text_of(refused)
        assert "guardhost mcp pins accept tests/add" in text_of(refused)

        pins = subprocess.run([GUARDHOST, "mcp", "pins", "list", "--config", str(config)], capture_output=True, text=True)
        assert pins.returncode == 0, pins.stderr
        assert "tests/add\tCHANGED" in pins.stdout
        accepted = subprocess.run(
            [GUARDHOST, "mcp", "pins", "accept", "--config", str(config), "tests/add"], capture_output=True, text=True
        )
        assert accepted.returncode == 0, accepted.stderr
        assert "add" in [t.name for t in (await proxied.list_tools()).tools]
        assert text_of(await proxied.call_tool("add", {"a": 1, "b": 1})) == "2"

    # A new session starts from the pins: the pulled definition is the pin now,
    # and the original one is the change.
    async with client(proxy_command(config)) as proxied:
        assert "add" not in [t.name for t in (await proxied.list_tools()).tools]


async def test_a_pulled_definition_is_caught_across_restarts(write_config):
    config = write_config(DENY_WRITES + "    mcp: {name: tests, pins: pins.json}\n")
    async with client(proxy_command(config)) as proxied:
        await proxied.list_tools()
    async with client(proxy_command(config), env={"GUARDHOST_TEST_PULLED": "1"}) as proxied:
        assert "add" not in [t.name for t in (await proxied.list_tools()).tools]


async def test_the_2026_07_28_form_passes_and_is_guarded(write_config, tmp_path):
    config = write_config(DENY_WRITES)
    target = tmp_path / "modern.txt"
    async with client(server_command(), mode="auto") as direct, client(proxy_command(config), mode="auto") as proxied:
        assert proxied.protocol_version == direct.protocol_version
        assert dump(await proxied.call_tool("echo", {"text": "now"})) == dump(await direct.call_tool("echo", {"text": "now"}))
        # The SDK lists the tools before calling one it has not seen: the
        # denied tool is not listed, so its call is invalid.
        with pytest.raises(MCPError) as raised:
            await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
    assert raised.value.error.code == -32602
    assert not target.exists()


def exchange(config, lines, answers):
    """Writes raw lines to a proxy, reads `answers` answers, closes its
    input and waits for it to end: its status, stderr and the answers."""
    proxy = subprocess.Popen(
        proxy_command(config), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        proxy.stdin.write("".join(line + "\n" for line in lines))
        proxy.stdin.flush()
        got = [json.loads(proxy.stdout.readline()) for _ in range(answers)]
        proxy.stdin.close()
        rest = proxy.stdout.read()
        status = proxy.wait(timeout=30)
    finally:
        proxy.kill()
    assert rest == "", f"more answers than expected: {rest}"
    return status, proxy.stderr.read(), got


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
)

INITIALIZED = '{"jsonrpc": "2.0", "method": "notifications/initialized"}'


def test_a_bad_line_is_answered_and_the_proxy_goes_on(write_config):
    config = write_config(DENY_WRITES)
    status, stderr, answers = exchange(
        config,
        [
            "this is not JSON",
            "[1, 2]",
            '{"jsonrpc": "2.0", "id": 9}',
            INITIALIZE,
            INITIALIZED,
            '{"jsonrpc": "2.0", "id": "p", "method": "ping"}',
        ],
        5,
    )
    assert status == 0, stderr
    # Closing the proxy's input closed the server's: it exited on its own.
    assert "killed" not in stderr, stderr
    errors = [a["error"]["code"] for a in answers if "error" in a]
    assert errors == [-32700, -32600, -32600]
    assert [a["id"] for a in answers if "result" in a] == [1, "p"]
    assert "2025-06-18" == next(a for a in answers if a.get("id") == 1)["result"]["protocolVersion"]


def test_a_message_over_the_limit_is_refused_and_the_next_one_served(write_config):
    config = write_config(DENY_WRITES + "    mcp: {max_message_bytes: 4096}\n")
    big = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": "x" * 5000}})
    status, stderr, answers = exchange(
        config, [INITIALIZE, INITIALIZED, big, '{"jsonrpc": "2.0", "id": 3, "method": "ping"}'], 3
    )
    assert status == 0, stderr
    refused = [a for a in answers if "error" in a]
    assert len(refused) == 1 and "over this proxy's limit of 4096" in refused[0]["error"]["message"]
    assert {a["id"] for a in answers if "result" in a} == {1, 3}


async def test_a_server_that_dies_answers_its_pending_calls_with_an_error(write_config):
    config = write_config(DENY_WRITES)
    with pytest.raises(BaseException) as raised:
        async with client(proxy_command(config)) as proxied:
            await proxied.call_tool("crash", {})
    error = the_one(raised.value, MCPError)
    assert error.error.code == -32000
    assert "exited (exit status: 3) before answering" in error.error.message


def the_one(exception, kind):
    """The exception of `kind` in `exception`, which may be a group (the
    SDK's task group wraps what a call raised)."""
    if isinstance(exception, kind):
        return exception
    found = [the_one(e, kind) for e in getattr(exception, "exceptions", ())]
    found = [e for e in found if e is not None]
    assert len(found) == 1, f"one {kind.__name__} expected in {exception!r}"
    return found[0]


def test_the_command_says_what_is_wrong(write_config, tmp_path):
    config = write_config(DENY_WRITES)
    missing = subprocess.run([GUARDHOST, "mcp", "--config", str(config)], capture_output=True, text=True)
    assert missing.returncode == 2 and "give its command after `--`" in missing.stderr
    absent = subprocess.run(
        proxy_command(config, [str(tmp_path / "no-such-server")]), capture_output=True, text=True, input=""
    )
    assert absent.returncode == 2 and "cannot start the MCP server" in absent.stderr
    bad = write_config("mcp: {pinnning: false}\n", "bad.yaml")
    typo = subprocess.run(proxy_command(bad), capture_output=True, text=True, input="")
    assert typo.returncode == 2 and "unknown field `pinnning`" in typo.stderr
    nopins = subprocess.run([GUARDHOST, "mcp", "pins", "list", "--config", str(config)], capture_output=True, text=True)
    assert nopins.returncode == 2 and "names no pins file" in nopins.stderr


async def test_a_server_that_dies_is_started_again_as_the_config_says(write_config):
    config = write_config(DENY_WRITES + "    mcp: {restarts: 1}\n")
    changed = []

    async def on_message(message):
        changed.append(repr(message))

    with pytest.raises(BaseException) as raised:
        async with client(proxy_command(config), message_handler=on_message) as proxied:
            assert text_of(await proxied.call_tool("echo", {"text": "before"})) == "before"
            with pytest.raises(MCPError) as lost:
                await proxied.call_tool("crash", {})
            assert lost.value.error.code == -32000
            assert "it was started again" in lost.value.error.message
            # The new server had the client's handshake replayed: it answers.
            assert text_of(await proxied.call_tool("echo", {"text": "after"})) == "after"
            # No restart left: the proxy ends with the server.
            await proxied.call_tool("crash", {})
    error = the_one(raised.value, MCPError)
    assert error.error.code == -32000 and "before answering" in error.error.message
    assert "it was started again" not in error.error.message
    # After the restart the client was told to list the tools again.
    assert any("tools/list_changed" in m or "ToolListChanged" in m for m in changed), changed


async def test_a_call_approved_in_the_2026_07_28_form_keeps_its_approval_for_the_servers_own_rounds(write_config):
    # `ask` elicits through the server itself: in this form the server
    # answers with an InputRequiredResult of its own, and the client sends
    # the call a third time with the server's state.
    config = write_config(ASK_ADD.replace("ask: [add]", "ask: [ask]"))
    asked = []

    async def answer(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "Ada"})

    async with client(proxy_command(config), mode="auto", elicitation_callback=answer) as proxied:
        result = await proxied.call_tool("ask", {"question": "name?"})
    assert not result.is_error and text_of(result) == "user said: Ada", text_of(result)
    assert len(asked) == 2 and asked[0].startswith("Approve the call of tool 'ask'") and asked[1] == "name?", asked


async def test_an_approval_kept_for_the_servers_round_holds_for_its_state_once(write_config):
    config = write_config(ASK_ADD.replace("ask: [add]", "ask: [ask]"))
    accepted = {"guardhost/approval": types.ElicitResult(action="accept")}
    question = {"question": "name?"}

    def answered(result):
        ada = types.ElicitResult(action="accept", content={"answer": "Ada"})
        return {key: ada for key in result.input_requests}

    async with client(proxy_command(config), mode="auto", elicitation_callback=elicited_ada) as proxied:
        session = proxied.session
        ours = await session.call_tool("ask", question, allow_input_required=True)
        theirs = await session.call_tool(
            "ask", question, input_responses=accepted, request_state=ours.request_state, allow_input_required=True
        )
        # Approved, the call reached the server, which asks its own question.
        assert isinstance(theirs, types.InputRequiredResult) and "guardhost/approval" not in theirs.input_requests
        # A state the server did not give: the proxy asks again.
        made_up = await session.call_tool(
            "ask", question, input_responses=answered(theirs), request_state="made up", allow_input_required=True
        )
        assert isinstance(made_up, types.InputRequiredResult) and "guardhost/approval" in made_up.input_requests
        # The server's state: the approval holds, and the call completes.
        done = await session.call_tool("ask", question, input_responses=answered(theirs), request_state=theirs.request_state)
        assert text_of(done) == "user said: Ada", text_of(done)
        # Once: the same state again is asked about again.
        again = await session.call_tool(
            "ask", question, input_responses=answered(theirs), request_state=theirs.request_state, allow_input_required=True
        )
        assert isinstance(again, types.InputRequiredResult) and "guardhost/approval" in again.input_requests
