"""``pytest --runhealth-selftest``: every registered check against its own
good and bad examples, so a pack or rule author sees a check that no longer
fires on its bad example, or fires on a healthy one.

A check names its examples where it is defined: ``@check(..., fails_on={"<example>":
"<cause>"}, passes_on=["<near miss>"])``, each a run dir in an examples folder.
Beside an example, ``<name>.expect.yaml`` holds what is not a check's own (the
session's extra arguments), and may list expectations of checks that declare none
(a pack's older format, the format tests/test_examples.py reads for built-ins too)::

    fails:            # check ID -> cause (null: any cause)
      ACME101: nccl-timeout
    passes: [ACME102]
    args: []          # extra pytest arguments; "{example}" is the example's path

Built-ins use the repository's examples/ (a source checkout); a pack or a
conftest names its folders with the hook ``pytest_runhealth_examples``; a rule
lists its own under ``examples: {fails: [...], passes: [...]}``. Each example
runs in a fresh pytest process, exactly as a user would run it; what every source
expects of one example is checked in that one process."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..engine.collection import build_registry
from ..model.registry import CheckSpec, RegistryError
from ..readers.rootcause import same_cause
from ..session import config_path
from .rules import RULES

REPO_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"  # a source checkout: <repo>/examples
TIMEOUT_S = 300


@dataclass
class Expectation:
    example: Path
    fails: dict[str, str | None] = field(default_factory=dict)
    passes: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def checks(self) -> list[str]:
        return list(self.fails) + [c for c in self.passes if c not in self.fails]


def _read_expect(expect: Path) -> dict[str, Any]:
    import yaml

    try:
        spec = yaml.safe_load(expect.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise pytest.UsageError(f"--runhealth-selftest: cannot read {expect}: {exc}") from None
    return spec if isinstance(spec, dict) else {}


def example_args(example: Path) -> list[str]:
    """The extra pytest arguments of an example: its ``<name>.expect.yaml``'s ``args``, else none."""
    expect = example.with_name(f"{example.name}.expect.yaml")
    return [str(a) for a in _read_expect(expect).get("args") or []] if expect.is_file() else []


def read_expectations(folder: Path) -> list[Expectation]:
    """Every ``*.expect.yaml`` in a folder whose example dir exists beside it."""
    out = []
    for expect in sorted(Path(folder).glob("*.expect.yaml")):
        example = expect.with_name(expect.name.removesuffix(".expect.yaml"))
        spec = _read_expect(expect)
        if example.is_dir():
            out.append(
                Expectation(
                    example,
                    dict(spec.get("fails") or {}),
                    list(spec.get("passes") or []),
                    [str(a) for a in spec.get("args") or []],
                    str(expect),
                )
            )
    return out


def declared_expectations(specs: Iterable[CheckSpec], folder: Path) -> list[Expectation]:
    """One expectation per example dir of ``folder`` that a check names in its ``fails_on`` or
    ``passes_on``, with the example's ``args``: the checks' own declarations, grouped by example (the one
    place a built-in's failing example and near miss are written; docs, selftest and tests read them here)."""
    by_name: dict[str, Expectation] = {}
    for spec in specs:
        named = [(name, cause, True) for name, cause in spec.fails_on.items()]
        for name, cause, fails in named + [(name, None, False) for name in spec.passes_on]:
            example = Path(folder) / name
            if not example.is_dir():
                continue
            if name not in by_name:
                by_name[name] = Expectation(example, args=example_args(example), source=f"{spec.id} in {spec.owner}")
            if fails:
                by_name[name].fails[spec.id] = cause
            elif spec.id not in by_name[name].passes:
                by_name[name].passes.append(spec.id)
    return [by_name[name] for name in sorted(by_name)]


def rule_expectations(config: pytest.Config) -> list[Expectation]:

    rules = config.stash.get(RULES, [])
    path = config_path(config)
    base = Path(path).parent if path else Path.cwd()
    out = []
    for rule in rules:
        for kind in ("fails", "passes"):
            for rel in rule.examples.get(kind, []):
                exp = Expectation((base / rel).resolve(), source=f"rule {rule.id} in {path}")
                if kind == "fails":
                    exp.fails[rule.id] = rule.cause
                else:
                    exp.passes.append(rule.id)
                out.append(exp)
    return out


def collect(config: pytest.Config, specs: Iterable[CheckSpec] = ()) -> list[Expectation]:
    """Every expectation, one per example: what several sources (the checks' declarations,
    ``*.expect.yaml``, rules) expect of the same run dir is checked in one pytest process."""
    specs = list(specs)
    found = []
    for folders in config.hook.pytest_runhealth_examples(config=config):
        for folder in folders or []:
            found += read_expectations(Path(folder)) + declared_expectations(specs, Path(folder))
    merged: dict[tuple[Path, tuple[str, ...]], Expectation] = {}
    for exp in found + rule_expectations(config):
        key = (exp.example, tuple(exp.args))
        if key not in merged:
            merged[key] = Expectation(exp.example, args=exp.args, source=exp.source)
        merged[key].fails.update(exp.fails)
        merged[key].passes += [c for c in exp.passes if c not in merged[key].passes]
    return list(merged.values())


def run_one(exp: Expectation, config: pytest.Config, report: Path) -> dict[str, list[dict[str, Any]]]:
    """The example's results by check ID, from a fresh pytest process."""

    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--no-header",
        "--run-dir",
        str(exp.example),
        "--runhealth-report",
        str(report),
        "-k",
        " or ".join(exp.checks),
    ]
    argv += plugin_args(config.invocation_params.args)
    cfg = config_path(config)
    if cfg is not None:
        argv += ["--runhealth-config", str(Path(cfg).resolve())]
    argv += [a.replace("{example}", str(exp.example)) for a in exp.args]
    if report.exists():
        report.unlink()
    proc = subprocess.run(
        argv, cwd=config.invocation_params.dir, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    if not report.exists():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"pytest exited {proc.returncode} without a report: {' / '.join(tail)}")
    by_check: dict[str, list[dict[str, Any]]] = {}
    for res in json.loads(report.read_text())["results"]:
        by_check.setdefault(res["check"], []).append(res)
    return by_check


def plugin_args(args) -> list[str]:
    """The invoking session's ``-p`` options: the example must see the same
    plugins (a pack loaded with ``-p``, or one switched off)."""
    out, args = [], [str(a) for a in args]
    for i, arg in enumerate(args):
        if arg == "-p" and i + 1 < len(args):
            out += ["-p", args[i + 1]]
        elif arg.startswith("-p") and len(arg) > 2 and not arg.startswith("--"):
            out.append(arg)
    return out


def fired(res: dict[str, Any]) -> bool:
    """Failed, warned (observe mode) or waived: the check saw the problem."""
    return res["outcome"] in ("failed", "warned") or (res["outcome"] == "skipped" and bool(res.get("waived")))


def judge(exp: Expectation, by_check: dict[str, list[dict[str, Any]]]) -> list[tuple[bool, str]]:
    lines = []
    where = exp.example.name
    for check_id, cause in exp.fails.items():
        results = by_check.get(check_id, [])
        hits = [r for r in results if fired(r)]
        if not results:
            lines.append((False, f"{check_id} should fire on {where} but did not run (unknown ID, or severity off)"))
        elif not hits:
            outcomes = ", ".join(sorted({r["outcome"] for r in results}))
            lines.append((False, f"{check_id} no longer fires on its bad example {where} ({outcomes})"))
        elif cause and not any(same_cause(cause, r["cause"]) for r in hits):
            lines.append((False, f"{check_id} fires on {where} with cause {hits[0]['cause']}, expected {cause}"))
        else:
            lines.append((True, f"{check_id} fires on {where}" + (f" (cause {cause})" if cause else "")))
    for check_id in exp.passes:
        results = by_check.get(check_id, [])
        bad = [r for r in results if fired(r) or r["outcome"] == "error"]
        if bad:
            said = bad[0].get("summary") or bad[0]["outcome"]
            lines.append((False, f"{check_id} fires on its healthy example {where}: {said}"))
        elif not any(r["outcome"] == "passed" for r in results):
            outcomes = ", ".join(sorted({r["outcome"] for r in results})) or "not run"
            lines.append((False, f"{check_id} should pass on {where} but was {outcomes}"))
        else:
            lines.append((True, f"{check_id} passes on {where}"))
    return lines


def only(exp: Expectation, prefix: str) -> Expectation | None:
    """The expectation narrowed to the checks whose ID starts with ``prefix``."""
    fails = {k: v for k, v in exp.fails.items() if k.startswith(prefix)}
    passes = [c for c in exp.passes if c.startswith(prefix)]
    return Expectation(exp.example, fails, passes, exp.args, exp.source) if fails or passes else None


def selftest(config: pytest.Config, prefix: str = "") -> int:

    registry = build_registry(config)
    expectations = [e for e in (only(x, prefix) for x in collect(config, registry)) if e is not None]
    write = sys.stdout.write
    write(f"runhealth selftest: {len(registry)} checks, {len(expectations)} examples\n")
    failures = 0
    covered: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="runhealth-selftest-") as tmp:
        for i, exp in enumerate(expectations):
            covered.update(exp.checks)
            try:
                lines = judge(exp, run_one(exp, config, Path(tmp) / f"report-{i}.json"))
            except (OSError, RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                lines = [(False, f"{exp.example}: the example could not be run: {exc}")]
            for ok, text in lines:
                failures += not ok
                write(f"  {'ok  ' if ok else 'FAIL'}  {text}\n")
    untested = [s.id for s in registry if s.id not in covered and s.id.startswith(prefix)]
    if untested:
        write(f"no example names: {', '.join(untested)}\n")
    verdict = f"FAILED, {failures} expectation(s) not met" if failures else "all expectations met"
    write(f"selftest: {verdict}\n")
    return 1 if failures else 0


# -- the option and the built-ins' examples (this module is a sub-plugin) ------------
def pytest_runhealth_examples(config: pytest.Config) -> list[Path]:
    return [REPO_EXAMPLES] if REPO_EXAMPLES.is_dir() else []


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config):
    prefix = config.getoption("runhealth_selftest", None)
    if prefix is None:
        return None

    try:
        return selftest(config, prefix)
    except RegistryError as exc:
        raise pytest.UsageError(str(exc)) from None
