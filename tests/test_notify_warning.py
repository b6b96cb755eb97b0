"""``--notify`` to an endpoint that answers 302 or 303: the one warning reaches
stderr every time (issue 36).

It used to be printed by the sending thread. The watch runs its pytest
sessions in its own process, and while one runs ``sys.stderr`` is pytest's
capture: a post that failed during the next tick's session (about half the
runs) warned into the capture, and nobody saw it. Real HTTP servers on
127.0.0.1; the tests wait on events (the post arriving, the failure
counted), never on a sleep."""

from __future__ import annotations

import contextlib
import http.server
import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

TRAINER = Path(__file__).with_name("watch_trainer.py")


class Redirecting:
    """A webhook that answers every POST with ``code`` and a Location; ``posted`` is set on the first."""

    def __init__(self, code: int) -> None:
        outer = self
        self.posted = threading.Event()
        self.requests: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _any(self):
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                outer.requests.append(self.command)
                self.send_response(code)
                self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
                outer.posted.set()

            do_GET = do_POST = _any

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/services/T000/B000/secret-path"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _until(condition, what: str, deadline_s: float = 60.0) -> None:
    """A polled condition with a generous deadline (the deadline only ends a broken run)."""
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("code", [302, 303])
def test_the_warning_reaches_stderr_when_the_post_fails_while_a_session_captures(capsys, code):
    from pytest_runhealth.watch.notify import Notifier

    hook = Redirecting(code)
    try:
        notifier = Notifier([hook.url], [])
        session_capture = io.StringIO()
        with contextlib.redirect_stderr(session_capture):  # what an in-process pytest session does to sys.stderr
            notifier.send("RH201 trainer-error [r1] failed")
            assert hook.posted.wait(60)
            _until(lambda: notifier.failures == 1, "the failure to be counted")
        notifier.report()  # the watch does this after each tick, outside its session
        notifier.close(wait_s=10)
    finally:
        hook.close()
    err = capsys.readouterr().err
    assert session_capture.getvalue() == ""  # nothing was said into the session's capture
    assert str(code) in err and "secret-path" not in err and err.count("\n") == 1, err
    assert hook.requests == ["POST"]  # no body-less GET followed the redirect


@pytest.mark.slow
def test_a_real_watch_says_the_redirect_once_on_stderr(tmp_path):
    """End to end: the watch's own loop, in-process sessions and all, on a run that trains for a
    few ticks. (This machine did not reproduce the lost warning here in three tries; the test above
    reproduces its mechanism deterministically.)"""
    run = tmp_path / "run"
    trainer = subprocess.Popen(
        [sys.executable, str(TRAINER), str(run), "finish", "--steps", "60", "--dt", "0.05"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    hook = Redirecting(303)
    try:
        _until(lambda: (run / "logs").is_dir(), "the trainer's first files")
        res = subprocess.run(
            [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(run), "--every", "0.2", "--notify", hook.url],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        trainer.kill()
        trainer.wait(10)
        hook.close()
    assert hook.posted.is_set(), res.stdout + res.stderr
    warnings = [line for line in res.stderr.splitlines() if "notification to" in line]
    assert len(warnings) == 1 and "303" in warnings[0], res.stderr
    assert "secret-path" not in res.stderr
