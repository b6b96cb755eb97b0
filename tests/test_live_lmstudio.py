"""The LM Studio checks (RH401–RH406) against a real HTTP server on
127.0.0.1 that speaks LM Studio's documented API (tests/servers/lmstudio.py)."""

from __future__ import annotations

import json
import os
import socket

import pytest
from live_helpers import run_health, sleeper, warm_imports  # noqa: F401  (fixture)
from servers.lmstudio import FakeLMStudio, Model

from pytest_runhealth.live.lmstudio import LMStudioClient, extract_scores, normalise_base_url

JUDGE = "qwen2.5-vl-7b-instruct"
FAST = ("--runhealth-probe-timeout", "0.5")


warm_imports()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("LMSTUDIO_URL", "LM_API_TOKEN", "BRACKET_LMS_BIN", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def plain(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "train.log").write_text("step 1/10 loss 0.5\n")  # a run, else the session is "nothing here to check"
    return d


@pytest.fixture
def sweep(tmp_path):
    d = tmp_path / "session"
    d.mkdir()
    rows = [{"run_id": "baseline-000-s0", "role": "baseline", "n_steps": 1500, "judge_report": {"model": JUDGE}}]
    (d / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the client ----------------------------------------------------------------
@pytest.mark.parametrize(
    "given",
    [
        "http://127.0.0.1:1234",
        "http://127.0.0.1:1234/",
        "http://127.0.0.1:1234/v1",
        "http://127.0.0.1:1234/v1/",
        "127.0.0.1:1234",
    ],
)
def test_base_url_never_doubles_a_slash(given):
    assert normalise_base_url(given) == "http://127.0.0.1:1234"


def test_unload_through_v1_then_nothing_is_loaded():
    with FakeLMStudio(models=[Model(JUDGE, loaded=True)]) as srv:
        client = LMStudioClient(srv.url)
        loaded, _ = client.loaded_models()
        assert [m.id for m in loaded] == [JUDGE]
        assert client.unload(JUDGE).data == {"instance_id": JUDGE}
        assert LMStudioClient(srv.url).loaded_models()[0] == []


def test_unknown_route_answered_200_is_an_error_not_a_success():
    from pytest_runhealth.live.lmstudio import api_error

    with FakeLMStudio() as srv:
        reply = LMStudioClient(srv.url).request("POST", "/api/v0/models/unload", {"model": JUDGE})
    assert reply.status == 200
    assert api_error(reply)[0] == "unexpected-endpoint"


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"score": 7}', {"score": 7}),
        ('<think>The cube is red, so {"score": 1} is wrong</think>\n{"score": 9}', {"score": 9}),
        (
            'Sure! Here you go: ```json\n{"scores": {"prompt_match": 8, "quality": 6}}\n```',
            {"scores": {"prompt_match": 8, "quality": 6}},
        ),
        ("The image shows a red cube. I would rate it highly.", None),
        ('{"verdict": "good"}', None),
        ('<think>unfinished reasoning {"score": 3}', None),
    ],
)
def test_extract_scores(text, expected):
    assert extract_scores(text) == expected


# -- RH401 ---------------------------------------------------------------------
def test_healthy_server_passes_reachability_and_unload(plain, run_health):
    with FakeLMStudio(models=[Model(JUDGE)]) as srv:
        res = run_health(plain, args=("--lmstudio-url", srv.url, "-k", "RH401 or RH402", "-rA"))
    assert res.outcome("RH401") == "passed" and res.outcome("RH402") == "passed"
    assert "no model loaded" in res.result_of("RH402")["note"]


def test_not_configured_and_not_there_is_skipped(plain, run_health):
    res = run_health(plain, args=("--runhealth-probe-timeout", "0.5", "-k", "RH401", "-rs"))
    if res.outcome("RH401") == "passed":
        pytest.skip("something answers on 127.0.0.1:1234 on this machine")
    assert res.outcome("RH401") == "skipped"
    assert "not configured" in res.stdout


def test_named_and_down_fails_every_live_check(plain, run_health):
    url = f"http://127.0.0.1:{free_port()}"
    res = run_health(plain, args=("--lmstudio-url", url, "--lmstudio-judge-model", JUDGE, *FAST, "-k", "RH40"))
    for check_id in ("RH401", "RH402", "RH406"):
        r = res.result_of(check_id)
        assert r["outcome"] == "failed" and r["cause"] == "lmstudio-unreachable", (check_id, res.stdout)


def test_env_url_counts_as_named(plain, run_health, monkeypatch):
    monkeypatch.setenv("LMSTUDIO_URL", f"http://127.0.0.1:{free_port()}")
    res = run_health(plain, args=(*FAST, "-k", "RH401"))
    assert res.result_of("RH401")["cause"] == "lmstudio-unreachable"
    assert "$LMSTUDIO_URL" in res.result_of("RH401")["summary"]


def test_token_required_but_not_configured(plain, run_health, monkeypatch):
    with FakeLMStudio(token="s3cret-token-value", models=[Model(JUDGE)]) as srv:
        res = run_health(plain, args=("--lmstudio-url", srv.url, "-k", "RH401"))
        assert res.result_of("RH401")["cause"] == "lmstudio-auth-token-missing"
        assert "no LM_API_TOKEN" in res.result_of("RH401")["summary"]
        monkeypatch.setenv("LM_API_TOKEN", "s3cret-token-value")
        res = run_health(plain, args=("--lmstudio-url", srv.url, "-k", "RH401"))
        assert res.outcome("RH401") == "passed"
        assert srv.requests[-1][2]["Authorization"] == "Bearer s3cret-token-value"


def test_hanging_server_gives_up_at_the_timeout_once(plain, run_health):
    with FakeLMStudio(hang_s=20, models=[Model(JUDGE)]) as srv:
        res = run_health(plain, args=("--lmstudio-url", srv.url, *FAST, "-k", "RH401 or RH402"))
        asked = [r for r in srv.requests if r[1] == "/v1/models"]
    r = res.result_of("RH401")
    assert r["cause"] == "lmstudio-unreachable" and "within 0.5 s" in r["summary"]
    assert res.result_of("RH402")["cause"] == "lmstudio-unreachable"
    assert len(asked) == 1  # one probe per session, shared by the checks


def test_invalid_json_answer(plain, run_health):
    with FakeLMStudio(invalid_json=True) as srv:
        res = run_health(plain, args=("--lmstudio-url", srv.url, "-k", "RH401"))
    r = res.result_of("RH401")
    assert r["cause"] == "lmstudio-unreachable" and "not JSON" in r["summary"]


def test_endless_body_is_stopped_by_the_size_cap(plain, run_health):
    with FakeLMStudio(endless=True) as srv:
        res = run_health(plain, args=("--lmstudio-url", srv.url, "-k", "RH401"))
        assert not srv.stream_ran_out  # the client stopped reading, not the server
    r = res.result_of("RH401")
    assert r["cause"] == "lmstudio-unreachable" and "cap" in r["summary"]


def test_bad_probe_timeout_is_a_usage_error(plain, pytester):
    res = pytester.runpytest("-p", "no:anyio", "--run-dir", str(plain), "--runhealth-probe-timeout", "0")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*probe timeout must be above 0*"])


# -- RH402 live ----------------------------------------------------------------
@pytest.mark.parametrize("v1", [True, False], ids=["v1-loaded_instances", "v0-state"])
def test_model_still_loaded_fails(sweep, run_health, v1):
    with FakeLMStudio(v1=v1, models=[Model(JUDGE, loaded=True), Model("other")]) as srv:
        res = run_health(sweep, args=("--lmstudio-url", srv.url, "-k", "RH402"))
    r = res.result_of("RH402")
    assert r["outcome"] == "failed" and r["cause"] == "vram-resident"
    assert JUDGE in r["summary"]
    assert r["evidence"][0]["path"].endswith("/api/v1/models" if v1 else "/api/v0/models")


def test_allowed_model_may_stay_loaded(sweep, run_health, pytester):
    pytester.makefile(".yaml", runhealth=f"thresholds:\n  RH402:\n    allowed_models: [{JUDGE}]\n")
    with FakeLMStudio(models=[Model(JUDGE, loaded=True)]) as srv:
        res = run_health(sweep, args=("--lmstudio-url", srv.url, "-k", "RH402"))
    assert res.outcome("RH402") == "passed"


# -- RH404 / RH406: the judge --------------------------------------------------
def judge_run(run_health, run_dir, model, **behaviour):
    with FakeLMStudio(models=[Model(model)], **behaviour) as srv:
        return run_health(
            run_dir, args=("--lmstudio-url", srv.url, "--lmstudio-judge-model", model, "-k", "RH404 or RH406", "-rA")
        )


def test_judge_answering_json_passes(plain, run_health):
    res = judge_run(run_health, plain, JUDGE)
    assert res.outcome("RH404") == "passed" and res.outcome("RH406") == "passed"
    assert "{'score': 8}" in res.result_of("RH406")["note"]


def test_json_after_think_block_passes_but_marks_thinking(plain, run_health):
    res = judge_run(run_health, plain, JUDGE, chat_content='<think>red cube, matches</think>{"score": 9}')
    assert res.outcome("RH406") == "passed"
    assert res.result_of("RH404")["cause"] == "thinking-judge-model"


def test_json_only_in_reasoning_content_passes_with_note(plain, run_health):
    res = judge_run(run_health, plain, JUDGE, chat_content="", chat_reasoning='Looking at it... {"score": 6}')
    r = res.result_of("RH406")
    assert r["outcome"] == "passed" and "only in reasoning_content" in r["note"]


def test_prose_answer_fails_judge_no_json(plain, run_health):
    res = judge_run(run_health, plain, JUDGE, chat_content="The image shows a red cube. I would rate it highly.")
    r = res.result_of("RH406")
    assert r["outcome"] == "failed" and r["cause"] == "judge-no-json"
    assert "red cube" in r["evidence"][0]["text"]


def test_thinking_model_name_fails_without_a_request(sweep, run_health):
    res = run_health(sweep, args=("--lmstudio-judge-model", "qwen3-vl-8b-thinking", *FAST, "-k", "RH404"))
    r = res.result_of("RH404")
    assert r["cause"] == "thinking-judge-model" and r["verdict"] == "config"


def test_judge_model_read_from_the_ledger(tmp_path, run_health):
    d = tmp_path / "s"
    d.mkdir()
    (d / "ledger.jsonl").write_text(
        json.dumps({"run_id": "a", "judge_report": {"model": "Qwen3-VL-30B-A3B-Thinking"}}) + "\n"
    )
    res = run_health(d, args=(*FAST, "-k", "RH404"))
    assert res.result_of("RH404")["cause"] == "thinking-judge-model"
    assert "ledger.jsonl:1" in res.result_of("RH404")["summary"]


def test_unknown_judge_model_is_refused(plain, run_health):
    with FakeLMStudio(models=[Model(JUDGE)]) as srv:
        res = run_health(
            plain, args=("--lmstudio-url", srv.url, "--lmstudio-judge-model", "no-such-model", "-k", "RH406")
        )
    assert res.result_of("RH406")["cause"] == "judge-model-unavailable"


def fake_lms(folder, body="echo 'lms - LM Studio CLI - v0.4.0'"):
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "lms"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)
    return exe


def test_full_round_against_healthy_server(plain, run_health, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_lms(tmp_path / 'bin').parent}{os.pathsep}{os.environ['PATH']}")
    with FakeLMStudio(models=[Model(JUDGE)]) as srv:
        res = run_health(plain, args=("--lmstudio-url", srv.url, "--lmstudio-judge-model", JUDGE, "-k", "RH3 or RH4"))
    outcomes = {r["check"]: r["outcome"] for r in res.results()}
    assert "failed" not in outcomes.values() and "error" not in outcomes.values(), res.stdout


# -- RH403: the lms CLI, as real executables -----------------------------------
def test_lms_on_path_resolves(plain, run_health, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_lms(tmp_path / "bin").parent))
    # LM Studio named on localhost: it runs on this machine, so this machine's CLI matters
    res = run_health(
        plain, args=("--lmstudio-url", "http://127.0.0.1:9", "--runhealth-probe-timeout", "0.3", "-k", "RH403", "-rA")
    )
    assert res.outcome("RH403") == "passed" and "lms on PATH" in res.result_of("RH403")["note"]


def test_a_log_from_another_machine_does_not_probe_this_ones_cli(plain, run_health, tmp_path, monkeypatch):
    """Issue 18: --lmstudio-log on a copied run dir says nothing about this machine: no RH403."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("BRACKET_LMS_BIN", raising=False)
    log = tmp_path / "server.log"
    log.write_text("2026-03-14 10:00:00 [INFO] Server started.\n")
    res = run_health(plain, args=("--lmstudio-log", str(log), "--runhealth-probe-timeout", "0.3", "-k", "RH403", "-rs"))
    assert res.outcome("RH403") == "skipped" and "not in use on this machine" in res.stdout


def test_prelaunch_of_an_lmstudio_sweep_checks_the_cli(tmp_path, run_health, monkeypatch):
    """Issue 18: -m prelaunch on a sweep whose ledger says judge_method: lmstudio checks RH403, and a
    missing CLI blocks the launch instead of a skip beside 'ready to launch'."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("BRACKET_LMS_BIN", raising=False)
    session = tmp_path / "session"
    session.mkdir()
    row = {"run_id": "setup-000", "role": "setup", "config": {"judge_method": "lmstudio"}}
    (session / "ledger.jsonl").write_text(json.dumps(row) + "\n")
    res = run_health(session, args=("-m", "prelaunch", "-k", "RH403", "--runhealth-probe-timeout", "0.3"))
    r = res.result_of("RH403")
    assert (r["outcome"], r["cause"]) == ("failed", "lms-cli-missing")
    assert "ready to launch" not in res.stdout
    # near-miss: the same sweep judged by something else is not LM Studio's business
    (session / "ledger.jsonl").write_text(json.dumps(dict(row, config={"judge_method": "none"})) + "\n")
    res = run_health(session, args=("-m", "prelaunch", "-k", "RH403", "--runhealth-probe-timeout", "0.3"))
    assert res.outcome("RH403") == "skipped"


def test_bracket_lms_bin_resolves_and_a_broken_one_is_named(plain, run_health, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("BRACKET_LMS_BIN", str(fake_lms(tmp_path / "opt")))
    res = run_health(plain, args=("-k", "RH403", "-rA"))
    assert res.outcome("RH403") == "passed" and "BRACKET_LMS_BIN" in res.result_of("RH403")["note"]
    # a BRACKET_LMS_BIN whose interpreter is missing cannot start; lms on PATH still does
    broken = fake_lms(tmp_path / "broken")
    broken.write_text("#!/nonexistent/interpreter\n")
    monkeypatch.setenv("BRACKET_LMS_BIN", str(broken))
    monkeypatch.setenv("PATH", str(fake_lms(tmp_path / "bin").parent))
    res = run_health(plain, args=("-k", "RH403", "-rA"))
    note = res.result_of("RH403")["note"]
    assert res.outcome("RH403") == "passed" and "cannot be started" in note and "fix or unset it" in note


def test_lms_missing_everywhere_fails(plain, run_health, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    not_exec = tmp_path / "opt" / "lms"
    not_exec.parent.mkdir()
    not_exec.write_text("#!/bin/sh\n")
    monkeypatch.setenv("BRACKET_LMS_BIN", str(not_exec))
    res = run_health(plain, args=("-k", "RH403"))
    r = res.result_of("RH403")
    assert r["outcome"] == "failed" and r["cause"] == "lms-cli-missing"
    assert "is not executable" in r["summary"] and "lms is not on PATH" in r["summary"]


def test_lms_not_needed_without_lm_studio(plain, run_health, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert run_health(plain, args=("--runhealth-probe-timeout", "0.3", "-k", "RH403")).outcome("RH403") == "skipped"


def test_a_trainer_run_on_this_machine_does_not_need_the_lms_cli(run_health, tmp_path, monkeypatch, sleeper):  # noqa: F811
    """Issue 18: a live pid makes the run local, but only LM Studio in use needs the lms CLI (a watched
    kohya run failed RH403 on every machine without LM Studio)."""
    monkeypatch.delenv("BRACKET_LMS_BIN", raising=False)
    monkeypatch.delenv("LMSTUDIO_URL", raising=False)
    d = tmp_path / "run"
    (d / "logs").mkdir(parents=True)
    (d / "logs" / "train.log").write_text("step 1/10 loss 0.5\nstep 2/10 loss 0.4\n")
    (d / "logs" / "train.pid").write_text(f"{sleeper().pid}\n")  # launched once its folder existed: local
    r = run_health(d, args=("-k", "RH403")).result_of("RH403")
    assert r["outcome"] == "skipped" and "nothing shows this run is on this machine" not in r["note"], r
