"""One bounded HTTP request: a live probe must give up at its timeout and
stop reading at a size cap, whatever the server on the other end does (hang
before the headers, drip bytes, stream forever, answer with garbage)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT = 5.0
MAX_BODY = 4 << 20


_CLIENTS: dict[tuple[bool, int], object] = {}


def _client(tls: bool):
    """One client per session (per TLS need): building one loads the CA
    bundle (~0.1 s), which plain-HTTP probes of local servers never need."""
    import httpx

    # Keyed by the httpx module too: a process that re-imports httpx (pytest's
    # own pytester does, between in-process sessions) must not mix a client of
    # the old module with Timeout objects of the new one.
    key = (tls, id(httpx))
    if key not in _CLIENTS:
        _CLIENTS[key] = httpx.Client(follow_redirects=False, trust_env=False, verify=tls)
    return _CLIENTS[key]


@dataclass
class Reply:
    """What a probe got back. ``problem`` is None for a readable JSON answer,
    else one of ``unreachable``, ``timeout``, ``too-large``, ``invalid-json``,
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
) -> Reply:
    import httpx  # only live probes pay for it

    start = time.monotonic()
    deadline = start + timeout
    reply = Reply(url)
    try:
        client = _client(url.startswith("https:"))
        with client.stream(method, url, headers=headers, json=body, timeout=httpx.Timeout(timeout)) as resp:
            reply.status = resp.status_code
            parts, size = [], 0
            for chunk in resp.iter_bytes():
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
    except (httpx.HTTPError, OSError, ValueError) as exc:
        reply.problem, reply.detail = "unreachable", f"{type(exc).__name__}: {exc}"
    reply.elapsed_s = time.monotonic() - start
    if reply.problem:
        return reply
    reply.text = raw[:2000].decode("utf-8", "replace")
    try:
        reply.data = json.loads(raw) if raw.strip() else None
    except ValueError as exc:
        reply.problem, reply.detail = "invalid-json", f"the answer is not JSON ({exc}): {reply.text[:120]!r}"
    return reply
