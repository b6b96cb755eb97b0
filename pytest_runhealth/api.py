"""The Python API: ``rh.check(path, **options)`` judges run dirs from a
training callback, a launcher or a notebook and returns a typed
:class:`Report` (docs/python-api.md).

Why over a pytest session and not beside it: there is one judging path. The
call is ``pytest-runhealth check`` run in this process
(``trust_boundary.safe_session``: pytest started in an empty folder of its
own, no conftest.py, every path a ``--run-dir``), with the JSON report
(``runhealth-report/1``, built by the session from its result collector) and
the gate's verdict record written to a temporary folder and read back. So the
results, their consequences (``consequence_of``, folded once per run by the
engine), the status blocks, the exit code and the gate's decision are what
``pytest --run-dir``, the JSON report and the verdict file say, by
construction. Nothing is printed unless ``echo=True``; the session's terminal
text is kept in :attr:`Report.output`.

``check`` is also the decorator that declares a check
(``@runhealth.check("TEAM101", "disk-not-full", ...)``): a call with a
``slug`` declares a check, a call without one judges a path."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Union, overload

from .model.finding import Evidence
from .model.results import Result

__all__ = ["CheckResult", "GateDecision", "Report", "UsageError", "check", "run_check_session"]

if TYPE_CHECKING:  # Python 3.11's typing has no Unpack for **kwargs; annotations are not evaluated at run time
    from typing_extensions import Unpack

StrPath = Union[str, "os.PathLike[str]"]
Outcome = Literal["passed", "failed", "skipped", "error", "warned"]
DIAGNOSED = ("failed", "error", "warned")  # a failure with its diagnosis (warned: severity warn, observe mode)
USAGE_EXIT = 4


class UsageError(ValueError):
    """The session refused to start (exit 4): a missing run dir, a bad option, a bad runhealth.yaml, a folder
    with nothing to check. The message is pytest-runhealth's own one-line error."""


@dataclass(frozen=True)
class CheckResult:
    """One check on one run: the JSON report's result, typed.

    ``outcome`` is pytest's (``failed`` for a diagnosis; ``warned`` for a failure under severity ``warn``);
    ``verdict``, ``cause``, ``summary``, ``evidence`` and ``fix`` are the diagnosis; ``consequence_of``
    names the check whose failure on this run explains this one (one root cause, one diagnosis)."""

    nodeid: str
    check: str
    slug: str
    run: str | None
    run_dir: str | None
    outcome: Outcome
    verdict: str | None = None
    cause: str | None = None
    summary: str | None = None
    evidence: tuple[Evidence, ...] = ()
    fix: str | None = None
    note: str | None = None  # a pass's note, or the reason a skip gives
    consequence_of: str | None = None
    waived: Mapping[str, Any] | None = None
    duration_s: float = 0.0

    @property
    def failed(self) -> bool:
        """A diagnosis: failed, an error, or a failure in observe mode (``warned``)."""
        return self.outcome in DIAGNOSED

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def skipped(self) -> bool:
        return self.outcome == "skipped"

    @property
    def is_root(self) -> bool:
        """A diagnosis no other failure on its run explains."""
        return self.failed and self.consequence_of is None

    @classmethod
    def of(cls, res: Result) -> CheckResult:
        return cls(
            nodeid=res.nodeid,
            check=res.check or "",
            slug=res.slug or "",
            run=res.run,
            run_dir=res.run_dir,
            outcome=res.outcome,  # type: ignore[arg-type]  # one of results.OUTCOMES
            verdict=res.verdict,
            cause=res.cause,
            summary=res.summary,
            evidence=tuple(
                Evidence(str(e.get("path", "")), e.get("line"), str(e.get("text", "")))
                for e in res.evidence
                if isinstance(e, dict)
            ),
            fix=res.fix,
            note=res.note,
            consequence_of=res.consequence_of,
            waived=res.waived,
            duration_s=res.duration_s,
        )

    def render(self) -> str:
        """The diagnosis as the terminal gives it: check, verdict, cause, summary, evidence, fix."""
        head = f"{self.check} {self.slug} [{self.run}]"
        if not self.failed:
            return f"{head}: {self.outcome}" + (f" ({self.note})" if self.note else "")
        lines = [f"{head}   verdict: {self.verdict}   cause: {self.cause}"]
        if self.consequence_of:
            lines[0] += f"   (consequence of {self.consequence_of})"
        if self.summary:
            lines.append(f"  {self.summary}")
        lines += [f"  {e.render()}" for e in self.evidence]
        if self.fix:
            lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)


@dataclass(frozen=True)
class GateDecision:
    """The promotion gate's one decision (the verdict record, ``report.verdict.json``): ``promote``,
    ``block``, ``usage-error`` or ``internal-error``, with what blocked it."""

    decision: str
    blockers: tuple[Mapping[str, Any], ...] = ()
    message: str | None = None
    record: Mapping[str, Any] = field(default_factory=dict)  # the whole record, as written

    @property
    def promote(self) -> bool:
        return self.decision == "promote"


@dataclass(frozen=True)
class Report:
    """What one session concluded about the run dirs given.

    ``exit_code`` is the session's (0: nothing failed, or under the gate: promote; 1: a check failed, or the
    gate blocked); ``results`` every result in the report's order; ``document`` the ``runhealth-report/1``
    document itself (docs/json-report.md); ``gate`` the gate's decision in a gate session, else None."""

    exit_code: int
    results: tuple[CheckResult, ...]
    run_dirs: tuple[str, ...]
    summary: Mapping[str, int]
    status: Mapping[str, Mapping[str, Any]]
    document: Mapping[str, Any]
    gate: GateDecision | None = None
    output: str = ""  # the session's terminal text ("" when it was echoed)

    @property
    def ok(self) -> bool:
        """True exactly when the session's exit code is 0 (under the gate: it promotes)."""
        return self.exit_code == 0

    @property
    def findings(self) -> tuple[CheckResult, ...]:
        """Every diagnosis: roots and consequences."""
        return tuple(r for r in self.results if r.failed)

    @property
    def roots(self) -> tuple[CheckResult, ...]:
        """The diagnoses that lead: no other failure on their run explains them."""
        return tuple(r for r in self.results if r.is_root)

    @property
    def consequences(self) -> tuple[CheckResult, ...]:
        """The diagnoses another failure on their run explains (``consequence_of``)."""
        return tuple(r for r in self.results if r.failed and r.consequence_of)

    def consequences_of(self, root: CheckResult) -> tuple[CheckResult, ...]:
        """The consequences folded under ``root``: on its run, or on any run of its run dir when the root is a
        check of the run dir (its ``run`` is the run dir's name, as RH402's is)."""
        whole_dir = root.run == root.run_dir
        return tuple(
            r
            for r in self.consequences
            if r.consequence_of == root.check and r.run_dir == root.run_dir and (whole_dir or r.run == root.run)
        )

    def of(self, check: str, run: str | None = None) -> CheckResult:
        """The one result of ``check`` (an ID or a slug) on ``run``; a ``LookupError`` says what there was."""
        found = [r for r in self.results if check in (r.check, r.slug) and (run is None or r.run == run)]
        if len(found) != 1:
            runs = sorted({str(r.run) for r in self.results if check in (r.check, r.slug)})
            raise LookupError(f"{len(found)} results of {check} on {run or 'any run'} (runs: {', '.join(runs)})")
        return found[0]

    @classmethod
    def from_document(
        cls, doc: Mapping[str, Any], exit_code: int, record: Mapping[str, Any] | None = None, output: str = ""
    ) -> Report:
        """A report from a ``runhealth-report/1`` document (and a gate's verdict record)."""
        results = tuple(CheckResult.of(Result.from_json(raw)) for raw in doc.get("results") or [])
        gate = None
        if record is not None:
            gate = GateDecision(
                str(record.get("decision")),
                tuple(record.get("blockers") or ()),
                record.get("message"),
                dict(record),
            )
        return cls(
            exit_code,
            results,
            tuple(doc.get("run_dirs") or ()),
            dict(doc.get("summary") or {}),
            dict(doc.get("status") or {}),
            dict(doc),
            gate,
            output,
        )


def _paths(path: StrPath | Sequence[StrPath]) -> list[str]:
    if isinstance(path, (str, os.PathLike)):
        return [os.fspath(path)]
    paths = [os.fspath(p) for p in path]
    if not paths:
        raise UsageError("check: give at least one run dir")
    return paths


def _option(name: str, value: Any) -> list[str]:
    return [] if value is None else [f"{name}={os.fspath(value) if isinstance(value, os.PathLike) else value}"]


class SessionOptions(TypedDict, total=False):
    """The options of a check session, each the CLI option of the same name (docs/python-api.md lists them;
    unset: the CLI's default). One list for :func:`session_args` and :func:`check` alike."""

    depth: int | None
    config: StrPath | None
    project_config: bool  # False: --no-project-config
    select: str | None  # -k
    markers: str | None  # -m
    gate: bool
    candidate: str | None
    claim: str | None
    champion: str | None
    rounds: int | None
    alpha: float | None
    margin: float | None
    eval_server: str | None
    eval_request: Iterable[str]
    lmstudio_url: str | None
    orchestrator_url: str | None
    report: StrPath | None
    html: StrPath | None
    markdown: StrPath | None
    junitxml: StrPath | None
    shard: str | None
    args: Iterable[str]  # any other pytest option, as typed


# How each keyword of SessionOptions is written on the command line, in the order SessionOptions declares them;
# any other keyword but ``args`` is --runhealth-<keyword>=value.
FLAGS = {"project_config": (False, "--no-project-config"), "gate": (True, "--runhealth-gate")}  # (when, flag)
SEPARATE = {"select": "-k", "markers": "-m"}  # the option, then its value
OPTION = {"eval_server": "--eval-server", "eval_request": "--eval-request", "lmstudio_url": "--lmstudio-url"}
OPTION |= {"orchestrator_url": "--orchestrator-url", "junitxml": "--junitxml"}


def session_args(paths: Sequence[str], **options: Unpack[SessionOptions]) -> list[str]:
    """The argv of ``pytest-runhealth check`` for these options (:class:`SessionOptions`): each keyword is
    the CLI option of the same name, ``args`` any other pytest option, as typed."""
    unknown = sorted(set(options) - set(SessionOptions.__annotations__))
    if unknown:
        raise TypeError(f"session_args() got an unexpected keyword argument {unknown[0]!r}")
    given: Mapping[str, Any] = options
    argv = [f"--run-dir={p}" for p in paths]
    for key in SessionOptions.__annotations__:
        value = given.get(key)
        if key in FLAGS:
            when, flag = FLAGS[key]
            argv += [flag] if key in given and bool(value) is when else []
        elif key in SEPARATE:
            argv += [SEPARATE[key], value] if value is not None else []
        elif key == "eval_request":  # once per id
            for rid in value or ():
                argv += _option(OPTION[key], rid)
        elif key != "args":
            argv += _option(OPTION.get(key, f"--runhealth-{key}"), value)
    return argv + [str(a) for a in given.get("args", ())]


def verdict_record_path(report: Path) -> Path:
    """Where the gate writes its verdict record: beside the JSON report (``gate/report.json`` ->
    ``gate/report.verdict.json``), the rule of ``evaluation.state.record_path`` (a test holds them equal)."""
    if report.suffix != ".json":
        return report.with_name(report.name + ".verdict.json")
    return report.with_name(report.name[: -len(".json")] + ".verdict.json")


class _Checks:
    """A plugin that registers check functions given to :func:`check` (``checks=[...]``) as a conftest's
    would be: their ID prefix claimed by whoever registers it first."""

    def __init__(self, funcs: Sequence[Callable[..., Any]]) -> None:
        self.funcs = list(funcs)

    def pytest_runhealth_register_checks(self, registry: Any, config: Any) -> None:
        for func in self.funcs:
            registry.add(func, owner=f"rh.check(checks=...) {getattr(func, '__module__', '')}")


def _usage_message(output: str, code: int) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln.removeprefix("ERROR:").strip() for ln in lines if ln.startswith("ERROR:")]
    return (errors or lines[-1:] or [f"the session exited {code}"])[0]


def run_check_session(
    path: StrPath | Sequence[StrPath],
    *,
    plugins: Sequence[object] = (),
    checks: Sequence[Callable[..., Any]] = (),
    echo: bool = False,
    **options: Any,
) -> Report:
    """Judge ``path`` (a run dir, a folder of runs, or several) in one pytest session in this process, and
    return its :class:`Report`. The keywords are :func:`session_args`' (the CLI's options), plus:

    ``plugins``: modules or objects with ``pytest_runhealth_*`` hookimpls (a check pack's plugin module);
    ``checks``: functions decorated with ``@runhealth.check``, run beside the built-ins;
    ``echo``: print the session's terminal output as it goes (default: nothing is printed).

    Raises :class:`UsageError` where the session refuses to start (exit 4), ``KeyboardInterrupt`` on
    Ctrl-C. Not thread-safe: a session changes the working directory while it runs (to an empty folder of
    its own) and restores it."""
    import pytest

    from .settings.trust_boundary import safe_session

    paths = _paths(path)
    extra = list(plugins) + ([_Checks(checks)] if checks else [])
    with tempfile.TemporaryDirectory(prefix="runhealth-api-") as tmp:
        given = options.get("report")
        report = Path(given).absolute() if given is not None else Path(tmp) / "report.json"
        options["report"] = report
        argv = session_args(paths, **options)
        sink = io.StringIO()
        if echo:
            code = safe_session(argv, Path(tmp), plugins=extra)
        else:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                code = safe_session(argv, Path(tmp), plugins=extra)
        output = sink.getvalue()
        if code == int(pytest.ExitCode.INTERRUPTED) and "KeyboardInterrupt" in output:
            raise KeyboardInterrupt
        if code == USAGE_EXIT or not report.is_file():
            raise UsageError(_usage_message(output, code))
        doc = json.loads(report.read_text(encoding="utf-8"))
        record_file = verdict_record_path(report)
        record = None  # a record beside a report path of the caller's may be an earlier session's
        if record_file.is_file() and (given is None or options.get("gate")):
            record = json.loads(record_file.read_text(encoding="utf-8"))
    return Report.from_document(doc, code, record, output)


@overload
def check(id: str, slug: str, **declaration: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


@overload
def check(
    path: StrPath | Sequence[StrPath],
    /,
    *,
    plugins: Sequence[object] = (),
    checks: Sequence[Callable[..., Any]] = (),
    echo: bool = False,
    **options: Unpack[SessionOptions],
) -> Report: ...


def check(*args: Any, **kwargs: Any) -> Any:
    """``check(path, **options)`` judges ``path`` and returns a :class:`Report` (:func:`run_check_session`);
    ``check(id, slug, **declaration)`` declares a health check (``registry.check``, the decorator)."""
    if len(args) >= 2 or "slug" in kwargs:
        from .model.registry import check as declare  # looked up at each call: a pytester session may reload it

        return declare(*args, **kwargs)
    if len(args) != 1:
        raise TypeError("check(path, **options) judges a run dir; check(id, slug, ...) declares a check")
    return run_check_session(args[0], **kwargs)
