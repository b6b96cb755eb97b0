"""One bounded HTTP request: a live probe must give up at its timeout and
stop reading at a size cap, whatever the server on the other end does (hang
before the headers, drip bytes, stream forever, answer with garbage)."""

from __future__ import annotations

import json
import socket
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any

from ..settings.options import DEFAULT_PROBE_TIMEOUT
from .bounded_decode import ACCEPT_ENCODING, UnsupportedEncoding, decoded_chunks

DEFAULT_TIMEOUT = DEFAULT_PROBE_TIMEOUT  # options.py shows it in --help
MAX_BODY = 4 << 20


class HttpClients:
    """The httpx clients of one owner (an LM Studio client, an MLflow server: one per
    session), one per TLS need: building one loads the CA bundle (~25 ms), which
    plain-HTTP probes of local servers never need. Owned by the object that probes,
    never kept at module level; a request without one builds a client for itself
    (~2 ms without TLS)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[bool, int], Any] = {}

    def client(self, tls: bool):
        import httpx

        # Keyed by the httpx module too: a process that re-imports httpx (pytest's
        # own pytester does, between in-process sessions) must not mix a client of
        # the old module with Timeout objects of the new one.
        key = (tls, id(httpx))
        if key not in self._by_key:
            self._by_key[key] = new_client(tls)
        return self._by_key[key]

    def close(self) -> None:
        for client in self._by_key.values():
            client.close()
        self._by_key.clear()


def new_client(tls: bool):
    import httpx

    # No kept-alive connections: each probe connects anew, so the
    # watchdog always sees the socket it may have to shut (a local probe
    # pays ~0.1 ms for it).
    return httpx.Client(
        follow_redirects=False, trust_env=False, verify=tls, limits=httpx.Limits(max_keepalive_connections=0)
    )


class Watchdog:
    """Ends a request at a wall-clock deadline whatever the server does.

    httpx's timeouts are per read: a server that drips a byte a second, in
    its headers or its body, keeps a request alive forever. httpcore's
    ``trace`` extension hands over each connection's socket; at the deadline
    a timer shuts it down, the blocked read returns, and the request fails.
    Use one per request: ``extensions={"trace": dog.trace}``, and a client
    that does not reuse connections (a reused one is never announced)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def trace(self, event: str, info: dict) -> None:
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._sock = sock  # after TLS, the wrapping socket owns the descriptor
            fired = self.fired
        if fired:
            self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sock = self._sock
        self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket | None) -> None:
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed: the request ended on its own
            pass

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


def _refused(url: str, timeout: float) -> str | None:
    """The detail of a probe whose server is not listening, found with one
    plain TCP connect (the client connects the same way, ``trust_env`` off, so
    through no proxy); None when something answers the connect, or for
    anything but plain HTTP. A session that checks a sweep without LM Studio
    running must not import httpx to be told "connection refused" (issue 38:
    that import was half of a tiny session's cost). The words are the ones
    httpx's ``ConnectError`` carries, so the skip reason does not depend on
    which path found it."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port or 80
    except ValueError:
        return None
    if parts.scheme != "http" or not parts.hostname:
        return None
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except ConnectionRefusedError as exc:
        return f"ConnectError: {exc}"
    except OSError:
        return None  # a timeout, a name that does not resolve...: the client's own error says it
    return None


@dataclass
class Reply:
    """What a probe got back. ``problem`` is None for a readable JSON answer,
    else one of ``unreachable``, ``timeout``, ``too-large``, ``invalid-json``,
    ``redirect`` (never followed: a probe asks the server it was given),
    with ``detail`` saying what exactly happened."""

    url: str
    status: int | None = None
    data: Any = None
    text: str = ""
    problem: str | None = None
    detail: str = ""
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.problem is None and self.status is not None and self.status < 400


def request_json(
    method: str,
    url: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = MAX_BODY,
    headers: dict[str, str] | None = None,
    body: Any = None,
    clients: HttpClients | None = None,
) -> Reply:
    """One bounded request; through ``clients`` where the caller keeps them (a
    session's many probes), else through a client made and closed for it."""
    start = time.monotonic()
    refused = _refused(url, timeout)
    if refused is not None:
        reply = Reply(url, problem="unreachable", detail=refused)
        reply.elapsed_s = time.monotonic() - start
        return reply
    import httpx  # only probes of a server that is listening pay for it (~0.15 s)

    deadline = start + timeout
    reply = Reply(url)
    dog = Watchdog(timeout)
    tls, client = url.startswith("https:"), None
    try:
        client = clients.client(tls) if clients is not None else new_client(tls)
        headers = {"Accept-Encoding": ACCEPT_ENCODING, **(headers or {})}
        with (
            dog,
            client.stream(
                method, url, headers=headers, json=body, timeout=httpx.Timeout(timeout), extensions={"trace": dog.trace}
            ) as resp,
        ):
            reply.status = resp.status_code
            if resp.is_redirect:
                reply.problem = "redirect"
                reply.detail = (
                    f"HTTP {resp.status_code} to {resp.headers.get('location', '(no Location)')[:200]}; "
                    f"not followed (a probe asks only the server it was given)"
                )
                return _done(reply, start)
            parts, size = [], 0
            # Decoded here, in bounded pieces: the cap counts decoded bytes (bounded_decode.py).
            for chunk in decoded_chunks(resp.iter_raw(), resp.headers.get("content-encoding")):
                parts.append(chunk)
                size += len(chunk)
                if size > max_bytes:
                    reply.problem = "too-large"
                    reply.detail = f"the answer passed the {max_bytes >> 10} KiB cap; stopped reading"
                    break
                if time.monotonic() > deadline:
                    reply.problem = "timeout"
                    reply.detail = f"the answer was still arriving after {timeout:g} s; gave up"
                    break
            raw = b"".join(parts)
    except httpx.TimeoutException as exc:
        reply.problem, reply.detail = "timeout", f"no answer within {timeout:g} s ({type(exc).__name__})"
    except (UnsupportedEncoding, zlib.error) as exc:
        reply.problem, reply.detail = "invalid-json", f"the answer could not be decoded: {exc}"
    except (httpx.HTTPError, OSError, ValueError) as exc:
        if dog.fired:  # the watchdog cut a server that kept dripping
            reply.problem, reply.detail = "timeout", f"no complete answer within {timeout:g} s; gave up"
        else:
            reply.problem, reply.detail = "unreachable", f"{type(exc).__name__}: {exc}"
    finally:
        if clients is None and client is not None:
            client.close()
    reply.elapsed_s = time.monotonic() - start
    if reply.problem:
        return reply
    reply.text = raw[:2000].decode("utf-8", "replace")
    try:
        reply.data = json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the stack
        reply.problem, reply.detail = "invalid-json", f"the answer is not JSON ({exc}): {reply.text[:120]!r}"
    return reply


def _done(reply: Reply, start: float) -> Reply:
    reply.elapsed_s = time.monotonic() - start
    return reply
