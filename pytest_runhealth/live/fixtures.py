"""The live probes' settings and services, behind the ``gpu``, ``lmstudio``
and ``processes`` fixtures (defined in ``plugin.py``; options in ``options.py``).

Each setting resolves CLI option, then ini key, then environment, then
default; a service named by the user is *requested*, and its checks fail
when it is down instead of being skipped."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..safety.safeio import mtime
from .http import DEFAULT_TIMEOUT

LIVE = pytest.StashKey["LiveServices"]()
LMSTUDIO_LOG_NAMES = ("lmstudio", "lm-studio", "lm_studio")


def setting(config: pytest.Config, option: str, ini: str, env: str | None = None) -> tuple[str | None, str]:
    """(value, where it came from): CLI, then ini, then environment."""
    value = config.getoption(option, None)
    if value not in (None, ""):
        return str(value), f"--{option.replace('_', '-')}"
    value = config.getini(ini)
    if value not in (None, ""):
        return str(value), f"ini {ini}"
    if env and os.environ.get(env):
        return os.environ[env], f"${env}"
    return None, ""


def probe_timeout(config: pytest.Config) -> float:
    value, where = setting(config, "runhealth_probe_timeout", "runhealth_probe_timeout")
    if value is None:
        return DEFAULT_TIMEOUT
    try:
        t = float(value)
    except ValueError:
        raise pytest.UsageError(f"{where}: probe timeout must be a number of seconds, not {value!r}") from None
    if not t > 0:
        raise pytest.UsageError(f"{where}: probe timeout must be above 0 s, not {value!r}")
    return t


FOUND_IN_RUN_DIR = "found in the run dir"  # the one server log read confined to the run dir: the run dir chose it


class LMStudio:
    """The ``lmstudio`` fixture: the client, where its settings came from, and
    the server log.

    >>> lmstudio.client.loaded_models()[0]   # doctest: +SKIP
    [LoadedModel(id='qwen3-vl-8b', source='/api/v1/models', detail='...')]
    """

    def __init__(self, config: pytest.Config) -> None:
        from .lmstudio import DEFAULT_URL, LMStudioClient

        url, self.url_source = setting(config, "lmstudio_url", "runhealth_lmstudio_url", "LMSTUDIO_URL")
        self.requested = url is not None
        token = os.environ.get("LM_API_TOKEN") or None
        self.timeout = probe_timeout(config)
        self.client = LMStudioClient(url or DEFAULT_URL, token, self.timeout)
        log, self.log_source = setting(config, "lmstudio_log", "runhealth_lmstudio_log")
        self.log_path = Path(log).expanduser() if log else None
        self.judge_model, _ = setting(config, "lmstudio_judge_model", "runhealth_lmstudio_judge_model")
        self._logs: dict[Path, Any] = {}
        self.config = config

    @property
    def url(self) -> str:
        return self.client.base_url

    def down(self) -> str | None:
        """Why the server cannot be used (None when ``GET /v1/models`` answered)."""
        from .lmstudio import api_error

        reply = self.client.models()
        if reply.problem:
            return f"LM Studio at {self.url} {reply.problem}: {reply.detail}"
        err = api_error(reply)
        if err:
            return f"LM Studio at {self.url} refused GET /v1/models: {err[1]}"
        if reply.status and reply.status >= 400:
            return f"LM Studio at {self.url} answered GET /v1/models with HTTP {reply.status}"
        return None

    def require(self, ctx) -> None:
        """Skip (not asked for) or fail (asked for) when the server is down;
        the failure is RH401's diagnosis, repeated where the server is needed."""
        reason = self.down()
        if reason is None:
            return None
        if not self.requested:
            ctx.skip(f"{reason} (not configured: pass --lmstudio-url or set LMSTUDIO_URL to require it)")
        return ctx.fail(
            "infra",
            "lmstudio-unreachable",
            f"{reason}; it was named by {self.url_source}, so this check cannot be judged.",
            [ctx.evidence(self.url + "/v1/models", None, reason)],
            fix="start LM Studio's server (`lms server start`) or correct --lmstudio-url; see RH401.",
        )

    # -- the server log ----------------------------------------------------------
    def log_for(self, run_dir) -> tuple[Path | None, str]:
        """The server log that speaks for ``run_dir``, and why that one:
        the one named by the user, the newest kept in the run dir (a path
        naming lmstudio / lm-studio / lm_studio), or (for a sweep,
        or when LM Studio was named) the newest in ~/.lmstudio/server-logs/."""
        from .lmstudio_log import newest_log

        if self.log_path is not None:
            return self.log_path, self.log_source
        kept = [
            f
            for f in run_dir.walk.files
            if f.suffix in (".log", ".txt") and any(n in run_dir.rel(f).lower() for n in LMSTUDIO_LOG_NAMES)
        ]
        if kept:
            return max(kept, key=mtime), FOUND_IN_RUN_DIR
        if (run_dir.is_sweep or self.requested) and self._local(run_dir):
            newest = newest_log()
            if newest is not None:
                return newest, "newest in ~/.lmstudio/server-logs"
        return None, ""

    def _local(self, run_dir) -> bool:
        """This machine's ~/.lmstudio logs speak only for a run on this machine (issue 18)."""
        from ..features.locality import local_reason

        return local_reason(run_dir, self.config, self) is not None

    def server_log(self, run_dir):
        from .lmstudio_log import ServerLog, read_server_log

        path, why = self.log_for(run_dir)
        if path is None:
            return None
        if path not in self._logs:
            sizes = getattr(run_dir, "sizes", None)
            if sizes is not None and why != FOUND_IN_RUN_DIR:  # named by the user or the plugin's own choice
                sizes = sizes.anywhere()
            if not path.exists():
                self._logs[path] = ServerLog(path, [], [], error=f"{path} does not exist")
            else:
                self._logs[path] = read_server_log(path, sizes)
        return self._logs[path]


@dataclass
class LiveServices:
    """One per session, so checks and RH101's extra evidence share the reads."""

    config: pytest.Config
    _gpu: Any = None
    _lmstudio: LMStudio | None = None
    _processes: Any = None
    orchestrator: dict[str, Any] = field(default_factory=dict)

    @property
    def gpu(self):
        if self._gpu is None:
            from .gpu import Gpu

            backend = self.config.hook.pytest_runhealth_gpu_backend(config=self.config)
            self._gpu = Gpu(backend)
        return self._gpu

    @property
    def lmstudio(self) -> LMStudio:
        if self._lmstudio is None:
            self._lmstudio = LMStudio(self.config)
        return self._lmstudio

    @property
    def processes(self):
        if self._processes is None:
            from ..readers.procs import Processes

            self._processes = Processes()
        return self._processes


def live_services(config: pytest.Config) -> LiveServices:
    if LIVE not in config.stash:
        config.stash[LIVE] = LiveServices(config)
    return config.stash[LIVE]


def server_url(config: pytest.Config) -> None:
    """An LM Studio address that cannot be a URL (``http://[::1``) is a usage
    mistake, said once now, not "the check itself raised InvalidURL" later."""
    from urllib.parse import urlsplit

    value, where = setting(config, "lmstudio_url", "runhealth_lmstudio_url", "LMSTUDIO_URL")
    if value is None:
        return
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises ValueError for a port out of range)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {value!r} is not a URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise pytest.UsageError(f"{where}: {value!r} is not an http(s)://host[:port] URL")
