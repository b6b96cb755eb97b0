"""Unit-test a check without a pytest session: :func:`check_on`.

Why: a check is a function of what a run left on disk, so a test of it needs
the run dir and the verdict, not an inner pytest session (collection,
parametrisation, reports: ~0.3 s each, and an assertion on a report's dict
instead of on the finding). Pack authors test their own checks this way, and
so does this project's suite where the verdict is what is tested; the
end-to-end sessions stay where the session is (consequences, waivers,
severity, reports, xdist).

What it does the same as a session: the run dir is searched for runs as
``--run-dir`` does (docs/layouts.md, "Finding runs"), the check gets one
target per run (one per run dir for ``scope="session"``), a target lacking
what the check ``needs`` is skipped with the session's reason, thresholds are
the decorator's updated from ``runhealth.yaml`` (or ``thresholds=``), and a
check that raises ends as the same ``not-evaluable`` finding. What it does
not do: severity levels, waivers and root-cause folding (they settle a
finding into a test outcome; the finding returned is the check's own), live
fixtures (pass them in ``fixtures=``), pytest options (``ctx.config`` is
None)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .context import CheckContext
from .engine.call_check import call_check, normalise, skip_reason
from .model.finding import Finding
from .model.registry import SPEC_ATTR, CheckSpec, Registry
from .model.target import Target

if TYPE_CHECKING:
    from .model.runkinds import RunKind
    from .readers.rundir import RunDir

__all__ = ["Findings", "check_on"]


class Findings(list[Finding]):
    """The findings of one check on one run dir, one per judged target in
    target order; ``skipped`` maps each target the check skipped to the reason
    (the sentence the test report would show)."""

    def __init__(self, findings: list[Finding], skipped: dict[str, str]) -> None:
        super().__init__(findings)
        self.skipped = skipped

    def of(self, run: str | None = None) -> Finding:
        """The finding for ``run`` (a run's name, or the run dir's for a
        session-scope check); without ``run``, the only one. An
        ``AssertionError`` says what there was instead (a skip and its reason)."""
        found = [f for f in self if run is None or f.run == run]
        if len(found) == 1:
            return found[0]
        skips = {k: v for k, v in self.skipped.items() if run is None or k == run}
        raise AssertionError(
            f"{len(found)} finding(s) for {run or 'the run dir'}; judged: {[f.run for f in self]}; skipped: {skips}"
        )


def check_on(
    run_dir: str | Path,
    check_id: str | CheckSpec | Callable[..., Any],
    *,
    run: str | None = None,
    thresholds: Mapping[str, Any] | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    fixtures: Mapping[str, Any] | None = None,
    registry: Registry | None = None,
    depth: int | None = None,
) -> Findings:
    """Run one check on one run dir and return its findings.

    ``check_id``: a built-in ID (``"RH202"``), the ID of a check in
    ``registry``, or the decorated check function (or its ``CheckSpec``)
    itself, which is what a pack's own tests pass. ``run``: judge only the
    run of that name. ``thresholds``: overrides of the check's thresholds.
    ``config``: a runhealth.yaml (a path, or its parsed content as a dict),
    read as a session reads it: ``ctx.settings``, thresholds and all.
    ``fixtures``: values for the pytest fixtures the check asks for by name.
    ``depth``: how deep the run dir is searched for runs (``--runhealth-depth``).

    A usage mistake (an unknown ID, a missing fixture value, a run dir that is
    not a folder) raises ``ValueError``; anything the check finds is a finding
    or a skip, as in a session."""
    from .session import RunHealthSession
    from .settings.config import RunHealthConfig, load_config
    from .settings.options import DEFAULT_DEPTH
    from .settings.severity import Policy

    path = Path(run_dir)
    if not path.is_dir():
        raise ValueError(f"check_on: {path} is not a folder")
    spec, registry = _spec_and_registry(check_id, registry)
    if isinstance(config, Mapping):
        settings = RunHealthConfig(None, dict(config))
    elif config is not None:
        settings = load_config(Path(config), registry)  # validated against the registry, as a session does
    else:
        settings = RunHealthConfig()
    given = dict(fixtures or {})
    if "processes" in spec.fixtures and "processes" not in given:
        from .readers.procs import Processes

        given["processes"] = Processes()  # the pid-file reader: read-only, as the session's fixture
    missing = [name for name in spec.fixtures if name not in given]
    if missing:
        raise ValueError(f"check_on: {spec.id} asks for fixture(s) {', '.join(missing)}: pass them in fixtures={{...}}")
    merged = settings.thresholds_for(spec)
    merged.update(thresholds or {})
    run_dirs = run_dirs_below(path, DEFAULT_DEPTH if depth is None else depth, registry.run_kinds())
    session = RunHealthSession(registry, settings, Policy(settings), run_dirs)
    findings: list[Finding] = []
    skipped: dict[str, str] = {}
    for target in targets_of(spec, run_dirs):
        if run is not None and target.name != run:
            continue
        reason = skip_reason(spec, target)
        if reason:
            skipped[target.name] = reason
            continue
        ctx = CheckContext(spec, target, dict(merged), None, session)
        try:
            findings.append(normalise(ctx, call_check(ctx, {k: given[k] for k in spec.fixtures})))
        except pytest.skip.Exception as exc:
            skipped[target.name] = str(exc.msg)
    if run is not None and not findings and not skipped:
        names = [t.name for t in targets_of(spec, run_dirs)]
        raise ValueError(f"check_on: no run named {run!r} in {path} (runs: {', '.join(names) or 'none'})")
    return Findings(findings, skipped)


def _spec_and_registry(
    check_id: str | CheckSpec | Callable[..., Any], registry: Registry | None
) -> tuple[CheckSpec, Registry]:
    spec = check_id if isinstance(check_id, CheckSpec) else getattr(check_id, SPEC_ATTR, None)
    if spec is not None:
        if registry is None:
            registry = Registry()
        if spec.id not in registry:
            registry.add(spec, owner=spec.owner or getattr(spec.func, "__module__", None) or "check_on")
        return spec, registry
    if not isinstance(check_id, str):
        raise ValueError(f"check_on: {check_id!r} is neither a check ID nor a function decorated with @check")
    if registry is None:
        from .checks import builtin_registry

        registry = builtin_registry()
    found = registry.get(check_id) or next((s for s in registry if check_id in (s.name, s.slug)), None)
    if found is None:
        raise ValueError(f"check_on: no check {check_id!r} (pass the decorated function, or registry=)")
    return found, registry


def run_dirs_below(path: Path, depth: int, kinds: Sequence[RunKind] = ()) -> list[RunDir]:
    """A RunDir per run found below ``path`` (of the built-in kinds and ``kinds``), labelled as a session
    labels them."""
    from .plugins.discovery import discover
    from .readers.rundir import RunDir

    found = discover(path, depth, kinds)
    out: list[RunDir] = []
    for f in found.runs:
        label = f.label(found.root) if f.path != found.root else (path.absolute().name or str(path))
        if f.kind == "mlflow-store":  # each run of an MLflow store is a run dir (readers/mlflow_runs.py)
            from .readers.mlflow_runs import sqlite_run_dirs

            out += sqlite_run_dirs(f.path / "mlflow.db", str(f.path / "mlflow.db"))
            continue
        out.append(RunDir(f.path if f.path != found.root else path, label, launch=f.launch))
    return out


def targets_of(spec: CheckSpec, run_dirs: list[RunDir]) -> list[Target]:
    """One target per run (per run dir for a session-scope check), never in chunks."""
    out: list[Target] = []
    many = len(run_dirs) > 1
    for rd in run_dirs:
        if spec.scope == "session" or not rd.runs:
            out.append(Target(rd, None, rd.name))
        else:
            out += [Target(rd, r, f"{rd.name}/{r.name}" if many else r.name) for r in rd.runs]
    return out
