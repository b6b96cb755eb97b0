"""RH209–RH211 and the pre-launch summary line, on real workspaces copied
from examples/ and edited the way a user edits config.yaml."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES

from pytest_runhealth.testing import check_on

PRELAUNCH = ("-m", "prelaunch", "-rs")
# The summary-line tests keep to checks that read only the workspace: live probes (GPU, LM Studio)
# answer differently on every machine.
WORKSPACE_ONLY = ("-k", "RH006 or RH209 or RH210 or RH211")


def workspace(tmp_path: Path, example: str = "workspace-ready", name: str = "ws", **changes) -> Path:
    """A copy of an example workspace with config keys changed
    (``model__text_encoder_path="x"`` sets model.text_encoder_path; None deletes)."""
    ws = tmp_path / name
    shutil.copytree(EXAMPLES / example, ws)
    if changes:
        cfg_path = ws / "config.yaml"
        cfg = yaml.safe_load(cfg_path.read_text())
        for dotted, value in changes.items():
            *parents, leaf = dotted.split("__")
            node = cfg
            for part in parents:
                node = node.setdefault(part, {})
            if value is None:
                node.pop(leaf, None)
            else:
                node[leaf] = value
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return ws


def prelaunch_line(stdout: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith("pre-launch:")]
    assert len(lines) == 1, stdout
    return lines[0]


# -- RH209 config-self-check --------------------------------------------------
def flexible(conditions: list[dict], **modalities) -> dict:
    strategy = {"name": "flexible", "video": {"is_generated": True, "latents_dir": "latents", "conditions": conditions}}
    strategy.update(modalities)
    return strategy


CONDITIONAL = [{"type": "reference", "latents_dir": "reference_latents"}, {"type": "mask", "mask_dir": "masks"}]
FOX_SAMPLE = [{"prompt": "a fox", "conditions": [{"type": "first_frame", "image_or_video": "refs/fox.png"}]}]
AUDIO = {"is_generated": True, "latents_dir": "audio_latents", "conditions": []}


def test_rh209_each_problem_is_named(tmp_path):
    """One session, one workspace per problem; each names its key and why."""
    cases = {
        "url": (
            {"model__model_path": "https://huggingface.co/Lightricks/LTX-2/resolve/main/ltx-2.safetensors"},
            "config-path-missing",
            "is a URL (https://huggingface.co/",
        ),
        "unset-root": (
            {"data__preprocessed_data_root": None},
            "config-path-missing",
            "data.preprocessed_data_root (preprocessed dataset) is not set",
        ),
        "frames-93": ({"validation__video_dims": [768, 512, 93]}, "frames-constraint", "nearest valid: 89 or 97"),
        "width-770": ({"validation__video_dims": [770, 512, 97]}, "frames-constraint", "width = 770"),
        "conditional": ({"training_strategy": flexible(CONDITIONAL)}, "config-path-missing", "video reference latents"),
        "legacy-v2v": (
            {"training_strategy": {"name": "video_to_video", "reference_latents_dir": "reference_latents"}},
            "config-path-missing",
            "training_strategy.reference_latents_dir",
        ),
        "audio-latents": (
            {"training_strategy": flexible([], audio=AUDIO)},
            "config-path-missing",
            "audio latents (generated modality)",
        ),
        "validation-media": (
            {"validation__samples": FOX_SAMPLE},
            "config-path-missing",
            "validation.samples.0.conditions.0.image_or_video",
        ),
        "name-too-long": (
            {"model__text_encoder_path": "g" * 5000, "output_dir": "o" * 5000},
            "config-path-missing",
            "cannot be looked up",
        ),
        "not-a-path": ({"model__model_path": 42}, "config-path-missing", "is int 42, not a path"),
    }
    dirs = [workspace(tmp_path, name=name, **changes) for name, (changes, _, _) in cases.items()]
    found = {ws.name: check_on(ws, "RH209").of() for ws in dirs}
    for name, (_, cause, says) in cases.items():
        r = found[name]
        assert (r.passed, r.verdict, r.cause) == (False, "config", cause), (name, r)
        assert says in r.summary, (name, r.summary)
        lines = (tmp_path / name / "config.yaml").read_text().splitlines()
        quoted = [(lines[e.line - 1].strip(), e.text.rstrip("…")) for e in r.evidence if e.line]
        assert quoted and all(line.startswith(text) for line, text in quoted), (name, r.evidence)
    assert "video masks" in found["conditional"].summary
    assert "Model path cannot be a URL" in found["url"].summary


def test_rh209_near_misses_pass(tmp_path, monkeypatch):
    ready = workspace(tmp_path, name="relative")
    absolute = workspace(
        tmp_path,
        name="absolute",
        model__model_path=str(ready / "models/ltx-2.3-22b-dev.safetensors"),
        model__text_encoder_path=str(ready / "models/gemma-3-12b-it"),
        data__preprocessed_data_root=str(ready / "dataset/.precomputed"),
    )
    present = {
        "conditional": (
            {"training_strategy": flexible(CONDITIONAL)},
            ["dataset/.precomputed/reference_latents", "dataset/.precomputed/masks"],
        ),
        "legacy-v2v": (
            {"training_strategy": {"name": "video_to_video", "reference_latents_dir": "reference_latents"}},
            ["dataset/.precomputed/reference_latents"],
        ),
        "validation-media": ({"validation__samples": FOX_SAMPLE}, ["refs"]),
    }
    dirs = [ready, absolute]
    for name, (changes, folders) in present.items():
        ws = workspace(tmp_path, name=name, **changes)
        for folder in folders:
            (ws / folder).mkdir(parents=True)
        dirs.append(ws)
    (tmp_path / "validation-media/refs/fox.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    monkeypatch.chdir(tmp_path)  # not a workspace: only the config's folder makes relative paths exist
    found = {ws.name: check_on(ws, "RH209").of() for ws in dirs}
    for name, r in found.items():
        assert r.passed, (name, r)
    note = found["relative"].note
    assert "relative path(s)" in note and "model.model_path" in note
    assert "relative" not in found["absolute"].note


def test_rh209_temporal_factor_is_a_threshold(tmp_path):
    ws = workspace(tmp_path, validation__video_dims=[768, 512, 93])  # (93 - 1) % 8 = 4, % 4 = 0
    assert check_on(ws, "RH209").of().cause == "frames-constraint"
    conf = tmp_path / "runhealth.yaml"
    conf.write_text("thresholds:\n  RH209:\n    vae_temporal_factor: 4\n")
    assert check_on(ws, "RH209", config=conf).of().passed


def test_bad_config_is_a_finding_or_a_skip_never_a_traceback(tmp_path):
    contents = {
        "invalid-yaml": (b"model: [unclosed\n", "not valid YAML"),
        "a-list": (b"- just\n- a list\n", "not a mapping"),
        "binary-huge": (b"\x00\xff" * 3_000_000, "not a config file"),  # 6 MB, no newline
    }
    dirs = []
    for name, (content, _) in contents.items():
        ws = workspace(tmp_path, name=name)
        (ws / "config.yaml").write_bytes(content)
        dirs.append(ws)
    other = tmp_path / "not-ltx"
    other.mkdir()
    (other / "config.yaml").write_text("learning_rate: 0.1\nbatch: 8\n")
    for ws in dirs:
        r = check_on(ws, "RH209").of()
        assert not r.passed and contents[ws.name][1] in r.summary, (ws.name, r)
        for check in ("RH210", "RH211"):
            assert ws.name in check_on(ws, check).skipped, (check, ws.name)
    for check in ("RH209", "RH210", "RH211"):
        assert "not-ltx" in check_on(other, check).skipped, check
    assert "not an LTX-2 trainer config" in check_on(other, "RH209").skipped["not-ltx"]


# -- RH210 tracker-credentials ------------------------------------------------
# A stand-in for the wandb package at the narrow boundary RH210 uses (wandb.Api().api_key,
# wandb.errors.UsageError): wandb is not a dependency and must not be installed for tests.
FAKE_WANDB = {
    "wandb/__init__.py": """
        import os, time
        from wandb import errors
        __version__ = "0.0.test"

        class Api:
            def __init__(self):
                mode = os.environ.get("FAKE_WANDB_BEHAVIOUR", "")
                if mode == "hang":
                    time.sleep(30)
                key = os.environ.get("WANDB_API_KEY")
                if not key and mode == "raise":
                    raise errors.UsageError("api_key not configured (no-tty). call wandb.login(key=[your_api_key])")
                self._key = key

            @property
            def api_key(self):
                return self._key
    """,
    "wandb/errors.py": """
        class Error(Exception):
            pass

        class UsageError(Error):
            pass
    """,
}


@pytest.fixture
def fake_wandb(pytester, monkeypatch):
    for rel, text in FAKE_WANDB.items():
        path = pytester.path / "fakes" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    pytester.syspathinsert(pytester.path / "fakes")
    for var in ("WANDB_API_KEY", "WANDB_MODE", "FAKE_WANDB_BEHAVIOUR"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_rh210_skipped_when_disabled_or_not_installed(tmp_path, run_health, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed, also where the reallibs extra installed it
    disabled, enabled = workspace(tmp_path, name="disabled"), workspace(tmp_path, name="enabled", wandb__enabled=True)
    res = run_health(disabled, enabled, args=PRELAUNCH + ("-k", "RH210"))
    r = res.result_of("RH210", "disabled")
    assert r["outcome"] == "skipped" and "W&B is disabled in config.yaml" in r["note"]
    r = res.result_of("RH210", "enabled")
    assert r["outcome"] == "skipped" and "wandb is not installed" in r["note"]


def test_rh210_fails_when_no_key_resolves(tmp_path, run_health, fake_wandb):
    ws = workspace(tmp_path, wandb__enabled=True)
    res = run_health(ws, args=PRELAUNCH)
    r = res.result_of("RH210")
    assert r["outcome"] == "failed" and r["verdict"] == "config" and r["cause"] == "tracker-credentials-missing"
    assert "api_key is empty" in r["summary"]
    enabled_line = next(e for e in r["evidence"] if e["path"] == "config.yaml")
    assert enabled_line["text"] == "enabled: true"
    assert "RH210 tracker-credentials (tracker-credentials-missing)" in prelaunch_line(res.stdout)


def test_rh210_usage_error_is_no_key(tmp_path, run_health, fake_wandb):
    fake_wandb.setenv("FAKE_WANDB_BEHAVIOUR", "raise")
    r = run_health(workspace(tmp_path, wandb__enabled=True), args=PRELAUNCH + ("-k", "RH210")).result_of("RH210")
    assert r["outcome"] == "failed" and "UsageError: api_key not configured" in r["summary"]


def test_rh210_passes_when_key_resolves_and_never_shows_it(tmp_path, run_health, fake_wandb):
    secret = "0123456789abcdef0123456789abcdef01234567"
    fake_wandb.setenv("WANDB_API_KEY", secret)
    res = run_health(workspace(tmp_path, wandb__enabled=True), args=PRELAUNCH + ("-k", "RH210", "-rA"))
    r = res.result_of("RH210")
    assert r["outcome"] == "passed" and "a key resolves (from WANDB_API_KEY)" in r["note"]
    assert secret not in res.stdout and secret not in str(res.report)


def test_rh210_offline_mode_needs_no_key(tmp_path, run_health, fake_wandb):
    fake_wandb.setenv("WANDB_MODE", "offline")
    r = run_health(workspace(tmp_path, wandb__enabled=True), args=PRELAUNCH + ("-k", "RH210")).result_of("RH210")
    assert r["outcome"] == "passed" and "WANDB_MODE=offline" in r["note"]


def test_rh210_hanging_library_is_bounded(tmp_path, run_health, fake_wandb):
    fake_wandb.setenv("FAKE_WANDB_BEHAVIOUR", "hang")
    conf = tmp_path / "runhealth.yaml"
    conf.write_text("thresholds:\n  RH210:\n    timeout_s: 0.2\n")
    res = run_health(
        workspace(tmp_path, wandb__enabled=True), args=PRELAUNCH + ("-k", "RH210", "--runhealth-config", str(conf))
    )
    r = res.result_of("RH210")
    assert r["outcome"] == "skipped" and "did not return within 0.2 s" in r["note"]


# -- RH211 output-dir-fresh ---------------------------------------------------
def test_rh211_passes_resume_and_explicit_fresh_start(tmp_path):
    elsewhere = tmp_path / "shared-outputs"
    shutil.copytree(EXAMPLES / "workspace-reused-output/outputs", elsewhere)
    dirs = [
        workspace(tmp_path, "workspace-resume", name="resume-latest"),
        workspace(
            tmp_path,
            "workspace-resume",
            name="resume-older",
            model__load_checkpoint="outputs/checkpoints/lora_weights_step_01000.safetensors",
        ),
        workspace(tmp_path, "workspace-reused-output", name="fresh-on-purpose", checkpoints__no_resume=True),
        workspace(tmp_path, name="outside", output_dir=str(elsewhere)),
        workspace(tmp_path, name="no-weights"),
    ]
    (tmp_path / "no-weights/outputs/checkpoints").mkdir(parents=True)
    (tmp_path / "no-weights/outputs/checkpoints/notes.txt").write_text("nothing saved yet\n")
    notes = {ws.name: check_on(ws, "RH211").of() for ws in dirs}
    assert notes["resume-latest"].passed and "older" not in notes["resume-latest"].note
    assert notes["resume-older"].passed and "older than the latest" in notes["resume-older"].note
    assert notes["fresh-on-purpose"].passed and "no_resume: true" in notes["fresh-on-purpose"].note
    assert notes["no-weights"].passed and "holds no checkpoints" in notes["no-weights"].note
    outside = notes["outside"]
    assert not outside.passed and outside.cause == "output-dir-reused"
    assert outside.evidence[0].path == str(elsewhere / "checkpoints/lora_weights_step_02000.safetensors")


# -- the moment: plain sessions and the summary line --------------------------
def test_examples_block_the_launch_with_both_blockers_named(run_health):
    res = run_health(
        EXAMPLES / "workspace-missing-encoder", EXAMPLES / "workspace-reused-output", args=PRELAUNCH + WORKSPACE_ONLY
    )
    assert res.ret == 1
    r = res.result_of("RH209", "workspace-missing-encoder")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "config", "config-path-missing")
    assert "model.text_encoder_path" in r["summary"] and "frames = 96" in r["summary"]
    assert {("config.yaml", 4), ("config.yaml", 41)} <= {(e["path"], e["line"]) for e in r["evidence"]}
    r = res.result_of("RH211", "workspace-reused-output")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "config", "output-dir-reused")
    assert "lora_weights_step_02000.safetensors (step 2000)" in r["summary"]
    assert {"path": "config.yaml", "line": 6, "text": "load_checkpoint: null"} in r["evidence"]
    assert "model.load_checkpoint:" in r["fix"] and "lora_weights_step_02000" in r["fix"]
    assert res.outcome("RH211", "workspace-missing-encoder") == "passed"
    assert res.outcome("RH209", "workspace-reused-output") == "passed"
    line = prelaunch_line(res.stdout)
    assert line.startswith("pre-launch: NOT ready, 2 blocker(s): ")
    assert "RH209 config-self-check (config-path-missing) [workspace-missing-encoder]" in line
    assert "RH211 output-dir-fresh (output-dir-reused) [workspace-reused-output]" in line


def test_ready_line_and_exit_code(run_health):
    res = run_health(EXAMPLES / "workspace-ready", args=PRELAUNCH + WORKSPACE_ONLY)
    assert res.ret == 0
    assert prelaunch_line(res.stdout).startswith("pre-launch: ready to launch (")
    assert res.stdout.index("pre-launch: ready") > res.stdout.index("checks: ")  # after the run-health summary


def test_nothing_checked_is_not_ready(tmp_path, run_health):
    target = tmp_path / "not-a-workspace"
    target.mkdir()  # RH006 passes (it only ever notes): that alone is no evidence of readiness
    # An empty folder before its launch, or one with only a note: nothing checked, never "ready" (exit 5).
    for _ in range(2):
        res = run_health(target, args=PRELAUNCH + WORKSPACE_ONLY)
        assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED
        assert prelaunch_line(res.stdout).startswith("pre-launch: nothing checked")
        (target / "notes.log").write_text("a note\n")  # something a check reads, but no workspace
    # Issue 35: without -m prelaunch, a folder with nothing to check is a usage error, never a verdict.
    (target / "notes.log").unlink()
    res = run_health(target)
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "nothing here to check" in res.result.stderr.str()


def test_a_missing_run_dir_is_a_usage_error_not_a_prelaunch_verdict(tmp_path, run_health):
    """Issue 18: a mistyped --run-dir is exit 4 with one line naming it."""
    res = run_health(tmp_path / "not-a-workspace", args=PRELAUNCH + WORKSPACE_ONLY)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--run-dir" in res.result.stderr.str() and "not-a-workspace: does not exist" in res.result.stderr.str()


def test_plain_session_leaves_out_prelaunch_only_checks(run_health):
    res = run_health(EXAMPLES / "workspace-reused-output")
    assert not res.results("RH211") and not res.results("RH209")
    assert "deselected" in res.stdout and "pre-launch:" not in res.stdout


def test_explicit_selection_still_reaches_prelaunch_checks(run_health):
    res = run_health(EXAMPLES / "workspace-reused-output", args=("-k", "RH211"))
    assert res.outcome("RH211") == "failed"


def test_prelaunch_checks_do_not_import_wandb_at_plugin_load(pytester):
    out = pytester.run(
        sys.executable,
        "-c",
        "import sys, pytest_runhealth.plugin, pytest_runhealth.features.prelaunch_summary, pytest_runhealth.checks.trainer.prelaunch; "
        "print('wandb' in sys.modules)",
    )
    assert out.stdout.lines[-1] == "False"
