"""A real HTTP server on 127.0.0.1 (a free port) that speaks LM Studio's
documented API (lmstudio.ai/docs, "REST API") closely enough to probe: ``GET /v1/models``,
``GET /api/v0/models`` (``state``), ``GET /api/v1/models``
(``loaded_instances``), ``POST /api/v1/models/unload``,
``POST /v1/chat/completions``, and LM Studio's HTTP-200 ``Unexpected
endpoint or method`` answer for any other route.

Variants (keyword arguments of :class:`FakeLMStudio`) make it misbehave the
ways real servers do: require a token, hang past the client's timeout, answer
with invalid JSON, or stream an endless body. Every wait is bounded and the
server stops itself after ``lifetime_s`` even if a test forgets to."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Model:
    id: str
    loaded: bool = False
    type: str = "vlm"


@dataclass
class Behaviour:
    models: list[Model] = field(default_factory=list)
    token: str | None = None  # required bearer token
    hang_s: float = 0.0  # wait this long before any answer
    invalid_json: bool = False
    endless: bool = False  # stream a body that never ends (bounded by max_stream_bytes)
    v1: bool = True  # the v1 native API exists (LM Studio 0.4+)
    chat_content: str = '{"score": 8}'
    chat_reasoning: str | None = None
    max_stream_bytes: int = 256 << 20


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    # -- plumbing ---------------------------------------------------------------
    def _send(self, status: int, payload: Any = None, raw: bytes | None = None) -> None:
        body = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(n, 1 << 20)) if n else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _wait(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not self.server.stopping.is_set():
            time.sleep(0.02)

    def _handle(self, method: str) -> None:
        b = self.server.behaviour
        self.server.requests.append((method, self.path, dict(self.headers)))
        body = self._body() if method == "POST" else None
        if b.hang_s:
            self._wait(b.hang_s)
            if self.server.stopping.is_set():
                return
        if b.token is not None and self.headers.get("Authorization") != f"Bearer {b.token}":
            return self._send(
                401,
                {
                    "error": {
                        "type": "invalid_request",
                        "code": "invalid_api_key",
                        "message": "An LM Studio API token is required to make requests to this server, but none was "
                        "provided using the Authorization header using the 'Bearer' scheme",
                    }
                },
            )
        if b.invalid_json:
            return self._send(200, raw=b"<html>Bad Gateway</html>{not json")
        if b.endless:
            return self._stream_forever()
        route = self.path.split("?")[0]
        answer = self._route(method, route, body)
        if answer is None:
            return self._send(200, {"error": f"Unexpected endpoint or method. ({method} {self.path})"})
        self._send(*answer)

    def _stream_forever(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b'{"data": [' + b'{"id": "x"},' * 4000
        sent = 0
        try:
            while sent < self.server.behaviour.max_stream_bytes and not self.server.stopping.is_set():
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        except OSError:
            return  # the client stopped reading: what the size cap is for
        self.server.stream_ran_out.set()

    def _route(self, method: str, route: str, body: Any):
        b = self.server.behaviour
        if method == "GET" and route == "/v1/models":
            return 200, {
                "object": "list",
                "data": [{"id": m.id, "object": "model", "owned_by": "organization_owner"} for m in b.models],
            }
        if method == "GET" and route == "/api/v0/models":
            return 200, {
                "object": "list",
                "data": [
                    {
                        "id": m.id,
                        "object": "model",
                        "type": m.type,
                        "publisher": "lmstudio-community",
                        "arch": "qwen2_vl",
                        "compatibility_type": "gguf",
                        "quantization": "Q4_K_M",
                        "state": "loaded" if m.loaded else "not-loaded",
                        "max_context_length": 32768,
                    }
                    for m in b.models
                ],
            }
        if b.v1 and method == "GET" and route == "/api/v1/models":
            return 200, {
                "models": [
                    {
                        "type": "llm",
                        "key": m.id,
                        "display_name": m.id,
                        "loaded_instances": [{"id": m.id, "config": {"context_length": 4096}}] if m.loaded else [],
                    }
                    for m in b.models
                ]
            }
        if b.v1 and method == "POST" and route == "/api/v1/models/unload":
            iid = (body or {}).get("instance_id")
            for m in b.models:
                if m.id == iid and m.loaded:
                    m.loaded = False
                    return 200, {"instance_id": iid}
            return 404, {"error": {"type": "model_not_found", "message": f"No loaded instance {iid!r}"}}
        if method == "POST" and route == "/v1/chat/completions":
            model = (body or {}).get("model")
            if model not in {m.id for m in b.models}:
                return 404, {"error": {"type": "model_not_found", "message": f"Model {model!r} not found"}}
            msg = {"role": "assistant", "content": b.chat_content}
            if b.chat_reasoning is not None:
                msg["reasoning_content"] = b.chat_reasoning
            return 200, {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
            }
        return None

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_OPTIONS(self) -> None:
        self._handle("OPTIONS")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.requests: list[tuple[str, str, dict]] = []
        self.stopping = threading.Event()
        self.stream_ran_out = threading.Event()


class FakeLMStudio:
    """``with FakeLMStudio(models=[Model("qwen2.5-vl-7b", loaded=True)]) as srv: srv.url``"""

    def __init__(self, lifetime_s: float = 60.0, **behaviour: Any) -> None:
        self.behaviour = Behaviour(**behaviour)
        self._server = _Server(self.behaviour)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[tuple[str, str, dict]]:
        return self._server.requests

    @property
    def stream_ran_out(self) -> bool:
        return self._server.stream_ran_out.is_set()

    def start(self) -> FakeLMStudio:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._server.stopping.set()
        self._timer.cancel()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeLMStudio:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class JsonServer(FakeLMStudio):
    """A server answering fixed JSON per route (the orchestrator's /api/session)."""

    def __init__(self, routes: dict[str, Any], lifetime_s: float = 60.0) -> None:
        super().__init__(lifetime_s)
        self._routes = routes
        self._server.RequestHandlerClass = _routes_handler(routes)


def _routes_handler(routes: dict[str, Any]):
    class H(_Handler):
        def _route(self, method, route, body):
            return (200, routes[route]) if route in routes else (404, {"detail": "Not Found"})

    return H
