"""An MCP server for the official conformance suite's server scenarios
(`@modelcontextprotocol/conformance` 0.1.12), written with the official
Python SDK's low-level `Server` so every wire shape the suite checks is
spelled out here.

Run: `python conformance_server.py --port PORT`. It serves the streamable
HTTP transport at http://127.0.0.1:PORT/mcp, prints one line
`listening on http://127.0.0.1:PORT/mcp` once it accepts connections, and
exits with status 0 on SIGTERM.

Transport settings the scenarios depend on:
- an in-memory event store, so a client can resume a stream with
  Last-Event-ID, and SSE streams of requests whose MCP-Protocol-Version is
  2025-11-25 or later start with a priming event (an id, empty data, a
  `retry` field);
- Host/Origin checks that accept only localhost values (421 for a foreign
  Host, 403 for a foreign Origin; dns-rebinding-protection).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import signal
import struct
import sys
import warnings
import wave
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import uvicorn

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

# Logging and sampling are deprecated as of protocol 2026-07-28, but they are
# what the suite (protocol 2025-11-25) exercises; keep stderr free of the SDK's
# deprecation warnings.
warnings.simplefilter("ignore", MCPDeprecationWarning)

Ctx = ServerRequestContext[Any, Any]

# How long the tools that report over time wait between steps (the suite asks
# for ~50 ms, so that several notifications arrive while the call runs).
STEP = 0.05


# --- Test media, built from the standard library -------------------------


def _png_1x1_red() -> bytes:
    """A 1x1 red RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit, truecolour
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then R G B
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence() -> bytes:
    """10 ms of 8 kHz 16-bit mono silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 80)
    return buffer.getvalue()


PNG = base64.b64encode(_png_1x1_red()).decode()
WAV = base64.b64encode(_wav_silence()).decode()


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


def embedded_text(uri: str, mime_type: str, value: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=value)
    )


def result(*content: Any, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), is_error=is_error)


# --- Logging level (logging/setLevel), per session ------------------------

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
session_levels: dict[str | None, str] = {}


def session_key(ctx: Ctx) -> str | None:
    request = ctx.request
    return request.headers.get("mcp-session-id") if request is not None else None


async def log(ctx: Ctx, level: types.LoggingLevel, message: str) -> None:
    """Send a log notification on the request's stream, unless the session's level filters it out."""
    threshold = session_levels.get(session_key(ctx), "debug")
    if LEVELS.index(level) >= LEVELS.index(threshold):
        await ctx.session.send_log_message(level, message, logger="conformance", related_request_id=ctx.request_id)


async def set_logging_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    session_levels[session_key(ctx)] = params.level
    return types.EmptyResult()


# --- Tools -----------------------------------------------------------------

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def string_args(**descriptions: str) -> dict[str, Any]:
    """An input schema with the given required string arguments."""
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": d} for name, d in descriptions.items()},
        "required": list(descriptions),
    }


ToolFn = Callable[[Ctx, dict[str, Any]], Awaitable[types.CallToolResult]]
TOOLS: dict[str, tuple[types.Tool, ToolFn]] = {}


def tool(name: str, description: str, input_schema: dict[str, Any] = NO_ARGS) -> Callable[[ToolFn], ToolFn]:
    """Register a tool under `name` with a literal input schema."""

    def register(fn: ToolFn) -> ToolFn:
        TOOLS[name] = (types.Tool(name=name, description=description, input_schema=input_schema), fn)
        return fn

    return register


@tool("test_simple_text", "Returns simple text content.")
async def simple_text(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return result(text("This is a simple text response for testing."))


@tool("test_image_content", "Returns image content (a 1x1 red PNG).")
async def image_content(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return result(image())


@tool("test_audio_content", "Returns audio content (a short silent WAV).")
async def audio_content(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return result(types.AudioContent(type="audio", data=WAV, mime_type="audio/wav"))


@tool("test_embedded_resource", "Returns an embedded text resource.")
async def embedded_resource(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return result(embedded_text("test://embedded-resource", "text/plain", "This is an embedded resource content."))


@tool("test_multiple_content_types", "Returns text, image and resource content together.")
async def multiple_content_types(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return result(
        text("Multiple content types test:"),
        image(),
        embedded_text(
            "test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})
        ),
    )


@tool("test_tool_with_logging", "Sends three info log notifications while it runs.")
async def tool_with_logging(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    await log(ctx, "info", "Tool execution started")
    await anyio.sleep(STEP)
    await log(ctx, "info", "Tool processing data")
    await anyio.sleep(STEP)
    await log(ctx, "info", "Tool execution completed")
    return result(text("Tool with logging executed successfully"))


@tool("test_error_handling", "Always fails, reporting the failure as a tool error.")
async def error_handling(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return result(text("This tool intentionally returns an error for testing"), is_error=True)


@tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 when given a progress token.")
async def tool_with_progress(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await anyio.sleep(STEP)
        # A no-op when the request carried no _meta.progressToken.
        await ctx.session.report_progress(progress, 100, f"{progress}% done")
    return result(text("Tool with progress executed successfully"))


@tool("test_sampling", "Asks the client's model to answer a prompt.", string_args(prompt="The prompt for the LLM"))
async def sampling(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        return result(text("The client does not support sampling"), is_error=True)
    answer = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=text(str(args.get("prompt", ""))))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = answer.content
    reply = content.text if isinstance(content, types.TextContent) else content.model_dump_json(by_alias=True)
    return result(text(f"LLM response: {reply}"))


async def elicit(ctx: Ctx, message: str, schema: dict[str, Any]) -> types.CallToolResult:
    """Ask the client to fill in a form and report what came back."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return result(text("The client does not support elicitation"), is_error=True)
    answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return result(text(f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"))


@tool("test_elicitation", "Asks the user for a username and an email.", string_args(message="The message to show"))
async def elicitation(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return await elicit(ctx, str(args.get("message", "")), schema)


@tool("test_elicitation_sep1034_defaults", "Elicits a form whose fields all have defaults (SEP-1034).")
async def elicitation_defaults(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    return await elicit(ctx, "Please review and update the form fields with defaults", schema)


@tool("test_elicitation_sep1330_enums", "Elicits a form with every enum variant (SEP-1330).")
async def elicitation_enums(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    }
    return await elicit(ctx, "Please pick from the enum fields", schema)


# An input schema using JSON Schema 2020-12 keywords, listed verbatim (SEP-1613).
SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


@tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", SCHEMA_2020_12)
async def json_schema_2020_12(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return result(text(f"Received: {json.dumps(args, sort_keys=True)}"))


@tool("test_reconnection", "Closes its SSE stream before answering, so the client resumes with Last-Event-ID.")
async def reconnection(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    # The SDK hands out close_sse_stream only when an event store is configured
    # and the request's MCP-Protocol-Version header is 2025-11-25 or later
    # (server-sse-polling sends 2025-03-26, so there the call is answered on
    # the POST stream). Once closed, the result goes to the event store and is
    # replayed when the client resumes with a GET carrying Last-Event-ID.
    if ctx.close_sse_stream is not None:
        await anyio.sleep(STEP)  # let the priming event reach the client first
        await ctx.close_sse_stream()
    return result(text("Reconnection test completed"))


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[spec for spec, _ in TOOLS.values()])


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name not in TOOLS:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    _, fn = TOOLS[params.name]
    return await fn(ctx, params.arguments or {})


# --- Resources -------------------------------------------------------------

STATIC_TEXT = "This is the content of the static text resource."
WATCHED_TEXT = "This is a watched resource."
TEMPLATE = re.compile(r"^test://template/(?P<id>[^/]+)/data$")
subscriptions: dict[str | None, set[str]] = {}


async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(
                uri="test://static-text",
                name="static-text",
                description="A static text resource",
                mime_type="text/plain",
            ),
            types.Resource(
                uri="test://static-binary",
                name="static-binary",
                description="A static binary resource (a 1x1 red PNG)",
                mime_type="image/png",
            ),
            types.Resource(
                uri="test://watched-resource",
                name="watched-resource",
                description="A resource clients can subscribe to",
                mime_type="text/plain",
            ),
        ]
    )


async def list_resource_templates(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template="test://template/{id}/data",
                name="template-data",
                description="Data for the given id",
                mime_type="application/json",
            )
        ]
    )


async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    contents: types.TextResourceContents | types.BlobResourceContents
    if uri == "test://static-text":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=STATIC_TEXT)
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == "test://watched-resource":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=WATCHED_TEXT)
    elif match := TEMPLATE.match(uri):
        item = match["id"]
        data = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(data))
    else:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Resource not found: {uri}")
    return types.ReadResourceResult(contents=[contents])


async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscriptions.setdefault(session_key(ctx), set()).add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscriptions.get(session_key(ctx), set()).discard(str(params.uri))
    return types.EmptyResult()


# --- Prompts ---------------------------------------------------------------

PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two required arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that embeds a resource",
        arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with image content"),
]


async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


def user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    args = params.arguments or {}
    prompt = next((p for p in PROMPTS if p.name == params.name), None)
    if prompt is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
    missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in args]
    if missing:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Missing required arguments: {', '.join(missing)}")

    if params.name == "test_simple_prompt":
        messages = [user(text("This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        messages = [user(text(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"))]
    elif params.name == "test_prompt_with_embedded_resource":
        messages = [
            user(embedded_text(args["resourceUri"], "text/plain", "Embedded resource content for testing.")),
            user(text("Please process the embedded resource above.")),
        ]
    else:  # test_prompt_with_image
        messages = [user(image()), user(text("Please analyze the image above."))]
    return types.GetPromptResult(description=prompt.description, messages=messages)


# --- Completion --------------------------------------------------------------

# Candidate values per (prompt name or template URI, argument name).
COMPLETIONS: dict[tuple[str, str], list[str]] = {
    ("test_prompt_with_arguments", "arg1"): ["paris", "park", "party"],
    ("test_prompt_with_arguments", "arg2"): ["london", "lisbon", "lima"],
    ("test://template/{id}/data", "id"): ["1", "2", "3", "123"],
}


async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    ref = params.ref
    key = ref.name if isinstance(ref, types.PromptReference) else ref.uri
    candidates = COMPLETIONS.get((key, params.argument.name), [])
    values = [v for v in candidates if v.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


# --- Resumability ------------------------------------------------------------


class MemoryEventStore(EventStore):
    """Keeps every SSE event so a client can resume a stream with Last-Event-ID.

    The SDK shares one store among all sessions and names a request's stream
    after the JSON-RPC request id, which sessions reuse; so a replay stops at
    the stream's response, keeping a resumed request to its own answer (enough
    for the suite, which runs one session at a time).
    """

    def __init__(self) -> None:
        self.events: list[tuple[StreamId, types.JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: StreamId, message: types.JSONRPCMessage | None) -> EventId:
        self.events.append((stream_id, message))
        return str(len(self.events))  # event ids are 1-based positions in the log

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        if not last_event_id.isdigit() or not 1 <= int(last_event_id) <= len(self.events):
            return None
        stream_id = self.events[int(last_event_id) - 1][0]
        for position in range(int(last_event_id), len(self.events)):
            event_stream, message = self.events[position]
            if event_stream != stream_id or message is None:  # priming events carry no message
                continue
            await send_callback(EventMessage(message, str(position + 1)))
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                break
        return stream_id


# --- Server and HTTP app -------------------------------------------------------

server = Server(
    "mcp-conformance-test-server",
    version="1.0.0",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_list_resource_templates=list_resource_templates,
    on_read_resource=read_resource,
    on_subscribe_resource=subscribe,
    on_unsubscribe_resource=unsubscribe,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_completion=complete,
    on_set_logging_level=set_logging_level,
)

# DNS rebinding protection: only localhost Host and Origin values are served
# (a foreign Host gets 421, a foreign Origin 403; no Origin is fine).
LOCAL_HOSTS = [h + port for h in ("127.0.0.1", "localhost", "[::1]") for port in ("", ":*")]
SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=LOCAL_HOSTS,
    allowed_origins=[f"{scheme}://{h}" for scheme in ("http", "https") for h in LOCAL_HOSTS],
)


class ReportingServer(uvicorn.Server):
    """Prints the URL once the socket is listening and the app has started."""

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        print(f"listening on http://127.0.0.1:{self.config.port}/mcp", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="TCP port to listen on at 127.0.0.1")
    port = parser.parse_args().port

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        event_store=MemoryEventStore(),
        retry_interval=100,  # ms a client waits before reconnecting to a closed stream
        transport_security=SECURITY,
        host="127.0.0.1",
    )
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,  # open SSE streams do not hold shutdown up for long
    )
    # uvicorn shuts down gracefully on SIGTERM and then re-raises the signal
    # under the handler it found installed: make that one a clean exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ReportingServer(config).run()


if __name__ == "__main__":
    main()
