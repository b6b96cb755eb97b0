"""A real HTTP evaluation server on 127.0.0.1 for the RH5xx tests.

It serves the v2 routes of Metta-AI/coworld's src/coworld/api_client.py and an OpenAPI document of the
post-rework request body (a ``roster``). Its clock is its own and is moved by
the test (``server.clock += 3600``): the ``Date`` header and nothing else tells
the client what time it is, so budgets are tested without sleeping.

Bounded: binds a random free port, answers each request within a few seconds,
and stops itself after ``lifetime_s`` even if a test forgets to."""

from __future__ import annotations

import json
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

ROSTER_SCHEMA = {
    "openapi": "3.1.0",
    "info": {"title": "coworld (test double)", "version": "2026-06-12"},
    "paths": {
        "/v2/experience-requests": {
            "post": {
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ExperienceRequestCreate"}}
                    },
                },
                "responses": {"201": {"description": "created"}, "422": {"description": "Validation Error"}},
            }
        }
    },
    "components": {
        "schemas": {
            "ExperienceRequestCreate": {
                "type": "object",
                "additionalProperties": False,
                "required": ["coworld_id", "roster"],
                "properties": {
                    "coworld_id": {"type": "string"},
                    "variant_id": {"type": ["string", "null"]},
                    "episode_count": {"type": "integer", "minimum": 1},
                    "execution_backend": {"enum": ["k8s", "antfarm"]},
                    "roster": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/RosterEntry"}},
                },
            },
            "RosterEntry": {
                "type": "object",
                "additionalProperties": False,
                "required": ["player"],
                "properties": {
                    "player": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "policy_ref": {"type": "string"},
                            "top_n": {"type": "integer"},
                            "random": {"type": "boolean"},
                        },
                    },
                    "slot": {"type": "integer", "default": -1},
                },
            },
        }
    },
}


class EvalServer:
    """``with EvalServer() as srv:`` then ``srv.url``; routes are set by the test.

    ``srv.objects[path]`` is the JSON answered at ``path``: a value, or a list
    wrapped in ``Seq`` to answer the next item on each call (the last repeats).
    ``srv.statuses[path]`` is a list of HTTP statuses to answer first (then 200);
    ``srv.always[path] = 500`` answers that status forever."""

    def __init__(self, lifetime_s: float = 120.0, start_clock: float = 1_780_000_000.0) -> None:
        self.clock = start_clock
        self.objects: dict[str, Any] = {"/openapi.json": ROSTER_SCHEMA}
        self.statuses: dict[str, list[int]] = {}
        self.always: dict[str, int] = {}
        self.hang: dict[str, float] = {}
        self.hits: dict[str, int] = {}
        self.headers_seen: list[dict[str, str]] = []
        self.lifetime_s = lifetime_s
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def iso(self, offset_s: float = 0.0) -> str:
        """A server timestamp ``offset_s`` from the server's current clock."""
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock + offset_s))

    def start(self) -> EvalServer:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> EvalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- answering -------------------------------------------------------------
    def _answer(self, path: str) -> tuple[int, Any]:
        with self._lock:
            self.hits[path] = self.hits.get(path, 0) + 1
            if path in self.always:
                return self.always[path], {"detail": "server error"}
            queued = self.statuses.get(path)
            if queued:
                return queued.pop(0), {"detail": "try again"}
            if path not in self.objects:
                return 404, {"detail": "Not Found"}
            obj = self.objects[path]
            if isinstance(obj, Seq):
                return 200, obj.next()
            return 200, obj

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 5

            def date_time_string(self, timestamp=None):  # the server's clock, not this machine's
                return formatdate(server.clock, usegmt=True)

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                server.headers_seen.append(dict(self.headers))
                delay = server.hang.get(path)
                if delay:
                    time.sleep(min(delay, 5.0))
                status, body = server._answer(path)
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except OSError:
                    pass

        return Handler


class Seq:
    """Answers its items in turn, then keeps answering the last."""

    def __init__(self, *items: Any) -> None:
        self.items = list(items)
        self.i = 0

    def next(self) -> Any:
        item = self.items[min(self.i, len(self.items) - 1)]
        self.i += 1
        return item() if callable(item) else item
