"""The one collection engine: every check (built-in, conftest, pack, rule)
becomes test items here, one per (check, target).

How, and why this way:

* The registry is filled by one hook, ``pytest_runhealth_register_checks``:
  the built-ins register through it (``checks/__init__.py``) exactly as a pack
  or the declarative rules do; checks decorated in a ``conftest.py`` are
  found without it (:func:`scan_conftests`).
* The items come from :class:`RunHealthModule`, a ``pytest.Module`` whose
  ``obj`` is a fresh module object made with ``types.ModuleType`` once per
  session, holding one generated test function per check (and one failing
  test per pack that could not load). pytest's own ``Module`` collection then
  does the rest with public API only: fixtures by name, parametrisation over
  the targets (``pytest_generate_tests``), marks, ``-k``/``-m``, ``--lf``,
  xdist, JUnit XML. No imported module is mutated, so nothing has to be
  removed at unconfigure and two sessions in one process (pytester) never
  see each other's checks.
* The module's path is ``<rootdir>/runhealth`` and its node id ``runhealth``:
  item ids such as ``runhealth::RH101-step-count-collapse[s1/cur-000-s0]`` are
  the same for a wheel and an editable install, and ``--lf`` finds the module
  again from the id. pytest is pointed at it through the empty anchor file
  ``collect/runhealth.py`` (``core.add_health_module``): the anchor is the
  only part of the collection that is a file."""

from __future__ import annotations

import inspect
import types
from pathlib import Path
from typing import Any

import pytest

from ..features.scale import batch_label, in_order, run_label, span_label, spanning
from ..model.needs import missing_run_dir_need
from ..model.registry import SPEC_ATTR, CheckSpec, Registry
from ..model.target import Target
from ..readers.rundir import RunDir
from ..session import session_of
from . import packs
from .report_item import run_check

HEALTH_DIR = Path(__file__).parent / "collect"
HEALTH_FILE = HEALTH_DIR / "runhealth.py"  # the anchor pytest is pointed at
HEALTH_NODEID = "runhealth"
HEALTH_MODULE = "pytest_runhealth.engine.collect.runhealth"  # the generated tests' __module__


# -- the registry ---------------------------------------------------------------------
def build_registry(config: pytest.Config) -> Registry:
    """Every check of the session: the hook (built-ins, packs, rules, conftest
    hookimpls), then the checks decorated in conftest files."""
    registry = Registry()
    packs.load(config)  # pytest_runhealth.packs entry points: a broken pack fails alone
    config.hook.pytest_runhealth_register_checks(registry=registry, config=config)
    scan_conftests(config, registry)
    return registry


def scan_conftests(config: pytest.Config, registry: Registry) -> None:
    """Checks decorated in conftest.py files need no hook to be found."""
    for plugin in config.pluginmanager.get_plugins():
        if inspect.ismodule(plugin) and (getattr(plugin, "__file__", "") or "").endswith("conftest.py"):
            for value in list(vars(plugin).values()):
                spec = getattr(value, SPEC_ATTR, None)
                known = registry.get(spec.id) if isinstance(spec, CheckSpec) else None
                if isinstance(spec, CheckSpec) and (known is None or known.func is not value):
                    registry.add(value, owner=f"conftest {plugin.__file__}")  # a clash with a pack is refused


# -- the collector ------------------------------------------------------------------
class RunHealthModule(pytest.Module):
    """The run-health checks as one pytest module that exists only in memory."""

    _health_module: types.ModuleType | None = None

    @property
    def obj(self) -> types.ModuleType:
        if self._health_module is None:
            self._health_module = health_module(self.config)
        return self._health_module

    @obj.setter
    def obj(self, value: types.ModuleType) -> None:
        self._health_module = value


def health_module(config: pytest.Config) -> types.ModuleType:
    """A fresh module with one test per check, and one failing test per pack
    that failed to load. Conftest checks are scanned again here: conftest
    files below the rootdir are loaded during collection."""
    state = session_of(config)
    module = types.ModuleType(HEALTH_MODULE, "The run-health checks of this session (generated).")
    if state is None:
        return module
    scan_conftests(config, state.registry)
    for spec in state.registry:
        setattr(module, spec.name, make_test(spec))
    for err in packs.errors(config):
        name = f"pack-{err.name}-loads"
        setattr(module, name, failing_test(name, err.message()))
    return module


def collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if file_path != HEALTH_FILE or session_of(parent.config) is None:
        return None
    return RunHealthModule.from_parent(parent, path=parent.config.rootpath / HEALTH_NODEID, nodeid=HEALTH_NODEID)


# -- one test per (check, target) -----------------------------------------------------
def make_test(spec: CheckSpec):
    def test(runhealth_target: Target, request: pytest.FixtureRequest, **fixtures: Any) -> None:
        run_check(spec, runhealth_target, request, fixtures)

    params = [
        inspect.Parameter("runhealth_target", inspect.Parameter.KEYWORD_ONLY),
        inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY),
    ]
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in spec.fixtures]
    test.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    test.__name__ = test.__qualname__ = spec.name
    test.__module__ = HEALTH_MODULE
    test.__doc__ = spec.detects
    test.__test__ = True  # type: ignore[attr-defined]  # collected despite its name
    setattr(test, SPEC_ATTR, spec)
    test.pytestmark = [pytest.mark.runhealth] + [getattr(pytest.mark, p) for p in spec.phases]  # type: ignore[attr-defined]
    return test


def failing_test(name: str, message: str):
    """A test that fails with ``message``: a pack that did not load fails the session and says why."""

    def test() -> None:
        pytest.fail(message, pytrace=False)

    test.__name__ = test.__qualname__ = name
    test.__module__ = HEALTH_MODULE
    test.__test__ = True  # type: ignore[attr-defined]
    return test


def batch_above(config: pytest.Config) -> int:
    value = config.getoption("runhealth_batch_above") or config.getini("runhealth_batch_above")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"runhealth_batch_above must be a whole number, not {value!r}") from None


def cannot_apply(spec: CheckSpec, rd: RunDir) -> str | None:
    """Why ``spec`` can never apply to ``rd``, from the run dir alone: a need the run dir answers for all its runs
    (a ledger, a sweep, a harvest, ``config.yaml``, judgments) or a run kind it is not. A run dir that does not
    exist keeps its items (each says so), and needs asked of each run (a log, an event file) are never prejudged."""
    if not rd.exists:
        return None
    return missing_run_dir_need(spec, Target(rd, None, rd.name))


def left_unmade(spec: CheckSpec, run_dirs: list[RunDir], batch_limit: int) -> list[tuple[RunDir, str]]:
    """The run dirs ``spec`` is made no item for, each with why: in a session of many run dirs with more runs
    than ``--runhealth-batch-above`` (``scale.spanning``; 3,200 one-row Lightning versions made 134,400 items, 40
    of each run's 42 skipped: 1.18 GB and 105 s, issue 48), those judged on their own (a run dir too big for a
    span) that the check can never apply to; a span's items stand for every check. A smaller session keeps an
    item, and its skip with the reason, for every check. Where it applies to none and there is no span, the
    first keeps its item: the check is still seen once, skipped with its reason (pytest's own "empty parameter
    set" would say nothing of it)."""
    if not spanning(run_dirs, batch_limit):
        return []
    alone = [run_dirs[i] for i, stop in in_order(run_dirs, batch_limit) if stop is None]
    out = [(rd, why) for rd in alone if (why := cannot_apply(spec, rd)) is not None]
    return out[1:] if len(out) == len(run_dirs) else out


def not_made(registry: Registry, run_dirs: list[RunDir], batch_limit: int) -> dict[str, list[tuple[RunDir, str]]]:
    """Check id -> the run dirs it was made no item for and why: the terminal summary says it once."""
    out = {spec.id: left_unmade(spec, run_dirs, batch_limit) for spec in registry}
    return {cid: left for cid, left in out.items() if left}


def targets_for(spec: CheckSpec, run_dirs: list[RunDir], batch_limit: int) -> list[Target]:
    """``spec``'s targets, in run dir order: a run dir's own (session scope), its runs, or chunks of them past
    ``batch_limit`` runs; in a session of many run dirs past ``batch_limit`` runs in all, one per span of small
    run dirs, whatever the check's scope (engine/judge_chunk.py judges each run dir of it, then its runs)."""
    many = len(run_dirs) > 1
    unmade = {id(rd) for rd, _ in left_unmade(spec, run_dirs, batch_limit)}
    out = []
    for i, end in in_order(run_dirs, batch_limit):
        rd = run_dirs[i]
        if end is not None:
            out.append(Target(rd, None, span_label(run_dirs, i, end), span=tuple(run_dirs[i:end])))
            continue
        if id(rd) in unmade:
            continue  # never applies here: no item, said once in the terminal summary (not a deselection)
        if spec.scope == "session":
            out.append(Target(rd, None, rd.name))
        elif not rd.runs:
            # No run to parametrise over: one item that says so, not pytest's "empty parameter set".
            out.append(Target(rd, None, rd.name))
        elif len(rd.runs) > batch_limit:
            # Chunks of batch_limit runs: few items, still spread over xdist workers and shards.
            size = max(1, batch_limit)
            for start in range(0, len(rd.runs), size):
                stop = min(start + size, len(rd.runs))
                out.append(Target(rd, None, batch_label(rd, start, stop), batch=(start, stop)))
        else:
            out += [Target(rd, run, run_label(rd, run, many)) for run in rd.runs]
    return out


def generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise each check over its targets, and the user's ``run_dir``
    tests over the run dirs when there are several."""
    state = session_of(metafunc.config)
    if state is None:
        return
    spec = getattr(metafunc.function, SPEC_ATTR, None)
    if spec is not None:
        targets = targets_for(spec, state.run_dirs, batch_above(metafunc.config))
        metafunc.parametrize("runhealth_target", targets, ids=[t.label for t in targets])
    elif "run_dir" in metafunc.fixturenames and state.many_run_dirs:
        metafunc.parametrize("run_dir", state.run_dirs, ids=[rd.name for rd in state.run_dirs], indirect=True)
