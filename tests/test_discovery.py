"""Run discovery (issue 15): ``--run-dir ROOT`` finds every run below ROOT,
whatever its kind, once; links out and loops are not followed; a folder of
round folders is one harvest, gated like one."""

from __future__ import annotations

import json
import os
from pathlib import Path

from eval_builders import T0, episode, request, write
from sweep_builders import healthy_session
from trainerfiles import kohya_scalars, write_events, write_safetensors

from pytest_runhealth.plugins.discovery import discover
from pytest_runhealth.readers.rundir import RunDir, walk

FAST = ("-p", "no:unraisableexception", "-p", "no:threadexception")


def ltx_workspace(root: Path) -> Path:
    (root / "logs").mkdir(parents=True)
    (root / "config.yaml").write_text("model:\n  training_mode: lora\noptimization:\n  steps: 100\n")
    (root / "logs" / "train.log").write_text("🚀 Starting training...\n")
    return root


def ltx_output(root: Path) -> Path:
    write_safetensors(root / "checkpoints" / "lora_weights_step_00100.safetensors")
    return root


def kohya_output(root: Path, name: str) -> Path:
    write_safetensors(root / f"{name}-step00000250.safetensors")
    write_events(root / "logs" / "20260314090000" / "network_train", kohya_scalars(10))
    return root


def round_folder(root: Path, rid: str, status: str = "completed", scores=(9.0, 3.0)) -> Path:
    eps = [episode(status, scores), episode(status, scores)]
    write(root / "experience_request.json", request(rid, status, eps))
    for i, ep in enumerate(eps):
        write(root / f"episode_{i:02d}" / "episode.json", ep)
    return root


def mixed_tree(root: Path, outside: Path) -> Path:
    """Every kind, nested the way users keep them, with links out and a loop."""
    healthy_session(root / "sweeps" / "s1")
    healthy_session(root / "sweeps" / "s2")
    ltx_workspace(root / "ltx" / "ws-a")
    ltx_output(root / "ltx" / "out-b")
    kohya_output(root / "outputs" / "lora-a", "lora-a")
    kohya_output(root / "outputs" / "lora-b", "lora-b")
    for i in range(3):
        round_folder(root / "evals" / "league-7" / f"round-{i}", f"xr-{i}")
    (root / "evals" / "league-7" / "harvest.log").write_text("harvested 3 rounds\n")
    round_folder(root / "evals" / "solo", "xr-9")
    (root / "misc" / "tb").mkdir(parents=True)
    write_events(root / "misc" / "tb", kohya_scalars(5))
    (root / "misc" / "notes").mkdir()
    (root / "misc" / "notes" / "readme.md").write_text("nothing here\n")
    # Links: a run outside ROOT, a loop back to ROOT, a second name for a run inside ROOT.
    kohya_output(outside / "elsewhere", "elsewhere")
    os.symlink(outside / "elsewhere", root / "outputs" / "linked-out")
    os.symlink(root, root / "misc" / "loop")
    os.symlink(root / "outputs" / "lora-a", root / "outputs" / "lora-a-again")
    return root


def test_a_tree_of_every_kind_is_found_once_and_no_link_is_followed(tmp_path):
    root = mixed_tree(tmp_path / "ROOT", tmp_path / "outside")
    d = discover(root)
    found = {f.label(d.root): f.kind for f in d.runs}
    assert found == {
        "sweeps/s1": "sweep",
        "sweeps/s2": "sweep",
        "ltx/ws-a": "trainer",
        "ltx/out-b": "trainer",
        "outputs/lora-a": "kohya",
        "outputs/lora-b": "kohya",
        "evals/league-7": "harvest",
        "evals/solo": "harvest",
        "misc/tb": "generic",
    }
    league = next(f for f in d.runs if f.label(d.root) == "evals/league-7")
    assert [r.name for r in league.rounds] == ["round-0", "round-1", "round-2"]
    assert d.links_out == 1  # outputs/linked-out; the loop and the inner link lead inside ROOT
    assert all("elsewhere" not in str(f.path) and "loop" not in str(f.path) for f in d.runs)


def test_depth_bounds_the_search_and_a_run_root_is_one_run(tmp_path):
    root = mixed_tree(tmp_path / "ROOT", tmp_path / "outside")
    assert {f.label(root) for f in discover(root, depth=1).runs} == {"ROOT"}  # nothing at depth 1: root unrecognised
    assert discover(root, depth=1).runs[0].kind == "unrecognised"
    shallow = {f.label(root): f.kind for f in discover(root, depth=2).runs}
    assert set(shallow) == {
        "sweeps/s1",
        "sweeps/s2",
        "ltx/ws-a",
        "ltx/out-b",
        "outputs/lora-a",
        "outputs/lora-b",
        "evals/solo",
        "evals/league-7",
        "misc/tb",
    }
    assert shallow["evals/league-7"] == "generic"  # its rounds lie past the depth: only its own log is seen
    s1 = root / "sweeps" / "s1"
    assert [(f.path, f.kind) for f in discover(s1).runs] == [(s1, "sweep")]  # its runs/<id>/ stay its runs


def test_list_runs_prints_kinds_and_the_header_counts(tmp_path, pytester):
    root = mixed_tree(tmp_path / "ROOT", tmp_path / "outside")
    res = pytester.runpytest("-p", "no:cacheprovider", "--run-dir", str(root), "--runhealth-list-runs")
    assert res.ret == 0
    out = res.stdout.str()
    assert (
        f"{root}: 2 trainer runs, 2 kohya runs, 2 sweep sessions (10 runs), 2 harvests (4 rounds), "
        "1 generic run (1 link(s) out not followed)"
    ) in out, out
    res.stdout.fnmatch_lines(
        ["*harvest*evals/league-7  (3 rounds)", "*kohya*outputs/lora-a", "*sweep*sweeps/s1  (5 runs)"]
    )
    bad = pytester.runpytest("-p", "no:cacheprovider", "--run-dir", str(root), "--runhealth-depth", "x")
    assert bad.ret == 4 and "runhealth-depth" in bad.stderr.str() + bad.stdout.str()


def test_a_session_over_root_checks_each_run_under_its_label(tmp_path, run_health):
    root = mixed_tree(tmp_path / "ROOT", tmp_path / "outside")
    res = run_health(root, args=("-k", "RH001 or RH505", *FAST))
    runs = {r["run_dir"] for r in res.results()}
    assert {"sweeps/s1", "sweeps/s2", "evals/league-7", "outputs/lora-a"} <= runs
    assert res.result_of("RH505", run="evals/league-7")["outcome"] == "passed"
    res.result.stdout.fnmatch_lines([f"{root}: 2 trainer runs, 2 kohya runs, 2 sweep sessions (10 runs)*"])


# -- a harvest folder of round folders -----------------------------------------
def gate_config(tmp_path: Path) -> str:
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text(
        json.dumps({"gate": {"candidate": "pv-0", "claim": "wins"}, "thresholds": {"RH508": {"min_rounds": 3}}})
    )
    return str(cfg)


def test_a_folder_of_round_folders_passes_the_gate_as_one_harvest(tmp_path, run_health, pytester):
    h = tmp_path / "harvest"
    for i in range(7):  # seven won rounds: the fewest the gate's test promotes on
        round_folder(h / f"round-{i}", f"xr-{i}")
    write(h / "summary.json", {"fetched_at": T0})
    res = run_health(h, args=(*FAST, "--runhealth-gate", "--runhealth-config", gate_config(tmp_path)))
    assert res.ret == 0, res.stdout
    assert res.outcome("RH508") == "passed"
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert record["decision"] == "promote"
    assert [c["round"] for c in record["targets"]["harvest"]["counted"]] == [f"xr-{i}" for i in range(7)]


def test_a_folder_of_round_folders_is_refused_like_a_single_harvest(tmp_path, run_health, pytester):
    h = tmp_path / "harvest"
    round_folder(h / "round-0", "xr-0")
    round_folder(h / "round-1", "xr-1")
    round_folder(h / "round-2", "xr-2", status="running", scores=None)
    write(h / "summary.json", {"fetched_at": T0})
    res = run_health(h, args=(*FAST, "--runhealth-gate", "--runhealth-config", gate_config(tmp_path)))
    assert res.ret == 1
    r = res.result_of("RH508")
    assert (r["outcome"], r["verdict"]) == ("failed", "not-evaluable")
    assert "1 round(s) still running (xr-2)" in r["summary"]
    assert json.loads((pytester.path / "runhealth-report.verdict.json").read_text())["decision"] == "block"


# -- an unknown results.json shape ---------------------------------------------
def test_an_unknown_results_shape_is_a_format_problem_on_that_file(tmp_path, run_health):
    h = tmp_path / "h"
    ep = episode("completed", None)
    write(h / "experience_request.json", request("xr-1", "completed", [ep]))
    write(h / "episode_00" / "episode.json", ep)
    write(
        h / "episode_00" / "results.json",
        {"results": {"players": [{"name": "a", "score": 3}, {"name": "b", "score": 1}]}},
    )
    res = run_health(h, args=("-k", "RH505", *FAST))
    r = res.result_of("RH505")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "not-evaluable", "format-not-understood")
    assert "format not understood: episode_00/results.json, expected" in r["summary"]
    assert "missing" not in r["summary"].split("not understood")[0]
    assert r["evidence"][0]["path"] == "episode_00/results.json" and "players" in r["evidence"][0]["text"]


def test_a_known_results_shape_near_miss_is_read(tmp_path, run_health):
    h = tmp_path / "h"
    ep = episode("completed", None)
    write(h / "experience_request.json", request("xr-1", "completed", [ep]))
    write(h / "episode_00" / "episode.json", ep)
    write(
        h / "episode_00" / "results.json", {"scores": [{"player_id": "a", "score": 3}, {"player_id": "b", "score": 1}]}
    )
    assert run_health(h, args=("-k", "RH505", *FAST)).outcome("RH505") == "passed"


def test_a_workspace_is_one_run_with_its_output_folder(tmp_path):
    ws = tmp_path / "ws"  # no config.yaml: logs/ beside an LTX-2 output folder
    (ws / "logs").mkdir(parents=True)
    (ws / "logs" / "train.log").write_text("Step 20/100 - Loss: 0.1\n")
    ltx_output(ws / "outputs")
    assert [(f.path, f.kind) for f in discover(ws).runs] == [(ws, "trainer")]
    kohya_run = tmp_path / "k"  # a kohya run: its captured log beside output/
    (kohya_run / "train.log").parent.mkdir(parents=True)
    (kohya_run / "train.log").write_text("steps: 10%\n")
    kohya_output(kohya_run / "output", "lora")
    assert [(f.path, f.kind) for f in discover(kohya_run).runs] == [(kohya_run, "kohya")]
    assert [f.label(tmp_path) for f in discover(tmp_path).runs] == ["k", "ws"]


def test_walk_names_links_out_and_survives_loops(tmp_path):
    root = tmp_path / "run"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "stdout.log").write_text("ok\n")
    outside = tmp_path / "elsewhere.log"
    outside.write_text("secret\n")
    (root / "out.log").symlink_to(outside)
    (root / "dangling.log").symlink_to(root / "nope")
    (root / "loop").symlink_to(root / "loop")
    (root / "up").symlink_to(tmp_path)
    w = walk(root)
    assert [p.name for p in w.files] == ["stdout.log"]
    assert [p.name for p in w.broken_links] == ["dangling.log", "loop"]
    assert {(p.name, t) for p, t in w.outside_links} == {("out.log", outside), ("up", tmp_path)}
    assert RunDir(root).runs[0].logs == [root / "logs" / "stdout.log"]


def test_same_run_dir_twice_is_checked_once(tmp_path, run_health):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.log").write_text("step 1 loss 0.5\n")
    once = run_health(plain, args=("-k", "RH001 or RH002"))
    twice = run_health(plain, plain / ".", args=("-k", "RH001 or RH002"))
    assert [r["nodeid"] for r in twice.results()] == [r["nodeid"] for r in once.results()]
