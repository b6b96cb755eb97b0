"""Is the run on this machine? Probes of the local machine (GPUs, the lms
CLI, ~/.lmstudio logs, processes) say something about a run only where it
runs here; a run dir copied from another machine, or a server log passed
with ``--lmstudio-log``, says nothing about this one.

A run is local when something shows it: a pid file whose process is running
here, an LM Studio URL on localhost named by the user, ``BRACKET_LMS_BIN``
set in this environment, or a ``-m prelaunch`` session preparing it here (for
the lms CLI: a sweep whose ledger names ``judge_method: lmstudio``)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}
MAX_PID_RUNS = 256  # pid files looked at per run dir: a live sweep has few running at once


def is_local_url(url: str | None) -> bool:
    if not url:
        return False
    host = urlsplit(url if "://" in url else "http://" + url).hostname or ""
    return host.lower() in LOCAL_HOSTS or host.startswith("127.")


def sweep_judges_with_lmstudio(run_dir) -> bool:
    """The sweep's ledger names ``judge_method: lmstudio`` (on a row or in its config knobs)."""
    ledger = run_dir.ledger if run_dir.is_sweep else None
    for row in ledger or ():
        config = row.get("config")
        for source in (row.slim, config if isinstance(config, dict) else {}):  # a method is a string: in slim
            method = source.get("judge_method") or source.get("judge_backend")
            if isinstance(method, str) and method.strip().lower() == "lmstudio":
                return True
    return False


def local_reason(run_dir, config, lmstudio=None, *, prelaunch_any: bool = False) -> str | None:
    """Why the run is taken to be on this machine, or None without evidence.

    ``lmstudio``: the session's LM Studio service (``live.fixtures.LMStudio``),
    passed down by the caller. ``prelaunch_any``: any run dir of a
    ``-m prelaunch`` session is being prepared here (the GPUs it is about to
    use are this machine's)."""
    return run_dir.cached(("locality", prelaunch_any), lambda: _reason(run_dir, config, lmstudio, prelaunch_any))


def _reason(run_dir, config, lm, prelaunch_any: bool) -> str | None:
    from .prelaunch_summary import is_prelaunch_session
    from .status import pid_alive

    if os.environ.get("BRACKET_LMS_BIN"):
        return "BRACKET_LMS_BIN is set here"
    if lm is not None and lm.requested and is_local_url(lm.url):
        return f"LM Studio is named at {lm.url} ({lm.url_source})"
    for run in run_dir.runs[:MAX_PID_RUNS]:
        if pid_alive(run):
            return f"the pid file of {run.name} names a process running here"
    if config is not None and is_prelaunch_session(config):
        if prelaunch_any:
            return "prepared here (-m prelaunch)"
        if sweep_judges_with_lmstudio(run_dir):
            return "a sweep with judge_method: lmstudio prepared here (-m prelaunch)"
    return None


NOT_LOCAL = (
    "nothing shows this run is on this machine (no pid file of a process running here, no LM Studio "
    "URL on localhost, no BRACKET_LMS_BIN, not a -m prelaunch session preparing it): a probe of this "
    "machine says nothing about it"
)
