"""The checks' verdicts, from the plugin's own checks: a pytest session
(``pytest --run-dir ... --runhealth-report FILE``) whose JSON report is read
back, so the watch says exactly what ``pytest --run-dir`` would say.

In-process (``pytest.main``), not a subprocess: the plugin is imported once
and each session is new (new Config, new RunDir caches, the report written to
a temporary file outside the run dir, ``-p no:cacheprovider``), so a verdict
costs the checks' own work, not ~1-2 s of interpreter and import start-up.
A session is started only when the watcher saw new evidence (a new
checkpoint, a new ledger row, a changed state, a crossed milestone, a
changed evaluation status) or when the run has been quiet for a whole
verdict interval (stall and budget rules need time to pass), never on every
tick: the tick itself stays the incremental readers' work.

Each session runs with ``--assert=plain`` (rewriting the plugin's ~170
modules' asserts costs seconds and the checks report through findings, not
asserts) and without the unraisable-exception plugin (its ``gc.collect()``
at session end is a second of a loaded machine). Memory stays flat over
repeated sessions (measured: 25 sessions, max RSS 72.3 -> 72.6 MB)."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..safety.redact import redact

WEDGE_CHECKS = ("RH204", "RH502")  # a stall or budget rule: the run is wedged (exit 3)
# RH204's record of a sweep's kill with no stall shown (the row's own words): a failed run (exit 1), not a wedge.
NOT_A_WEDGE = ("run-disqualified",)
# Work that follows the end of training (the launch runbook writes run-summary.md
# after the run completes): said when the watch ends, never the reason it fails.
AFTER_RUN_CHECKS = ("RH207",)
# Not evidence yet: a round still pending or running (not-evaluable), a server
# that did not answer this time. The normal state of a live run, not a stop.
TRANSIENT_CAUSES = ("eval-server-error",)


@dataclass
class Result:
    nodeid: str
    check: str
    slug: str
    run: str
    outcome: str  # passed, failed, skipped, error, warned
    verdict: str | None
    cause: str | None
    summary: str
    fix: str | None
    consequence_of: str | None = None  # the root's check ID on the same run (consequences.py)

    @property
    def bad(self) -> bool:
        return self.outcome in ("failed", "error")

    def diagnosis(self) -> str:
        text = self.summary
        if self.verdict or self.cause:
            text = f"[{self.verdict or '?'}/{self.cause or '?'}] {text}"
        return redact(text)


@dataclass
class Verdicts:
    results: dict[str, Result] = field(default_factory=dict)
    status: dict[str, dict] = field(default_factory=dict)
    exit_code: int = 0
    error: str | None = None  # the session itself could not run (usage error, bad config)

    def failed(self) -> list[Result]:
        """Failures the watch acts on (not the after-run paperwork)."""
        return [r for r in self.results.values() if r.bad and r.check not in AFTER_RUN_CHECKS]

    def failed_now(self) -> list[Result]:
        """Failures that can stop a live watch: not the "not evidence yet" kind."""
        return [r for r in self.failed() if r.verdict != "not-evaluable" and r.cause not in TRANSIENT_CAUSES]

    def after_run(self) -> list[Result]:
        return [r for r in self.results.values() if r.bad and r.check in AFTER_RUN_CHECKS]

    def wedged(self) -> list[Result]:
        """A stall or budget rule that failed on evidence: a server that answered
        500 (RH502 not-evaluable, eval-server-error) has not shown a wedge
        (docs/watching.md: a server that does not answer never stops the watch)."""
        return [r for r in self.failed_now() if r.check in WEDGE_CHECKS and r.cause not in NOT_A_WEDGE]


def _summary(res: dict) -> str:
    text = res.get("summary") or ""
    if not text:
        ev = res.get("evidence") or []
        text = "; ".join(str(e.get("text") if isinstance(e, dict) else e) for e in ev[:2])
    if not text:
        text = res.get("note") or ""
    return " ".join(str(text).split())[:600]


def parse_report(doc: dict) -> Verdicts:
    out = Verdicts(status=doc.get("status") or {})
    for res in doc.get("results", []):
        out.results[res["nodeid"]] = Result(
            res["nodeid"],
            res.get("check") or "",
            res.get("slug") or "",
            res.get("run") or "",
            res.get("outcome") or "passed",
            res.get("verdict"),
            res.get("cause"),
            _summary(res),
            res.get("fix"),
            res.get("consequence_of"),
        )
    return out


class VerdictRunner:
    """``runner.run()`` → :class:`Verdicts` for the watched run dirs, with
    the pass-through pytest options (``--lmstudio-url``, ``-m live``, ...)."""

    def __init__(self, run_dirs: list[Path], extra_args: list[str]) -> None:
        self.run_dirs = [Path(p) for p in run_dirs]
        self.extra_args = list(extra_args)
        self.retry_budget_s: float | None = None  # the watch's tick: its sessions' clients wait at most that long
        self.guarded: list[Path] = []  # beside the run dirs, folders a temporary file never goes into (a store's)

    def args(self, report: Path) -> list[str]:
        args = [
            "-p",
            "no:cacheprovider",
            "-p",
            "no:unraisableexception",
            "--assert=plain",
            "-q",
            "--no-header",
            "-rN",
            "--runhealth-report",
            str(report),
        ]
        for rd in self.run_dirs:
            args.append(f"--run-dir={rd}")
        if self.retry_budget_s is not None:
            args += ["-o", f"runhealth_eval_retry_budget_s={self.retry_budget_s:g}"]
        return args + self.extra_args

    def run(self) -> Verdicts:
        import pytest

        from ..settings.run_dir_option import real_path
        from ..settings.trust_boundary import (  # import pytest: only when a session runs
            safe_session,  # imports pytest: only when a session runs
            temp_files_in,
            temp_root,
        )

        root = temp_root(
            [real_path(p) for p in [*self.run_dirs, *self.guarded]]
        )  # never a temporary file inside a watched run dir
        if isinstance(root, str):
            return Verdicts(exit_code=int(pytest.ExitCode.USAGE_ERROR), error=root)
        with temp_files_in(root), tempfile.TemporaryDirectory(prefix="runhealth-watch-") as tmp:
            report = Path(tmp) / "report.json"
            sink = io.StringIO()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                code = safe_session(self.args(report), Path(tmp))
            if int(code) == int(pytest.ExitCode.INTERRUPTED):  # Ctrl-C arrived inside the session
                raise KeyboardInterrupt
            if not report.exists():
                tail = [ln for ln in sink.getvalue().splitlines() if ln.strip()][-3:]
                return Verdicts(exit_code=int(code), error=redact(" | ".join(tail) or f"pytest exited {int(code)}"))
            try:
                doc = json.loads(report.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                return Verdicts(exit_code=int(code), error=f"report unreadable: {exc}")
        out = parse_report(doc)
        out.exit_code = int(code)
        return out


NEWS = ("failed", "error", "warned")  # an outcome worth a line when a result enters or leaves it


def transitions(before: Verdicts | None, after: Verdicts) -> list[tuple[Result, str | None]]:
    """(result, its previous outcome) for every result whose outcome changed
    into or out of a failure (``passed -> skipped``, a check that stopped
    applying as the run went on, is no news); on the first verdict, only the
    failures (the status block says the rest). After-run checks are left to
    the end of the watch."""
    out: list[tuple[Result, str | None]] = []
    for nodeid, res in after.results.items():
        if res.check in AFTER_RUN_CHECKS:
            continue  # said once, when the watch ends
        prev = before.results.get(nodeid) if before is not None else None
        if prev is None:
            if res.bad:
                out.append((res, None))
        elif prev.outcome != res.outcome and (prev.outcome in NEWS or res.outcome in NEWS):
            out.append((res, prev.outcome))
    return out


def describe(res: Result, prev: str | None) -> str:
    name = f"{res.check} {res.slug}" + (f" [{res.run}]" if res.run else "")
    if prev is None:
        head = f"{name}: {res.outcome}"
    else:
        head = f"{name}: {prev} -> {res.outcome}"
    if res.bad and res.consequence_of:
        # Folded under its root, as the post-mortem summary does: one root cause, one diagnosis.
        return head + f" (consequence of {res.consequence_of} on this run; see there)"
    if res.bad:
        head += f": {res.diagnosis()}"
    return head
