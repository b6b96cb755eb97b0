"""Every shipped example says what it must show, and says it in one place: on the checks. A check names the
example run dirs it must fail on (with the cause) and its near misses where it is defined::

    @check("RH101", ..., fails_on={"sweep-vram-leak": "vram-leak-step-collapse"}, passes_on=["sweep-healthy"])

Each example is run in one session here (with its ``args``: ``examples/<name>.expect.yaml``, beside it, holds
its description and the session's extra arguments, nothing else), and each declaration is also judged alone
with ``check_on``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES, declared_examples

from pytest_runhealth.checks import builtin_registry

DECLARED = declared_examples()
BY_NAME = {exp.example.name: exp for exp in DECLARED}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_example(name: str, run_health):
    exp = BY_NAME[name]
    example = exp.example
    res = run_health(example, args=tuple(a.replace("{example}", str(example)) for a in exp.args))
    for check_id, cause in exp.fails.items():
        failed = [r for r in res.results(check_id) if r["outcome"] == "failed"]
        assert failed, f"{check_id} should fail on {example.name}\n{res.stdout}"
        if cause:
            assert cause in {r["cause"] for r in failed}, (
                f"{check_id} on {example.name}: causes {[r['cause'] for r in failed]}"
            )
    for check_id in exp.passes:
        results = res.results(check_id)
        outcomes = {r["outcome"] for r in results}
        assert "passed" in outcomes and "failed" not in outcomes and "error" not in outcomes, (
            f"{check_id} should pass on {example.name}: {outcomes}\n{res.stdout}"
        )


# -- each declaration alone, with check_on (no pytest session) ----------------------------------------
SPECS = {spec.id: spec for spec in builtin_registry()}
PAIRS = [(c, name, cause, True) for c, spec in SPECS.items() for name, cause in spec.fails_on.items()] + [
    (c, name, None, False) for c, spec in SPECS.items() for name in spec.passes_on
]
# Judged by test_example only: an example that needs session arguments (a gate session, -m prelaunch), and a
# check that asks for a live fixture check_on has no stand-in for (lmstudio: it is built from the session's
# options); check_on takes no command line.
ALONE = [
    (c, name, cause, fails)
    for c, name, cause, fails in PAIRS
    if not (name in BY_NAME and BY_NAME[name].args) and set(SPECS[c].fixtures) <= {"processes"}
]


@pytest.mark.parametrize(
    ("check_id", "example", "cause", "fails"),
    ALONE,
    ids=[f"{c}-{'fails' if f else 'passes'}-on-{e}" for c, e, _, f in ALONE],
)
def test_a_check_fails_and_passes_where_it_declares(check_id: str, example: str, cause: str | None, fails: bool):
    """A check's own ``fails_on``/``passes_on``: judged with ``check_on``, so a new check needs no
    ``.expect.yaml`` and no test module of its own for its failing example and near miss."""
    from pytest_runhealth.testing import check_on

    path = EXAMPLES / example
    assert path.is_dir(), f"{check_id} names examples/{example}, which does not exist"
    findings = check_on(path, check_id)
    failed = [f for f in findings if not f.passed]
    if fails:
        assert failed, f"{check_id} should fail on examples/{example}: {findings} (skipped: {findings.skipped})"
        if cause:
            assert cause in {f.cause for f in failed}, f"{check_id} on {example}: causes {[f.cause for f in failed]}"
    else:
        assert findings and not failed, f"{check_id} should pass on examples/{example}: {failed or findings.skipped}"


def test_every_declared_example_exists_and_every_example_is_declared():
    """A name in ``fails_on``/``passes_on`` is a run dir under examples/, and every run dir there (but the
    rule examples, read by runhealth.yaml's rules) is some check's failing example or near miss, so the
    example, read-only and trust-boundary tests see it."""
    named = {name for _, name, _, _ in PAIRS}
    missing = sorted(name for name in named if not (EXAMPLES / name).is_dir())
    assert not missing, f"declared examples with no run dir under examples/: {missing}"
    shipped = {p.name for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith("_")}
    not_run_dirs = {"check_pack", "conftest_check", "reports", "rules"}
    assert sorted(shipped - not_run_dirs - named) == [], "example run dirs no check names"


def test_an_expect_yaml_holds_only_what_no_check_declares():
    """One place to edit: which checks fail or pass on an example is declared on the checks, so a built-in
    example's ``.expect.yaml`` holds its description and ``args`` only (a pack's may still list both)."""
    for expect in sorted(EXAMPLES.glob("*.expect.yaml")):
        doc = yaml.safe_load(expect.read_text(encoding="utf-8")) or {}
        assert set(doc) <= {"args"}, f"{expect.name}: {sorted(set(doc) - {'args'})} belong on the checks"
        assert Path(EXAMPLES / expect.name.removesuffix(".expect.yaml")).is_dir(), f"{expect.name}: no example dir"
