"""The evaluation server, read over HTTP with the runbook's discipline:
connect and read timeouts, retries only for the transient statuses
(404/425/429/5xx) and only so many, and a cap on how much of an answer is read.

httpx is imported when a client is built, never at plugin load."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..live.bounded_decode import ACCEPT_ENCODING
from .jsondoc import loads
from .model import parse_time
from .settings import DEFAULT_RETRY_BUDGET_S, EvalSettings

MAX_RETRY_AFTER_S = 30.0
MAX_RETRY_BUDGET_S = DEFAULT_RETRY_BUDGET_S  # the most one session waits on Retry-After and backoff, all together


def is_transient(status: int) -> bool:
    return status in (404, 425, 429) or 500 <= status <= 599


class FetchError(Exception):
    """The server could not give an answer; ``status`` is the last HTTP status, if any."""

    def __init__(self, url: str, message: str, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(f"GET {url}: {message}")
        self.url = url
        self.status = status
        self.attempts = attempts


@dataclass
class Answer:
    url: str
    status: int
    data: Any
    sha256: str
    date: datetime | None  # the server's clock (Date header)


class EvalClient:
    """``client.get("experience_request", id="xr-1")`` → :class:`Answer`.

    Route names are the keys of ``settings.routes``, so a drifted server is a
    config change, not a code change."""

    def __init__(self, settings: EvalSettings, transport=None, sleep: Callable[[float], None] = time.sleep) -> None:
        import httpx

        if not settings.server:
            raise ValueError("no evaluation server configured (--eval-server URL)")
        self.settings = settings
        self.sleep = sleep
        # All retries of this client (one per session) together: the settings' budget (a watch's
        # tick passes its interval down, so a ``Retry-After: 1e308`` never holds the watch).
        self.retry_budget_s = max(0.0, settings.retry_budget_s)
        headers = {"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
        if settings.token:
            headers["Authorization"] = f"Bearer {settings.token}"
        self._httpx = httpx
        self.http = httpx.Client(
            base_url=settings.server,
            headers=headers,
            timeout=httpx.Timeout(settings.read_timeout_s, connect=settings.connect_timeout_s),
            transport=transport,
            follow_redirects=False,
            # Connections are not reused, so the watchdog sees every socket (live/http.py).
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> EvalClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def url(self, route: str, **params: str) -> str:
        template = self.settings.routes[route]
        return template.format(**{k: _quote(str(v)) for k, v in params.items()})

    def get(self, route: str, **params: str) -> Answer:
        path = self.url(route, **params)
        full = f"{self.settings.server}{path}"
        attempts = self.settings.retries + 1
        last_status: int | None = None
        for attempt in range(1, attempts + 1):
            try:
                status, raw, headers = self._get_capped(path)
            except _Cut as cut:
                raise FetchError(
                    full,
                    f"no complete answer within {cut.seconds:g} s (connect + read timeout); gave up",
                    None,
                    attempt,
                ) from None
            except self._httpx.TimeoutException as exc:
                raise FetchError(full, f"timed out ({type(exc).__name__})", None, attempt) from None
            except self._httpx.HTTPError as exc:
                raise FetchError(full, f"{type(exc).__name__}: {exc}", None, attempt) from None
            last_status = status
            if 300 <= status < 400:
                where = headers.get("location", "(no Location)")[:200]
                raise FetchError(
                    full,
                    f"HTTP {status} to {where}; redirects are not followed (set --eval-server "
                    f"to the address that answers)",
                    status,
                    attempt,
                )
            if status == 200:
                try:
                    data = loads(raw.decode("utf-8", "replace")) if raw.strip() else None
                except (ValueError, RecursionError) as exc:  # RecursionError: nested past the stack
                    raise FetchError(full, f"answer is not JSON: {exc}", status, attempt) from None
                return Answer(full, status, data, hashlib.sha256(raw).hexdigest(), parse_time(headers.get("date")))
            if not is_transient(status) or attempt == attempts:
                break
            delay = self._delay(attempt, headers.get("retry-after"))
            if delay > self.retry_budget_s:  # the session's waiting is bounded, not each request's alone
                attempts = attempt
                break
            self.retry_budget_s -= delay
            self.sleep(delay)
        tried = f" after {attempts} attempts" if attempts > 1 and is_transient(last_status or 0) else ""
        raise FetchError(full, f"HTTP {last_status}{tried}", last_status, attempts)

    def _get_capped(self, path: str) -> tuple[int, bytes, Any]:
        """One attempt, bounded in bytes and in wall-clock time (connect +
        read timeout in all, however slowly the server drips)."""
        import zlib

        from ..live.bounded_decode import UnsupportedEncoding, decoded_chunks
        from ..live.http import Watchdog

        cap = self.settings.max_response_bytes
        dog = Watchdog(self.settings.connect_timeout_s + self.settings.read_timeout_s)
        try:
            with dog, self.http.stream("GET", path, extensions={"trace": dog.trace}) as resp:
                parts, size = [], 0
                # Decoded in bounded pieces: the cap counts decoded bytes (live/bounded_decode.py).
                for chunk in decoded_chunks(resp.iter_raw(), resp.headers.get("content-encoding")):
                    size += len(chunk)
                    if size > cap:
                        raise self._httpx.HTTPError(f"answer larger than the {cap}-byte cap (max_response_bytes)")
                    if dog.fired:
                        raise _Cut(dog.seconds)
                    parts.append(chunk)
                return resp.status_code, b"".join(parts), resp.headers
        except (UnsupportedEncoding, zlib.error) as exc:
            raise self._httpx.DecodingError(f"the answer could not be decoded: {exc}") from None
        except (self._httpx.HTTPError, OSError):
            if dog.fired:
                raise _Cut(dog.seconds) from None
            raise

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        base = self.settings.retry_backoff_s * (2 ** (attempt - 1))
        if retry_after:
            try:
                seconds = float(retry_after)
            except ValueError:
                seconds = math.nan
            if not math.isnan(seconds):  # "nan" parses as a float; it is not a delay
                return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
        return base


class _Cut(Exception):
    """The watchdog ended an attempt at its wall-clock deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"cut after {seconds:g} s")
        self.seconds = seconds


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")
