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
