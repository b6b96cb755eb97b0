"""Notifications: each change the watch prints, also sent elsewhere.

``--notify URL`` posts ``{"text": message}`` (Slack and Discord incoming
webhooks accept that body); ``--notify-command CMD`` runs CMD through the
shell (``/bin/sh -c CMD``: pipes, redirections and quotes work as typed,
``cat >> notes.txt``) with the message on stdin, ending in a newline
(``notify-send``, ntfy, mail). The command is the user's own, from the
command line, never from a run dir. Every message is redacted
first, like all evidence. Sending happens on one background thread with a
short timeout and a bounded queue: a hung, slow or failing endpoint costs
the watch nothing, never blocks a tick and never ends the watch; failures
are counted and said once on stderr. Each target has its own thread, so
a hung webhook delays only its own messages.

A sending thread never prints: the watch runs its pytest sessions in its own
process, and while one runs ``sys.stderr`` is pytest's capture, so a warning
printed from a thread at that moment (a 302 answered during the next tick's
session: about half the time) went into the capture and was never seen. The
thread records it; :meth:`Notifier.report` prints it from the watch's own
thread between sessions (after each tick, and at :meth:`Notifier.close`)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.request

from ..safety.redact import redact
from ..safety.shown import shown

TIMEOUT_S = 5.0
QUEUE_MAX = 100  # messages waiting; beyond it the oldest are dropped (and counted)


class Notifier:
    def __init__(self, urls: list[str], commands: list[str], timeout_s: float = TIMEOUT_S) -> None:
        self.urls = list(urls)
        self.commands = list(commands)
        self.timeout_s = timeout_s
        self.sent = 0
        self.failures = 0
        self.dropped = 0
        self._warned: set[str] = set()
        self._said: list[str] = []  # warnings of the sending threads, printed by report() from the watch's thread
        self._said_lock = threading.Lock()
        self._lanes: list[tuple[queue.Queue, threading.Thread]] = []
        self._closed = False
        targets = [(u, self._post) for u in self.urls] + [(c, self._run) for c in self.commands]
        for where, how in targets:
            q: queue.Queue[str | None] = queue.Queue(maxsize=QUEUE_MAX)
            t = threading.Thread(target=self._work, args=(q, where, how), name="runhealth-notify", daemon=True)
            t.start()
            self._lanes.append((q, t))

    def send(self, text: str) -> None:
        """Queue one message for every target; returns at once."""
        msg = "\n".join(shown(line) for line in text.split("\n"))  # redacted, control characters visible
        for q, _ in self._lanes:
            while True:
                try:
                    q.put_nowait(msg)
                    break
                except queue.Full:
                    try:
                        q.get_nowait()
                        self.dropped += 1
                        if self.dropped == 1:  # a slow endpoint loses messages: said once, not silently
                            print(
                                "pytest-runhealth watch: a notification endpoint is too slow to keep up; "
                                "the oldest queued message was dropped (the count is given at the end)",
                                file=sys.stderr,
                            )
                    except queue.Empty:
                        pass

    def close(self, wait_s: float = TIMEOUT_S) -> None:
        """Let queued messages go out for at most ``wait_s`` in all; a hung
        endpoint is left behind (its thread is a daemon)."""
        import time

        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + wait_s
        for q, _ in self._lanes:
            try:
                q.put_nowait(None)
            except queue.Full:
                pass
        for _, t in self._lanes:
            t.join(max(0.0, deadline - time.monotonic()))
        self.report()
        unsent = sum(q.qsize() for q, _ in self._lanes)
        if self.dropped or unsent > len(self._lanes):
            print(
                f"pytest-runhealth watch: {self.dropped} notification(s) dropped and about {unsent} not sent "
                "before the end (a slow or hung endpoint)",
                file=sys.stderr,
            )

    def _work(self, q: queue.Queue, where: str, how) -> None:
        while True:
            msg = q.get()
            if msg is None:
                return
            self._attempt(where, lambda m=msg: how(where, m))

    def _attempt(self, where: str, send) -> None:
        try:
            send()
            self.sent += 1
        except Exception as exc:  # noqa: BLE001 - a notification must never end the watch
            self.failures += 1
            if where not in self._warned:
                self._warned.add(where)
                with self._said_lock:
                    self._said.append(
                        f"pytest-runhealth watch: notification to {_where(where)} failed "
                        f"({type(exc).__name__}: {redact(str(exc))[:200]}); the watch goes on"
                    )

    def report(self) -> None:
        """Print, from the caller's thread, what the sending threads had to say
        since the last call (each once): called between the watch's sessions,
        when ``sys.stderr`` is the terminal's and not a session's capture."""
        with self._said_lock:
            said, self._said = self._said, []
        for line in said:
            print(line, file=sys.stderr, flush=True)

    def _post(self, url: str, msg: str) -> None:
        body = json.dumps({"text": msg}).encode()
        req = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "pytest-runhealth"},
        )
        # No redirect is followed: urllib would turn a 302/303 into a GET without the
        # message, and the message would be lost without a word. A 3xx is a failure.
        opener = urllib.request.build_opener(_NoRedirect)
        with opener.open(req, timeout=self.timeout_s) as resp:
            resp.read(4096)
            if resp.status >= 300:
                raise urllib.error.HTTPError(url, resp.status, "not accepted", resp.headers, None)

    def _run(self, cmd: str, msg: str) -> None:
        proc = subprocess.run(
            cmd,
            shell=True,  # the user's own command line, as typed (docs/watching.md)
            input=(msg + "\n").encode(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=self.timeout_s * 2,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"exited {proc.returncode}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def, override]
        raise urllib.error.HTTPError(
            req.full_url, code, f"answered {code} (a redirect; not followed: it would drop the message)", headers, fp
        )


def _where(target: str) -> str:
    """A webhook named by its host only: the path of a Slack or Discord
    webhook URL is its secret."""
    from urllib.parse import urlsplit

    parts = urlsplit(target)
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.hostname}{':' + str(parts.port) if parts.port else ''}/..."
    return redact(target.split()[0] if target.strip() else target)  # a command by its first word
