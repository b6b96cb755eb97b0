"""Every shipped example says what it must show: ``examples/<name>.expect.yaml``
names the checks that fail on it (with their cause) and those that must pass.

    # examples/sweep-vram-leak.expect.yaml
    fails:            # check ID -> cause slug (null: any cause)
      RH101: vram-leak-step-collapse
    passes: [RH001, RH102]
    args: []          # extra pytest arguments, e.g. ["--lmstudio-log", "{example}/lmstudio.log"]
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES

EXPECTS = sorted(EXAMPLES.glob("*.expect.yaml"))


def load(expect: Path) -> tuple[Path, dict]:
    spec = yaml.safe_load(expect.read_text()) or {}
    return EXAMPLES / expect.name.removesuffix(".expect.yaml"), spec


@pytest.mark.parametrize("expect", EXPECTS, ids=[p.name.removesuffix(".expect.yaml") for p in EXPECTS])
def test_example(expect: Path, run_health):
    example, spec = load(expect)
    assert example.is_dir(), f"{expect.name} names no example dir"
    args = [a.replace("{example}", str(example)) for a in spec.get("args", [])]
    res = run_health(example, args=tuple(args))
    for check_id, cause in (spec.get("fails") or {}).items():
        failed = [r for r in res.results(check_id) if r["outcome"] == "failed"]
        assert failed, f"{check_id} should fail on {example.name}\n{res.stdout}"
        if cause:
            assert cause in {r["cause"] for r in failed}, (
                f"{check_id} on {example.name}: causes {[r['cause'] for r in failed]}"
            )
    for check_id in spec.get("passes") or []:
        results = res.results(check_id)
        outcomes = {r["outcome"] for r in results}
        assert "passed" in outcomes and "failed" not in outcomes and "error" not in outcomes, (
            f"{check_id} should pass on {example.name}: {outcomes}\n{res.stdout}"
        )


# -- examples declared on the check itself (@check(..., fails_on=..., passes_on=...)) --------------
def _declared() -> list[tuple[str, str, str | None, bool]]:
    from pytest_runhealth import Registry, checks

    registry = Registry()
    for module in checks.builtin_modules():
        registry.add_module(module)
    out = []
    for spec in registry:
        out += [(spec.id, name, cause, True) for name, cause in spec.fails_on.items()]
        out += [(spec.id, name, None, False) for name in spec.passes_on]
    return out


DECLARED = _declared()


@pytest.mark.parametrize(
    ("check_id", "example", "cause", "fails"),
    DECLARED or [pytest.param("", "", None, False, marks=pytest.mark.skip(reason="no check declares its examples"))],
    ids=[f"{c}-{'fails' if f else 'passes'}-on-{e}" for c, e, _, f in DECLARED] or None,
)
def test_a_check_fails_and_passes_where_it_declares(check_id: str, example: str, cause: str | None, fails: bool):
    """A check's own ``fails_on``/``passes_on``: judged with ``check_on`` (no pytest session), so a new
    check needs no ``.expect.yaml`` and no test module of its own for its failing example and near miss."""
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
