"""The CI recipes for the gate (docs/ci.md): the composite action's shell steps (action.yml) and the GitLab CI
job's script, run as the runners run them (bash, their env, $GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY) on a harvest
that promotes and on one that must not. The install steps are left out: the package under test is installed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES, REPO

PROMOTES = EXAMPLES / "harvest-healthy"  # pv-cand wins every round
SPLIT = EXAMPLES / "harvest-gate-split"  # the claim is not shown: no promotion


def _python_bin(tmp_path: Path) -> dict[str, str]:
    """PATH with this interpreter first, as ``python3``/``pytest-runhealth`` (the runner's setup-python)."""
    bin_dir = Path(sys.executable).parent
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def run_action(tmp_path: Path, **given: str) -> tuple[subprocess.CompletedProcess, dict[str, str], str]:
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    inputs.update(install="false", python=sys.executable, **given)
    output, summary = tmp_path / "github_output", tmp_path / "step_summary"
    output.write_text("")
    summary.write_text("")
    done = None
    for step in action["runs"]["steps"]:
        cond = step.get("if")
        if cond:
            m = re.fullmatch(r"inputs\.([\w-]+) == '([^']*)'", cond)
            assert m, f"the test reads only `inputs.X == 'v'` conditions, not {cond!r}"
            if inputs[m[1]] != m[2]:
                continue
        env = dict(os.environ, **_python_bin(tmp_path), GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary))
        env["GITHUB_ACTION_PATH"] = str(REPO)
        for key, value in (step.get("env") or {}).items():
            env[key] = re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: inputs[m[1]], str(value))
        assert step["shell"] == "bash"
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],  # GitHub's bash
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode:
            break
    assert done is not None
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return done, outputs, summary.read_text()


def test_the_action_passes_a_harvest_that_promotes(tmp_path):
    done, outputs, summary = run_action(tmp_path, **{"run-dirs": str(PROMOTES), "candidate": "pv-cand"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert outputs["decision"] == "promote"
    record = json.loads(Path(outputs["verdict-file"]).read_text())
    assert record["decision"] == "promote"
    assert Path(outputs["verdict-file"]) == tmp_path / "runhealth" / "report.verdict.json"
    assert "PROMOTE" in summary or "promote" in summary.lower()


def test_the_action_fails_the_step_when_the_gate_blocks(tmp_path):
    done, outputs, _ = run_action(tmp_path, **{"run-dirs": f"{SPLIT}\n", "candidate": "pv-cand"})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert outputs["decision"] == "block"  # written although the session failed (the runner's bash has -e)


def test_the_action_says_a_usage_error(tmp_path):
    done, outputs, _ = run_action(tmp_path, **{"run-dirs": str(tmp_path / "no-such-harvest"), "candidate": "pv"})
    assert done.returncode == 4
    assert outputs["decision"] in ("usage-error", "none")


def gitlab_job() -> dict:
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    block = text.split("## GitLab CI", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    return yaml.safe_load(block)["runhealth-gate"]


@pytest.mark.parametrize(("harvest", "code", "decision"), [(PROMOTES, 0, "promote"), (SPLIT, 1, "block")])
def test_the_gitlab_job_exits_with_the_gates_decision(tmp_path, harvest, code, decision):
    job = gitlab_job()
    lines = [ln for ln in job["script"] if not ln.startswith("pip install")]
    env = dict(os.environ, **_python_bin(tmp_path), **{k: str(v) for k, v in job["variables"].items()})
    env["RUN_DIRS"] = str(harvest)
    done = subprocess.run(
        ["bash", "-e", "-c", "\n".join(lines)],  # GitLab runs each line and stops at the first that fails
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == code, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((tmp_path / "runhealth" / "report.verdict.json").read_text())
    assert record["decision"] == decision
    assert (tmp_path / "runhealth" / "junit.xml").is_file() and (tmp_path / "runhealth" / "report.md").is_file()
    assert set(job["artifacts"]["paths"]) == {"runhealth/"}
