"""A client of the decision service (``guardhost serve``), standard library only.

For a program that asks a guardhost server over HTTP rather than loading a
provider itself: ::

    from guardhost.client import DecisionClient

    client = DecisionClient("http://127.0.0.1:8787", token=os.environ.get("GUARDHOST_TOKEN"))
    decision = client.decide("bash", {"command": "ls"}, id="call-1", context={"thread_id": "t-1"})
    if decision["outcome"] != "allow":
        print(decision["message"]["content"])   # what the agent should read

A decision is the document ``guardhost run --output decisions`` prints for
the same call (docs/protocol.md): ``outcome`` is ``allow``, ``deny``,
``interrupt`` or ``error`` (a call that is not one; ``error.message`` says
why). A refusal of the request itself (a wrong token, a body too large, a
server draining for a shutdown) raises :class:`ServiceError`. An answer
that is not one JSON document with each key once in every object raises
:class:`GuardhostError` naming the key (``json.loads`` would keep the last
of two ``outcome``s silently).
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from . import GuardhostError

__all__ = ["DecisionClient", "ServiceError"]


class ServiceError(GuardhostError):
    """The service refused the request: ``status`` (HTTP), ``kind`` and a
    message saying what to do."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(f"{status} {kind}: {message}")
        self.status = status
        self.kind = kind


class _Pairs(list):  # type: ignore[type-arg]
    """An object's (key, value) pairs, in order, before they are a dict."""


def _loads_unique(data: bytes, what: str) -> Any:
    """``json.loads(data)``, refusing an object with a key twice at any depth
    (``json.loads`` keeps the last one silently): the error names the key
    and where it is (``decisions[1].outcome``). One pass over the document."""
    try:
        tree = json.loads(data, object_pairs_hook=_Pairs)
    except ValueError as error:
        raise GuardhostError(f"{what}: the answer is not JSON ({error})") from None

    def build(value: Any, at: str) -> Any:
        if isinstance(value, _Pairs):
            mapping: dict[str, Any] = {}
            for key, item in value:
                where = f"{at}.{key}" if at else key
                if key in mapping:
                    raise GuardhostError(
                        f"{what}: the answer has the key `{where}` twice; a key may appear once, "
                        "or two readers could act on different values (is something between you and the server?)"
                    )
                mapping[key] = build(item, where)
            return mapping
        if isinstance(value, list):
            return [build(item, f"{at}[{i}]") for i, item in enumerate(value)]
        return value

    return build(tree, "")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class DecisionClient:
    """Asks a guardhost decision service.

    ``url`` is ``http://host:port`` (default ``http://127.0.0.1:8787``) or
    ``unix:/path/to/socket``; ``token`` is sent as ``Authorization: Bearer``.
    One connection is kept and reused; a client is not for several threads
    at once (make one per thread).
    """

    def __init__(self, url: str = "http://127.0.0.1:8787", *, token: str | None = None, timeout: float = 10.0) -> None:
        self._headers = {"content-type": "application/json"}
        if token:
            self._headers["authorization"] = f"Bearer {token}"
        self._timeout = timeout
        self._connection: http.client.HTTPConnection | None = None
        if url.startswith("unix:"):
            self._unix: str | None = url[len("unix:") :]
            self._host = None
        else:
            parsed = urllib.parse.urlsplit(url)
            if parsed.scheme != "http" or not parsed.hostname:
                raise ValueError(f"url must be http://host:port or unix:/path, not {url!r}")
            self._unix = None
            self._host = (parsed.hostname, parsed.port or 80)

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            if self._unix is not None:
                self._connection = _UnixConnection(self._unix, self._timeout)
            else:
                assert self._host is not None
                self._connection = http.client.HTTPConnection(*self._host, timeout=self._timeout)
        return self._connection

    def _request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        payload = None if body is None else json.dumps(body).encode()
        for attempt in (1, 2):
            connection = self._connect()
            try:
                connection.request(method, path, body=payload, headers=self._headers)
                response = connection.getresponse()
                data = response.read()
                if response.getheader("connection", "").lower() == "close":
                    self.close()
                return response.status, data
            except (ConnectionError, http.client.RemoteDisconnected, http.client.CannotSendRequest):
                # A kept connection the server has closed meanwhile: once more
                # on a new one.
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, body: Any = None, accept: tuple[int, ...] = (200,)) -> Any:
        status, data = self._request(method, path, body)
        document = _loads_unique(data, f"{method} {path}") if data else None
        if status in accept:
            return document
        error = (document or {}).get("error", {}) if isinstance(document, dict) else {}
        raise ServiceError(status, error.get("kind", "unknown"), error.get("message", data.decode(errors="replace")))

    @staticmethod
    def _call(name: str | None, args: Mapping[str, Any] | None, id: str | None, context: Mapping[str, Any] | None) -> dict[str, Any]:
        call: dict[str, Any] = {"name": name, "args": dict(args or {})}
        if id is not None:
            call["id"] = id
        if context is not None:
            call["context"] = dict(context)
        return call

    def decide(
        self,
        name: str | None,
        args: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Decides one tool call: its decision document."""
        return self._json("POST", "/v1/decide", self._call(name, args, id, context), accept=(200, 400))

    def decide_batch(self, calls: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Decides calls (``{"name", "args", "id", "context"}`` mappings) in
        order: one decision document each."""
        return self._json("POST", "/v1/decide/batch", {"calls": [dict(c) for c in calls]})["decisions"]

    def ready(self) -> bool:
        """Whether the service takes calls (``/readyz``)."""
        status, _ = self._request("GET", "/readyz")
        return status == 200

    def metrics(self) -> str:
        """The Prometheus text of ``/metrics``."""
        status, data = self._request("GET", "/metrics")
        if status != 200:
            raise ServiceError(status, "unauthorized" if status == 401 else "unknown", data.decode(errors="replace"))
        return data.decode()

    def close(self) -> None:
        """Closes the kept connection (a later call opens another)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> DecisionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
