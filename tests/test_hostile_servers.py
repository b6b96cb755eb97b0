"""Every live probe against servers that misbehave on purpose (issue 8): one
that never answers, one that drips a byte at a time (in its headers or its
body), one that sends 10 GB, one that redirects to another host, one that
resets the connection, one with a certificate nobody signed. Each probe must
end at its timeout or its size cap with a reason, follow no redirect, retry
a bounded number of times, and verify TLS by default.

The servers are raw sockets on 127.0.0.x: every loop in them is bounded by a
lifetime and a stop event, and they stop themselves."""

from __future__ import annotations

import functools
import gzip
import shutil
import socket
import ssl
import subprocess
import threading
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from live_helpers import run_health, warm_imports  # noqa: F401  (fixture)

from pytest_runhealth.evaluation.client import EvalClient, FetchError
from pytest_runhealth.evaluation.settings import EvalSettings
from pytest_runhealth.live.http import request_json

warm_imports()

TEN_GB = 10 << 30
OK_BODY = b'{"data": [], "object": "list"}'


class Hostile:
    """A TCP server that misbehaves one way, on ``host`` (a 127.0.0.x)."""

    def __init__(
        self,
        behaviour: str,
        host: str = "127.0.0.1",
        lifetime_s: float = 120.0,
        drip_s: float = 0.25,
        location: str = "",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.behaviour = behaviour
        self.host = host
        self.drip_s = drip_s
        self.location = location
        self.tls = tls
        self.deadline = time.monotonic() + lifetime_s
        self.stopping = threading.Event()
        self.hits = 0
        self.sent = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def live(self) -> bool:
        return not self.stopping.is_set() and time.monotonic() < self.deadline

    def __enter__(self) -> Hostile:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=5)
        self.sock.close()

    def _accept(self) -> None:
        while self.live():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(1.0)
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)  # the client refuses the handshake
            request = b""
            while b"\r\n\r\n" not in request and len(request) < 65536 and self.live():
                try:
                    got = conn.recv(4096)
                except TimeoutError:
                    continue
                if not got:
                    return
                request += got
            self.hits += 1
            getattr(self, "_" + self.behaviour.replace("-", "_"))(conn)
        except (OSError, ssl.SSLError):
            pass  # the client hung up, as it should
        finally:
            try:
                conn.close()
            except OSError:
                pass

    # -- behaviours ---------------------------------------------------------------------
    def _ok(self, conn) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(OK_BODY), OK_BODY)
        )

    def _hang(self, conn) -> None:
        self.stopping.wait(max(0.0, self.deadline - time.monotonic()))

    def _drip(self, conn, data: bytes) -> None:
        for i in range(len(data)):
            if not self.live():
                return
            conn.sendall(data[i : i + 1])
            self.sent += 1
            self.stopping.wait(self.drip_s)

    def _drip_headers(self, conn) -> None:
        self._drip(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Padding: " + b"p" * 4000)

    def _drip_body(self, conn) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        self._drip(conn, b'{"data": [' + b" " * 99990)

    def _flood(self, conn) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[" % TEN_GB)
        block = b"0," * (128 << 10)
        while self.live() and self.sent < TEN_GB:
            conn.sendall(block)  # BrokenPipe/ConnectionReset once the client stops reading
            self.sent += len(block)

    def _gzip_bomb(self, conn) -> None:
        body = bomb()
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip, gzip\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        self.sent += len(body)

    def _redirect(self, conn) -> None:
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % self.location.encode())

    def _reset(self, conn) -> None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory) -> ssl.SSLContext:
    if not shutil.which("openssl"):
        pytest.skip("openssl not installed: no certificate to refuse")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "cert.pem", d / "key.pem")
    return ctx


def eval_client(url: str, **kw) -> EvalClient:
    settings = EvalSettings(server=url, connect_timeout_s=1.0, read_timeout_s=1.0, retries=2, retry_backoff_s=0.0)
    for k, v in kw.items():
        setattr(settings, k, v)
    return EvalClient(settings, sleep=lambda s: None)


def timed(fn):
    start = time.monotonic()
    try:
        return fn(), time.monotonic() - start
    except FetchError as exc:
        return exc, time.monotonic() - start


# -- the live probe client (LM Studio, orchestrator) ---------------------------------------------
@pytest.mark.parametrize("behaviour", ["hang", "drip-headers", "drip-body"])
def test_probe_ends_at_its_timeout(behaviour):
    with Hostile(behaviour) as srv:
        reply = request_json("GET", srv.url + "/v1/models", timeout=1.0)
        gave_up_first = srv.live()  # the client ended while the server still misbehaved: no clock raced
    assert reply.problem == "timeout", (reply.problem, reply.detail)
    assert gave_up_first


def test_probe_stops_a_ten_gigabyte_answer_at_the_cap():
    with Hostile("flood") as srv:
        reply = request_json("GET", srv.url + "/api/session", timeout=30.0, max_bytes=1 << 20)
        srv.stopping.wait(0.2)
    assert reply.problem == "too-large" and "cap" in reply.detail
    assert srv.sent < 64 << 20, f"the server pushed {srv.sent >> 20} MiB before the client hung up"


def test_probe_does_not_follow_a_redirect_to_another_host():
    with (
        Hostile("ok", host="127.0.0.2") as elsewhere,
        Hostile("redirect", location="http://127.0.0.2:0/v1/models") as srv,
    ):
        srv.location = f"{elsewhere.url}/v1/models"
        reply = request_json("GET", srv.url + "/v1/models", timeout=2.0)
    assert reply.problem == "redirect" and not reply.ok
    assert elsewhere.url in reply.detail and "not followed" in reply.detail
    assert elsewhere.hits == 0


def test_probe_reports_a_reset_connection():
    with Hostile("reset") as srv:
        reply = request_json("GET", srv.url + "/v1/models", timeout=2.0)
    assert reply.problem == "unreachable" and reply.detail
    assert srv.hits == 1  # asked once: no retry loop


def test_probe_verifies_tls_by_default(self_signed):
    with Hostile("ok", tls=self_signed) as srv:
        reply = request_json("GET", srv.url + "/v1/models", timeout=3.0)
    assert reply.problem == "unreachable"
    assert "CERTIFICATE_VERIFY_FAILED" in reply.detail


# -- the evaluation server client ----------------------------------------------------------------
@pytest.mark.parametrize("behaviour", ["hang", "drip-headers", "drip-body"])
def test_eval_client_ends_each_attempt_at_connect_plus_read_timeout(behaviour):
    with Hostile(behaviour) as srv, eval_client(srv.url) as c:
        err, _ = timed(lambda: c.get("experience_request", id="xr-1"))
        gave_up_first = srv.live()  # the client ended while the server still misbehaved: no clock raced
    assert isinstance(err, FetchError) and ("timed out" in str(err) or "gave up" in str(err)), err
    assert err.attempts == 1 and srv.hits == 1  # a timeout is not retried
    assert gave_up_first


def test_eval_client_stops_a_ten_gigabyte_answer_at_the_cap():
    with Hostile("flood") as srv, eval_client(srv.url, read_timeout_s=30.0, max_response_bytes=1 << 20) as c:
        err, _ = timed(lambda: c.get("experience_request", id="xr-1"))
        srv.stopping.wait(0.2)
    assert isinstance(err, FetchError) and "cap" in str(err)
    assert srv.sent < 64 << 20


def test_eval_client_does_not_follow_a_redirect_to_another_host():
    with Hostile("ok", host="127.0.0.2") as elsewhere, Hostile("redirect") as srv:
        srv.location = f"{elsewhere.url}/v2/experience-requests/xr-1"
        with eval_client(srv.url) as c:
            err, _ = timed(lambda: c.get("experience_request", id="xr-1"))
    assert isinstance(err, FetchError) and err.status == 302
    assert "not followed" in str(err) and elsewhere.url in str(err)
    assert elsewhere.hits == 0 and srv.hits == 1


def test_eval_client_reset_connection_is_one_attempt():
    with Hostile("reset") as srv, eval_client(srv.url) as c:
        err, _ = timed(lambda: c.get("experience_request", id="xr-1"))
    assert isinstance(err, FetchError) and srv.hits == 1


def test_eval_client_verifies_tls_by_default(self_signed):
    with Hostile("ok", tls=self_signed) as srv, eval_client(srv.url) as c:
        err, _ = timed(lambda: c.get("experience_request", id="xr-1"))
    assert isinstance(err, FetchError) and "CERTIFICATE_VERIFY_FAILED" in str(err)


# -- whole sessions: the probe's end becomes a finding -------------------------------------------
def test_dripping_lmstudio_is_a_finding_not_a_hang(tmp_path, run_health):
    run = tmp_path / "run"
    run.mkdir()
    with Hostile("drip-body") as srv:
        res = run_health(run, args=("--lmstudio-url", srv.url, "--runhealth-probe-timeout", "1", "-k", "RH401"))
        gave_up_first = srv.live()  # the session ended while the server still dripped: no clock raced
    r = res.result_of("RH401")
    assert (r["outcome"], r["cause"]) == ("failed", "lmstudio-unreachable")
    assert "did not answer in time" in r["summary"]
    assert gave_up_first


def test_redirecting_orchestrator_is_a_finding(tmp_path, run_health):
    sweep = Path(__file__).resolve().parent.parent / "examples" / "sweep-healthy"
    with Hostile("ok", host="127.0.0.2") as elsewhere, Hostile("redirect") as srv:
        srv.location = f"{elsewhere.url}/api/session"
        res = run_health(sweep, args=("--orchestrator-url", srv.url, "-k", "RH109"))
    r = res.result_of("RH109")
    assert (r["outcome"], r["cause"]) == ("failed", "orchestrator-unreachable")
    assert "not followed" in r["summary"] and elsewhere.hits == 0


def test_flooding_eval_server_is_a_finding(tmp_path, run_health):
    config = tmp_path / "runhealth.yaml"
    config.write_text(
        "eval:\n  connect_timeout_s: 1\n  read_timeout_s: 1\n  retries: 1\n  retry_backoff_s: 0\n"
        "  max_response_bytes: 1048576\n"
    )
    with Hostile("flood") as srv:
        res = run_health(
            args=("--eval-server", srv.url, "--eval-request", "xr-1", "--runhealth-config", str(config), "-k", "RH50")
        )
    failed = [r for r in res.results() if r["outcome"] == "failed"]
    assert failed and all("the check itself raised" not in r["summary"] for r in failed)
    assert any("cap" in r["summary"] for r in failed), [r["summary"] for r in failed]
    assert srv.hits <= 2  # one attempt per request: the cap is not retried


# -- decompression bombs (#14 item 3) ---------------------------------------------------------------
BOMB_DECODED = 256 << 20


@functools.lru_cache(maxsize=1)
def bomb() -> bytes:
    """256 MiB of zeros, gzip inside gzip: a few kB on the wire."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    layer1 = b"".join(inner.compress(block) for _ in range(BOMB_DECODED >> 20)) + inner.flush()
    return gzip.compress(layer1, 9)


def peak_bytes(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_probe_counts_decoded_bytes_of_stacked_gzip():
    with Hostile("gzip-bomb") as srv:
        reply, peak = peak_bytes(lambda: request_json("GET", srv.url + "/api/session", timeout=30.0, max_bytes=1 << 20))
    assert len(bomb()) < 1 << 20 < BOMB_DECODED
    assert reply.problem == "too-large" and "cap" in reply.detail, (reply.problem, reply.detail)
    assert peak < 16 << 20, f"decoding held {peak >> 20} MiB for a 1 MiB cap"


def test_eval_client_counts_decoded_bytes_of_stacked_gzip():
    with Hostile("gzip-bomb") as srv, eval_client(srv.url, read_timeout_s=30.0, max_response_bytes=1 << 20) as c:
        (err, _elapsed), peak = peak_bytes(lambda: timed(lambda: c.get("experience_request", id="xr-1")))
    assert isinstance(err, FetchError) and "cap" in str(err), err
    assert peak < 16 << 20, f"decoding held {peak >> 20} MiB for a 1 MiB cap"


def test_probe_still_reads_an_honest_gzip_answer():
    body = gzip.compress(OK_BODY)

    class Gz(Hostile):
        def _ok(self, conn) -> None:
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )

    with Gz("ok") as srv:
        reply = request_json("GET", srv.url + "/v1/models", timeout=5.0)
    assert reply.ok and reply.data == {"data": [], "object": "list"}, (reply.problem, reply.detail)


# -- Retry-After: nan, and the session's retry budget (#14 low items) -----------------------------------
class _Busy(Hostile):
    def __init__(self, retry_after: str, **kw) -> None:
        super().__init__("ok", **kw)
        self.retry_after = retry_after

    def _ok(self, conn) -> None:
        conn.sendall(
            b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %s\r\nContent-Length: 0\r\n\r\n"
            % self.retry_after.encode()
        )


def test_retry_after_nan_is_no_delay_value_and_no_crash():
    slept = []
    with _Busy("nan") as srv:
        settings = EvalSettings(
            server=srv.url, connect_timeout_s=1.0, read_timeout_s=1.0, retries=2, retry_backoff_s=0.01
        )
        with EvalClient(settings, sleep=slept.append) as c:
            err, _ = timed(lambda: c.get("experience_request", id="xr-1"))
    assert isinstance(err, FetchError) and "503" in str(err), err
    assert slept == [0.01, 0.02]  # the backoff, not nan


def test_retries_stop_when_the_session_budget_is_spent():
    slept = []
    with _Busy("30") as srv:
        settings = EvalSettings(
            server=srv.url, connect_timeout_s=1.0, read_timeout_s=1.0, retries=3, retry_backoff_s=0.0
        )
        with EvalClient(settings, sleep=slept.append) as c:
            for _ in range(3):
                timed(lambda: c.get("experience_request", id="xr-1"))
    from pytest_runhealth.evaluation.client import MAX_RETRY_BUDGET_S

    assert sum(slept) <= MAX_RETRY_BUDGET_S < 3 * 3 * 30
