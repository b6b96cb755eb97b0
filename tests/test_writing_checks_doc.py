"""docs/writing-checks.md documents the whole CheckContext API: every public
member is documented, and every documented member exists. Also: an unknown
``needs=`` name is refused at registration; a rule glob written from the
sweep's folder matches; a rule that matches nothing anywhere says so once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sweep_builders import healthy_session

from pytest_runhealth import RegistryError, check
from pytest_runhealth.context import CheckContext, Target
from pytest_runhealth.model.registry import CheckSpec
from pytest_runhealth.readers.rundir import RunDir

DOC = Path(__file__).resolve().parent.parent / "docs" / "writing-checks.md"


def documented() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## CheckContext members", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^### ctx\.(\w+)$", section, re.M))


def public_members(tmp_path) -> set[str]:
    spec = CheckSpec("X001", "x", lambda ctx: None)
    ctx = CheckContext(spec, Target(RunDir(tmp_path), None, "t"), {}, None)
    names = {n for n in dir(CheckContext) if not n.startswith("_")} | {n for n in vars(ctx) if not n.startswith("_")}
    return names


def test_every_public_member_is_documented_and_every_documented_member_exists(tmp_path):
    doc, api = documented(), public_members(tmp_path)
    assert doc, "no ### ctx.<member> headings found"
    assert api - doc == set(), f"undocumented: {sorted(api - doc)}"
    assert doc - api == set(), f"documented but missing: {sorted(doc - api)}"


def test_every_member_says_what_it_returns_with_an_example():
    """Issue 29: a reader took ``workspace_config()`` for a dict; each member names its return type."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## CheckContext members", 1)[1].split("\n## ", 1)[0]
    for block in section.split("\n### ctx.")[1:]:
        name = block.split("\n", 1)[0]
        assert "returns: " in block.lower(), f"ctx.{name} does not say what it returns"
        assert "```python" in block, f"ctx.{name} has no example"
    assert "WorkspaceConfig | None" in section and "not a dict" in section


def test_an_unknown_need_is_refused_when_the_check_is_declared():
    with pytest.raises(RegistryError, match=r"TEAM001: unknown need\(s\) \['log'\]"):
        check("TEAM001", "typo", needs=["log"])(lambda ctx: None)
    assert check("TEAM002", "fine", needs=("logs", "ledger"))(lambda ctx: None)  # near miss


def rules_config(tmp_path: Path, files: str) -> str:
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "id": "TEAM301",
                        "slug": "saved",
                        "files": files,
                        "literal": "saving checkpoint",
                        "fail_when": "absent",
                        "verdict": "infra",
                    }
                ]
            }
        )
    )
    return str(cfg)


def test_a_rule_glob_from_the_sweep_folder_matches_each_runs_log(tmp_path, run_health):
    sweep = healthy_session(tmp_path / "s")
    res = run_health(
        sweep, args=("-k", "TEAM301", "--runhealth-config", rules_config(tmp_path, "runs/*/logs/stdout.log"))
    )
    outcomes = {r["run"]: r["outcome"] for r in res.results("TEAM301")}
    assert outcomes and set(outcomes.values()) == {"passed"}, outcomes
    assert "matched nothing" not in res.stdout


def test_a_rule_that_matches_nothing_anywhere_says_so_once(tmp_path, run_health):
    sweep = healthy_session(tmp_path / "s")
    res = run_health(
        sweep, args=("-k", "TEAM301", "--runhealth-config", rules_config(tmp_path, "runs/*/log/stdout.log"))
    )
    assert {r["outcome"] for r in res.results("TEAM301")} == {"skipped"}
    assert res.stdout.count("rule TEAM301: files 'runs/*/log/stdout.log' matched nothing in any of") == 1


def test_the_check_on_example_runs_as_shown(tmp_path):
    """QA: the documented ``check_on`` block expected verdict ``infra`` from a
    check that reports ``config``, a threshold the check does not have, and
    example folders the pack does not hold. The block is now the check pack's
    own test file, and it passes there."""
    import subprocess
    import sys

    from conftest import EXAMPLES

    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Testing a check: `check_on`", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    pack = EXAMPLES / "check_pack"
    shipped = (pack / "tests" / "test_check_on.py").read_text(encoding="utf-8")
    assert shipped.endswith(block), "examples/check_pack/tests/test_check_on.py differs from the documented block"
    root = Path(__file__).resolve().parent.parent
    env = {**__import__("os").environ, "PYTHONPATH": f"{root}{__import__('os').pathsep}{pack / 'src'}"}
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--rootdir",
            str(pack),
            "-c",
            str(pack / "pyproject.toml"),
            str(pack / "tests" / "test_check_on.py"),
            "--basetemp",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=pack,
    )
    assert ran.returncode == 0 and "3 passed" in ran.stdout, ran.stdout + ran.stderr
