#!/usr/bin/env python3
"""A guardhost provider program in Python, standard library only.

It decides exactly as guardhost's built-in allowlist provider does, and is
run by the host as its provider process:

    guardrails:
      enabled: true
      provider:
        command: [python3, allowlist_provider.py]
        isolation: process
        config:
          denied_tools: [bash, write_file]

The host starts the program in the config file's directory and talks to it
over stdin/stdout in frames (docs/provider-protocol.md): each frame is the
two bytes ``GH``, the body's length as a big-endian 32-bit integer, and the
body, one JSON object with a ``type``.

1. The program says ``hello`` with the protocol version it speaks.
2. The host sends ``init``; ``init["spec"]["config"]`` is the provider's
   config. The program answers ``ready`` with its name, or ``failed`` with a
   message that names the config key at fault and says what to write.
3. The host sends ``evaluate`` frames, each with an ``id``; the program
   answers each with one ``answer`` frame with the same ``id``.
4. When stdin ends, the program exits.

Anything the program prints must go to stderr: stdout carries frames only,
and the host ends (and restarts) a program that writes anything else there.
"""

import json
import struct
import sys
import unicodedata

PROTOCOL = 1
NAME = "py-allowlist"
KEYS = ("allowed_tools", "denied_tools")


# ---------------------------------------------------------------- frames


def read_frame(stream):
    """The next message, or None when the host closed the stream."""
    header = stream.read(6)
    if not header:
        return None
    if len(header) < 6 or header[:2] != b"GH":
        raise ValueError(f"not a frame header: {header!r}")
    (length,) = struct.unpack(">I", header[2:])
    body = stream.read(length)
    if len(body) < length:
        raise ValueError("the stream ended inside a frame")
    return json.loads(body)


def write_frame(stream, message):
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    stream.write(b"GH" + struct.pack(">I", len(body)) + body)
    stream.flush()


# ---------------------------------------------------------------- policy


def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def tool_list(config, key):
    """`config[key]` as a list of tool names, or None when absent or null.
    Raises ValueError naming the key path, never the value."""
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError(f"`{key}` must be a list of tool names, found {json_type(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError(f"`{key}[{index}]` must be a string (a tool name), found {json_type(item)}")
    return value


# Characters that do not show in a tool name: the same set as the built-in
# allowlist (control characters, whitespace other than the space, and the
# Unicode format and filler characters below).
INVISIBLE_RANGES = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F), (0x034F, 0x034F), (0x115F, 0x1160), (0x3164, 0x3164),
    (0xFFA0, 0xFFA0), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0x180B, 0x180D),
    (0x180F, 0x180F), (0x2800, 0x2800),
)
# Unicode's White_Space property, which Rust's `char::is_whitespace` follows.
WHITESPACE = set("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)
}


def invisible(c):
    code = ord(c)
    if code < 0x80:
        return code < 0x20 or code == 0x7F
    if unicodedata.category(c) == "Cc" or (c in WHITESPACE and c != " "):
        return True
    return any(low <= code <= high for low, high in INVISIBLE_RANGES)


ASCII_WHITESPACE = " \t\n\f\r"


class Allowlist:
    def __init__(self, config):
        unknown = sorted(set(config) - set(KEYS))
        if unknown:
            raise ValueError(f"unknown config key `{unknown[0]}`; this provider accepts: {', '.join(KEYS)}")
        allowed = tool_list(config, "allowed_tools")
        self.allowed = None if allowed is None else set(allowed)
        self.denied = {tool.strip(ASCII_WHITESPACE) for tool in tool_list(config, "denied_tools") or []}

    def decide(self, request):
        name = request.get("tool_name", "")
        if not isinstance(name, str):
            raise ValueError(f"`tool_name` must be a string, found {json_type(name)}")
        bad = next((c for c in name if invisible(c)), None)
        if bad is not None:
            return deny(
                "oap.invalid_tool_name",
                f"tool name {rust_debug(name)} contains an invisible or control character (U+{ord(bad):04X})",
            )
        if self.allowed is not None and name not in self.allowed:
            return deny("oap.tool_not_allowed", f"tool '{name}' not in allowlist")
        if name.strip(ASCII_WHITESPACE) in self.denied:
            return deny("oap.tool_not_allowed", f"tool '{name}' is denied")
        return {"allow": True, "reasons": [{"code": "oap.allowed", "message": ""}]}


def deny(code, message):
    return {"allow": False, "reasons": [{"code": code, "message": message}]}


def rust_debug(text):
    """A string quoted as Rust's `{:?}` quotes it (the built-in's wording)."""
    out = []
    for c in text:
        code = ord(c)
        if c in "\"\\":
            out.append("\\" + c)
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\0":
            out.append("\\0")
        elif invisible(c) and c != " ":
            out.append(f"\\u{{{code:x}}}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


# ---------------------------------------------------------------- session


def main():
    frames_in = sys.stdin.buffer
    frames_out = sys.stdout.buffer
    # stdout carries frames only: anything printed goes to stderr.
    sys.stdout = sys.stderr

    write_frame(frames_out, {"type": "hello", "protocol": PROTOCOL, "version": "py-allowlist 1.0"})
    init = read_frame(frames_in)
    if init is None:
        return 0
    if init.get("type") != "init":
        print(f"{NAME}: expected init, got {init.get('type')!r}", file=sys.stderr)
        return 2
    if init.get("protocol") != PROTOCOL:
        write_frame(frames_out, {"type": "failed", "error": f"this program speaks provider protocol {PROTOCOL}"})
        return 2
    config = init.get("spec", {}).get("config") or {}
    try:
        provider = Allowlist(config)
    except ValueError as error:
        write_frame(frames_out, {"type": "failed", "error": str(error)})
        return 1
    write_frame(frames_out, {"type": "ready", "info": {"name": NAME}})

    while True:
        message = read_frame(frames_in)
        if message is None:
            return 0
        if message.get("type") != "evaluate":
            print(f"{NAME}: unexpected {message.get('type')!r} frame", file=sys.stderr)
            return 2
        try:
            outcome = {"kind": "decision", "decision": provider.decide(message["request"])}
        except Exception as error:  # a bug here is a provider error, never a crash
            outcome = {"kind": "error", "message": f"{type(error).__name__}: {error}", "panicked": False}
        write_frame(frames_out, {"type": "answer", "id": message["id"], "outcome": outcome})


if __name__ == "__main__":
    sys.exit(main())
