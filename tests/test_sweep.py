"""RH101–RH108 on sweep sessions built the way Bracket and kohya leave them:
for every check a session on which it fails and a near-miss on which it must
pass, then the bad input a real session can hold."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import sweep_builders as sb

from pytest_runhealth.testing import check_on


def only(check: str) -> tuple[str, ...]:
    return ("-k", check)


def failed(res, check: str) -> list[dict]:
    return [r for r in res.results(check) if r["outcome"] == "failed"]


def label(r: dict) -> str:
    """The test id's target: ``dir/run`` when several run dirs are checked at once."""
    return r["nodeid"].rsplit("[", 1)[1][:-1]


def of(res, check: str, target: str) -> dict:
    found = [r for r in res.results(check) if label(r) == target]
    assert len(found) == 1, f"{check}[{target}]: {len(found)} results\n{res.stdout}"
    return found[0]


def text_of(*findings) -> str:
    """Every finding rendered as the terminal shows it, and every skip reason."""
    return (
        "\n".join(f.render() for fs in findings for f in fs)
        + "\n"
        + "\n".join(reason for fs in findings for reason in fs.skipped.values())
    )


def config_file(pytester, text: str) -> tuple[str, ...]:
    path = pytester.path / "runhealth.yaml"
    path.write_text(text)
    return ("--runhealth-config", str(path))


# -- RH101 step-count-collapse -----------------------------------------------------------
def test_rh101_vram_leak_and_its_near_misses(tmp_path, run_health):
    leak = sb.vram_leak_session(tmp_path / "session-42")
    no_log = sb.vram_leak_session(tmp_path / "no-judge-log", with_lmstudio_log=False)
    healthy = sb.healthy_session(tmp_path / "healthy")  # the last run hits the wall clock at its normal rate
    rows = [
        sb.row(
            f"cand-{i:03d}",
            at=sb.at(40 * i),
            duration_s=1800.0,
            n_steps=3,
            score=None,
            judge=None,
            killed_by_timeout=True,
            exit_code=-9,
            error="timeout",
            disqualified="timeout",
        )
        for i in range(3)
    ]
    all_collapsed = sb.write_session(tmp_path / "all-collapsed", rows, {})
    res = run_health(leak, no_log, healthy, all_collapsed, args=only("RH101"))
    assert res.ret == 1
    bad = failed(res, "RH101")
    assert sorted(label(r) for r in bad if label(r).startswith("session-42/")) == [
        "session-42/baseline-000-s1",
        "session-42/cand-000-s0",
        "session-42/cand-001-s0",
        "session-42/cur-000-s0",
        "session-42/cur-000-s1",
    ]
    first = of(res, "RH101", "session-42/baseline-000-s1")
    assert first["verdict"] == "infra" and first["cause"] == "vram-leak-step-collapse"
    res.result.stdout.fnmatch_lines(
        [
            "RH101 step-count-collapse [[]baseline-000-s1[]]   verdict: infra   cause: vram-leak-step-collapse",
            "*baseline-000-s0 trained 1500 steps in 2210 s; baseline-000-s1 stopped at 3 steps after 1800 s "
            "(killed_by_timeout), and so did the 4 runs after it.",
        ]
    )
    ev = first["evidence"]
    assert (ev[0]["path"], ev[0]["line"]) == ("ledger.jsonl", 1) and '"n_steps":1500' in ev[0]["text"]
    assert (ev[1]["path"], ev[1]["line"]) == ("ledger.jsonl", 2) and '"killed_by_timeout":true' in ev[1]["text"]
    lms = ev[2]
    assert lms["path"].startswith("lmstudio/") and lms["line"] == 10
    assert "Unexpected endpoint or method. (POST /api/v0/models/unload)" in lms["text"]
    assert "~/.lmstudio/bin/lms" in first["fix"] and "BRACKET_LMS_BIN" in first["fix"]
    assert "LMStudio: ejected model <id> via lms CLI" in first["fix"]
    assert of(res, "RH101", "session-42/baseline-000-s0")["outcome"] == "passed"
    no_log_ev = of(res, "RH101", "no-judge-log/cur-000-s0")["evidence"]
    assert [e["path"] for e in no_log_ev] == ["ledger.jsonl", "ledger.jsonl"]
    assert {r["outcome"] for r in res.results("RH101") if label(r).startswith("healthy/")} == {"passed"}
    assert "no earlier run of the sweep trained fully" in of(res, "RH101", "all-collapsed/cand-001")["note"]


def test_rh101_thresholds_are_configurable(tmp_path):
    session = sb.vram_leak_session(tmp_path / "s")
    assert not all(f.passed for f in check_on(session, "RH101"))
    findings = check_on(session, "RH101", config={"thresholds": {"RH101": {"handful_steps": 2}}})
    assert findings and all(f.passed for f in findings)


# -- RH102 trainer-died-instantly --------------------------------------------------------
CAUSES = {
    "fused-optimizer-keyerror": "config",
    "missing-model-file": "config",
    "cuda-oom": "config",
    "missing-trainer-module": "infra",
    "unknown": "infra",
}


def test_rh102_reads_each_cause_from_the_log_tail(tmp_path, run_health):
    rows = [sb.row("baseline-000-s0", "baseline", at=sb.at(0), duration_s=2230.0, n_steps=1500)]
    logs = {"baseline-000-s0": sb.healthy_log(1500, 1.47)}
    for i, cause in enumerate(CAUSES):
        rows.append(
            sb.row(
                cause,
                at=sb.at(40 + i),
                duration_s=20.0,
                n_steps=0,
                score=None,
                judge=None,
                disqualified="empty_tfevents",
                exit_code=1,
            )
        )
        logs[cause] = sb.died_log(cause)
    rows.append(
        sb.row(
            "no-log",
            at=sb.at(50),
            duration_s=12.0,
            n_steps=0,
            score=None,
            judge=None,
            disqualified="empty_tfevents",
            exit_code=1,
        )
    )
    session = sb.write_session(tmp_path / "s", rows, logs)
    (session / "runs" / "no-log").mkdir()
    findings = check_on(session, "RH102")
    assert findings.of("baseline-000-s0").passed
    for cause, verdict in CAUSES.items():
        r = findings.of(cause)
        assert (r.passed, r.cause, r.verdict) == (False, cause, verdict)
        log_ev = r.evidence[1]
        assert log_ev.path == f"runs/{cause}/logs/stdout.log"
        last = sb.TRACEBACKS[cause].splitlines()[-1]
        assert log_ev.text == (last[:239] + "…" if len(last) > 240 else last)
    r = findings.of("no-log")
    assert (r.passed, r.verdict) == (False, "not-evaluable")
    text = text_of(findings)
    assert "no log in runs/no-log" in text and "(6 of 7 runs of the sweep were disqualified so)" in text
    assert "KeyError: 'beta1'" in text and "Bracket's search spaces exclude AdamW" in text


# -- RH103, RH104: the judge ---------------------------------------------------------------
def rewrite(session, change) -> None:
    rows = [json.loads(line) for line in (session / "ledger.jsonl").read_text().splitlines()]
    change(rows)
    sb.write_session(session, rows, {})


def test_rh103_judge_never_called_and_near_miss(tmp_path):
    plain = sb.judge_session(tmp_path / "plain", "none")
    method = sb.judge_session(tmp_path / "method", "none")
    rewrite(method, lambda rows: [r["config"].update(judge_method="none") for r in rows])
    judged = sb.judge_session(tmp_path / "judged", "none")
    rewrite(judged, lambda rows: rows[2].update(judge_report=sb.judge_report(0.7)))
    r = check_on(plain, "RH103").of()
    assert (r.passed, r.cause, r.verdict) == (False, "judge-not-called", "config")
    assert "all 4 scored runs have judge_report null" in r.summary
    r = check_on(method, "RH103").of()
    assert not r.passed and "judge_method is 'none', not 'lmstudio'" in r.render()
    # issue 26: one judged row among loss-only ones is not a near-miss but a mixed sweep
    r = check_on(judged, "RH103").of()
    assert (r.passed, r.cause) == (False, "mixed-scoring")


def test_rh103_mixed_scoring_names_the_rows_and_their_rank(tmp_path, run_health):
    """A loss-only score (0.95) ranks first among judged ones (about 0.7): not comparable."""
    mixed = sb.healthy_session(tmp_path / "mixed")
    rewrite(mixed, lambda rows: rows[2].update(judge_report=None, score=0.95))
    whole = sb.healthy_session(tmp_path / "whole")  # the near-miss: every scored row judged
    res = run_health(mixed, whole, args=only("RH103"))
    r = res.result_of("RH103", "mixed")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "infra", "mixed-scoring")
    rows = [json.loads(x) for x in (mixed / "ledger.jsonl").read_text().splitlines()]
    scored = sum(1 for x in rows if x.get("score") is not None and x.get("role") != "setup")
    assert f"{rows[2]['run_id']} (rank 1 of {scored}, score 0.95)" in r["summary"]
    assert res.outcome("RH103", "whole") == "passed"


def test_rh104_thinking_judge_and_one_transient_miss(tmp_path):
    prose = sb.judge_session(tmp_path / "prose", "no-json")
    transient = sb.healthy_session(tmp_path / "transient")
    rewrite(
        transient, lambda rows: rows[1]["judge_report"]["judgements"][0].update(error="no JSON scores in response text")
    )
    r = check_on(prose, "RH104").of()
    assert (r.passed, r.cause) == (False, "judge-no-json")
    assert "16 of 16 judgements" in r.render() and "qwen3-vl-8b-thinking (a thinking variant)" in r.render()
    r = check_on(transient, "RH104").of()
    assert r.passed and "1 of 20 judgements" in r.note


# -- RH105 early-exit-config ---------------------------------------------------------------
def test_rh105_names_the_knobs_and_passes_late_failures(tmp_path):
    knob = sb.knob_session(tmp_path / "knob")
    rows = [
        sb.row("cand-000", at=sb.at(0), duration_s=2200.0, n_steps=1500, config=sb.knobs(seed=1)),
        sb.row("cand-001", at=sb.at(40), duration_s=2200.0, n_steps=1500, config=sb.knobs(seed=2)),
        sb.row(
            "cand-002",
            at=sb.at(80),
            duration_s=1900.0,
            n_steps=1300,
            score=None,
            judge=None,
            exit_code=1,
            config=sb.knobs(seed=3),
        ),
    ]
    late = sb.write_session(tmp_path / "late", rows, {})
    findings = check_on(knob, "RH105")
    assert sorted(f.run for f in findings if not f.passed) == ["cand-001-s0", "cand-004-s0"]
    r = findings.of("cand-001-s0")
    assert (r.verdict, r.cause) == ("config", "config-knob")
    assert 'optimizer_type="AdamW8bit" (healthy: "adafactor")' in text_of(findings)
    assert "fused_backward_pass=true (healthy: false)" in text_of(findings)
    assert "seed" not in r.fix and "learning_rate" not in r.fix
    assert any("AssertionError: fused_backward_pass" in e.text for e in r.evidence)
    assert all(f.passed for f in check_on(late, "RH105"))


# -- RH106 stop-event-not-failures -------------------------------------------------------------
def test_rh106_one_stop_event_passes_with_a_note_spread_stops_fail(tmp_path, run_health):
    one = sb.stop_session(tmp_path / "one")
    spread = sb.stop_session(tmp_path / "spread", spread=True)
    base = 1773496931
    epoch = sb.write_session(
        tmp_path / "epoch",
        [{"run_id": f"c{i}", "disqualified": "stopped_by_user", "ts": base + i} for i in range(4)],
        {},
    )
    res = run_health(one, spread, epoch, args=only("RH106") + ("-rA",))
    r = res.result_of("RH106", "one")
    assert r["outcome"] == "passed" and r["note"].startswith("one stop event at 14:02, not 9 failures")
    res.result.stdout.fnmatch_lines(["*runhealth note*", "one stop event at 14:02, not 9 failures*"])
    r = res.result_of("RH106", "spread")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "infra", "stop-event")
    assert "at 9 separate times (14:02, 15:32, 17:02" in res.stdout
    r = res.result_of("RH106", "epoch")
    assert r["outcome"] == "passed" and "not 4 failures" in r["note"]


# -- RH107, RH108: step times -------------------------------------------------------------------
def generic_run(path, log: str):
    (path / "logs").mkdir(parents=True)
    (path / "logs" / "stdout.log").write_text(log)
    return path


def test_rh107_pipe_deadlock_and_a_healthy_sweep(tmp_path):
    slow = sb.slow_steps_session(tmp_path / "slow")
    healthy = sb.healthy_session(tmp_path / "healthy")
    r = check_on(slow, "RH107", run="cur-000-s0").of()
    assert (r.passed, r.cause) == (False, "pipe-deadlock")
    assert 'subprocess.Popen(stdout=open(log_path, "ab"))' in r.fix
    assert r.evidence[-1].path == "runs/cur-000-s0/logs/stdout.log"
    assert "29/1500" in r.evidence[-1].text
    for check in ("RH107", "RH108"):
        findings = check_on(healthy, check)
        assert findings and all(f.passed for f in findings), findings


def test_pipe_deadlock_is_found_with_defaults_and_a_slow_healthy_gpu_is_not(tmp_path):
    """Issue 18: every run slow from its first step, no healthy run, 2900 s/it: the deadlock without
    expected_s_per_it; and RH002 stays quiet on a musubi log whose bar lines end in newlines."""
    stuck = sb.deadlock_session(tmp_path / "stuck")
    slow_gpu = sb.deadlock_session(tmp_path / "slowgpu", s_per_it=60.0, steps=100, wall=7200)
    stuck_107, stuck_002 = check_on(stuck, "RH107"), check_on(stuck, "RH002")
    slow_107, slow_002 = check_on(slow_gpu, "RH107"), check_on(slow_gpu, "RH002")
    for rid in ("baseline-000-s0", "cur-000-s0", "cand-000-s0"):
        r = stuck_107.of(rid)
        assert (r.passed, r.cause) == (False, "pipe-deadlock"), r
        assert "from its first timed step" in r.summary and "subprocess.Popen" in r.fix
        assert stuck_002.of(rid).passed
        assert rid in slow_107.skipped and rid not in {f.run for f in slow_107}
        assert slow_002.of(rid).passed


def test_rh002_still_fires_on_a_log_of_only_carriage_return_redraws(tmp_path):
    run = generic_run(tmp_path / "bars", sb.startup(1500) + "".join("\r" + sb.bar(0, 1500, 0, None) for _ in range(50)))
    r = check_on(run, "RH002").of()
    assert (r.passed, r.cause) == (False, "progress-bar-only-log")


def test_rh107_on_plain_runs_needs_an_expected_figure(tmp_path):
    fast = generic_run(tmp_path / "fast", sb.healthy_log(300, 0.25, every=10))  # tqdm prints it/s under 1 s a step
    slow = generic_run(tmp_path / "slow", sb.healthy_log(300, 0.5, every=10))
    findings = check_on(fast, "RH107")
    assert not findings and "expected_s_per_it" in findings.skipped["fast"]
    cfg = {"thresholds": {"RH107": {"expected_s_per_it": 0.004}}}
    assert check_on(fast, "RH107", config=cfg).of().passed
    r = check_on(slow, "RH107", config=cfg).of()
    assert not r.passed and "0.500 s/it (2.00 it/s), 125x the expected" in r.summary


def test_rh108_climbing_step_time_and_benign_bumps(tmp_path):
    climbing = sb.startup(900) + sb.training(900, 900, lambda s: 29.0 * (1 + 5.0 * (s / 900) ** 2), every=50)

    def bumpy(s: int) -> float:  # slow warm-up, a sampling pause, noise
        return 9.0 if s < 5 else (6.0 if 400 <= s < 420 else 2.0 + 0.05 * ((s * 31) % 7))

    r = check_on(generic_run(tmp_path / "climbing", climbing), "RH108").of()
    assert (r.passed, r.cause, r.verdict) == (False, "vram-pressure", "infra")
    assert all(e.path == "logs/stdout.log" for e in r.evidence)
    assert check_on(generic_run(tmp_path / "bumpy", sb.healthy_log(900, bumpy, every=30)), "RH108").of().passed
    # near miss (a real HF Trainer on a loaded CPU, issue 35's trial): 0.3 -> 0.5 s/it over 30 steps is a busy
    # machine, not memory pressure: the same climb needs min_span_s of training to be a finding
    bars, elapsed = [], 0.0
    for s in range(1, 31):  # the Trainer's own bar, one redraw a step
        elapsed += 0.25 + 0.3 * s / 30
        bars.append(
            f"{100 * s // 30:3d}%|#         | {s}/30 [00:{int(elapsed):02d}<00:10, {1 / (0.25 + 0.3 * s / 30):5.2f}it/s]"
        )
    short = generic_run(tmp_path / "short", "\r".join(bars) + "\n")
    r = check_on(short, "RH108").of()
    assert r.passed and "too short to tell memory pressure from a busy machine" in r.note, r
    assert check_on(short, "RH108", config={"thresholds": {"RH108": {"min_span_s": 0}}}).of().cause == "vram-pressure"


def test_rh108_a_collapse_that_lasts_and_its_near_misses(tmp_path):
    """Issue 46: steps that go from 1.3 s to 12 s each and stay there to the end of the log fail RH108 on a
    plain run dir (no sweep); a pause the run comes back from, a pause the log ends in, a slow warm-up, jitter
    and a collapse too short to tell from a pause do not. The bar prints the average since the start (as
    kohya's and musubi's do), so only the bar's clock shows the change."""

    def run(name: str, spi, steps: int = 900):
        log = sb.startup(1500) + sb.training(1500, steps, spi, every=10, finish=False)
        return check_on(generic_run(tmp_path / name, log), "RH108").of()

    r = run("collapse", lambda s: 1.3 if s <= 600 else 12.0)
    assert (r.passed, r.cause, r.verdict) == (False, "step-time-collapse", "infra"), r
    assert "collapsed after step 600, from 1.30 s/it to 12.00 s/it" in r.summary and "Sysmem Fallback" in r.fix
    assert [e.line for e in r.evidence] == sorted(e.line for e in r.evidence) and len(r.evidence) == 3
    assert run("pause-then-back", lambda s: 600.0 if s == 400 else 1.3).passed
    assert run("log-ends-in-a-pause", lambda s: 600.0 if s == 900 else 1.3).passed
    assert run("slow-warm-up", lambda s: 30.0 if s <= 20 else 1.3).passed
    assert run("jitter", lambda s: 1.3 * (0.6 + 0.8 * ((s * 7919) % 13) / 13)).passed
    short = run("short", lambda s: 1.3 if s <= 880 else 12.0)
    assert short.passed and "too short to tell a collapse from a pause" in short.note, short
    # a steady climb ends far above where it started too: it stays the climb's (vram-pressure), not a collapse
    climb = run("climb", lambda s: 29.0 * (1 + 5.0 * (s / 900) ** 2))
    assert climb.cause == "vram-pressure", climb


# -- bad input ----------------------------------------------------------------------------
def test_empty_ledger(tmp_path, run_health):
    session = tmp_path / "s"
    session.mkdir()
    (session / "ledger.jsonl").write_text("")
    res = run_health(session, args=("-k", "RH1 or RH001"))
    assert res.outcome("RH001") == "failed" and "ledger.jsonl is empty" in res.stdout
    assert all(r["outcome"] in ("passed", "skipped") for r in res.results() if r["check"] != "RH001")


def test_non_json_line_in_the_middle_and_truncated_last_line(tmp_path, run_health):
    session = sb.vram_leak_session(tmp_path / "s")
    lines = (session / "ledger.jsonl").read_text().splitlines(keepends=True)
    lines.insert(3, "\x00\x01 not json at all }{\n")
    text = "".join(lines) + '{"run_id": "cand-002-s0", "n_steps": 3, "durat'
    (session / "ledger.jsonl").write_text(text)
    res = run_health(session, args=("-k", "RH001 or RH101"))
    assert res.outcome("RH001") == "failed"
    assert len(failed(res, "RH101")) == 5  # the complete rows are still judged
    assert not res.results("RH101", "cand-002-s0") or res.outcome("RH101", "cand-002-s0") != "failed"


def test_truncated_final_line_alone_does_not_fail_the_sweep_checks(tmp_path, run_health):
    session = sb.healthy_session(tmp_path / "s")
    with open(session / "ledger.jsonl", "a") as fh:
        fh.write('{"run_id": "cand-003-s0", "role": "candidate", "n_st')
    res = run_health(session, args=("-k", "RH1 or RH001"))
    assert res.outcome("RH001") == "failed"
    assert {r["outcome"] for r in res.results() if r["check"] != "RH001"} <= {"passed", "skipped"}


def test_binary_log_and_a_50mb_line_without_newline(tmp_path):
    session = sb.died_session(tmp_path / "s", "cuda-oom")
    log0 = session / "runs" / "cand-000-s0" / "logs" / "stdout.log"
    log0.write_bytes(os.urandom(4096) + b"\x00" * 1024 + sb.TRACEBACKS["cuda-oom"].encode())
    log1 = session / "runs" / "cand-001-s0" / "logs" / "stdout.log"
    with open(log1, "wb") as fh:
        chunk = b"steps: x" * (1 << 17)  # 1 MiB
        for _ in range(50):
            fh.write(chunk)
    rh102 = check_on(session, "RH102")
    assert rh102.of("cand-000-s0").cause == "cuda-oom"
    r = rh102.of("cand-001-s0")
    assert (r.passed, r.cause) == (False, "unknown")
    assert all(len(e.text) <= 240 for e in r.evidence)
    assert all(f.passed for f in check_on(session, "RH108"))  # each run judged healthy or skipped
    check_on(session, "RH107")  # a finding or a skip for each run, never an exception


def test_run_folder_without_logs_and_folder_without_row(tmp_path, run_health):
    session = sb.healthy_session(tmp_path / "s")
    (session / "runs" / "cand-009-s0" / "output").mkdir(parents=True)
    res = run_health(session, args=("-k", "RH1", "-rs"))
    assert res.ret == 0
    for check in ("RH101", "RH102", "RH105", "RH107", "RH108"):
        assert res.outcome(check, "cand-009-s0") == "skipped"
    assert "cand-009-s0 has a folder under runs/ but no row in ledger.jsonl" in res.stdout
    assert "no log in" in res.stdout


def test_unreadable_log(tmp_path, run_health):
    """chmod 000 stops no one running as root; there the inner session runs
    with CAP_DAC_OVERRIDE dropped (setpriv), which makes the mode bite."""
    session = sb.died_session(tmp_path / "s", "cuda-oom")
    log = session / "runs" / "cand-000-s0" / "logs" / "stdout.log"
    log.chmod(0)
    args = ("-k", "cand-000-s0 and (RH102 or RH107 or RH108)")
    try:
        if os.geteuid() != 0:
            res = run_health(session, args=args)
            outcomes = {r["check"]: r for r in res.results()}
        elif shutil.which("setpriv") and _dropping_caps_blocks(log):
            report = tmp_path / "report.json"
            proc = subprocess.run(
                [
                    *DROP_CAPS,
                    sys.executable,
                    "-m",
                    "pytest",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:anyio",
                    "--run-dir",
                    str(session),
                    "--runhealth-report",
                    str(report),
                    *args,
                ],
                capture_output=True,
                text=True,
                cwd=tmp_path,
                timeout=120,
            )
            assert "INTERNALERROR" not in proc.stdout and not re.search(r"^Traceback", proc.stdout, re.M), proc.stdout
            outcomes = {r["check"]: r for r in json.loads(report.read_text())["results"]}
        else:
            pytest.skip("running as root without setpriv: chmod 000 does not stop this user reading the file")
    finally:
        log.chmod(0o644)
    r = outcomes["RH102"]
    assert (r["outcome"], r["verdict"]) == ("failed", "not-evaluable")
    assert outcomes["RH107"]["outcome"] == outcomes["RH108"]["outcome"] == "skipped"


DROP_CAPS = ("setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search")


def _dropping_caps_blocks(path) -> bool:
    probe = subprocess.run([*DROP_CAPS, sys.executable, "-c", f"open({str(path)!r}, 'rb')"], capture_output=True)
    return probe.returncode != 0


# -- any row the ledger can hold: a finding or a skip, never a crash -----------------------
def test_rows_of_any_shape_never_crash_a_sweep_check(tmp_path_factory):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from pytest_runhealth.checks import sweep, sweep_dashboard, sweep_exits, sweep_judge, sweep_steps
    from pytest_runhealth.context import CheckContext, Target
    from pytest_runhealth.model.registry import SPEC_ATTR
    from pytest_runhealth.readers.rundir import RunDir

    families = (sweep, sweep_judge, sweep_exits, sweep_dashboard, sweep_steps)
    specs = [getattr(f, SPEC_ATTR) for m in families for f in vars(m).values() if hasattr(f, SPEC_ATTR)]
    scalar = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-10, 10**6),
        st.floats(allow_nan=True),
        st.text(max_size=12),
        st.sampled_from(["timeout", "empty_tfevents", "stopped_by_user", "2026-03-14T14:02:11Z", "setup", "candidate"]),
    )
    value = st.recursive(
        scalar,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=6,
    )
    fields = [
        "role",
        "score",
        "judge_report",
        "disqualified",
        "exit_code",
        "duration_s",
        "n_steps",
        "killed_by_timeout",
        "error",
        "wall_secs",
        "finished_at",
        "config",
        "ts",
    ]
    row = st.fixed_dictionaries({}, optional={f: value for f in fields})

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(row, min_size=1, max_size=6))
    def check_all(rows):
        root = tmp_path_factory.mktemp("fuzz")
        lines = [json.dumps({"run_id": f"r{i}", **r}, default=str) for i, r in enumerate(rows)]
        (root / "ledger.jsonl").write_text("\n".join(lines) + "\n")
        rd = RunDir(root)
        for spec in specs:
            targets = (
                [Target(rd, None, rd.name)]
                if spec.scope == "session"
                else [Target(rd, run, run.name) for run in rd.runs]
            )
            for target in targets:
                ctx = CheckContext(spec, target, dict(spec.thresholds))
                try:
                    spec.func(ctx)
                except pytest.skip.Exception:
                    pass

    check_all()


# -- the shared pass (issue 38): the same rows as the row functions ------------------------
def test_ledger_facts_pick_the_rows_the_row_functions_pick(tmp_path):
    """``sweepfacts.LedgerFacts`` answers in one pass what RH101-RH106 asked
    every row: on rows of several shapes and near misses (a bool or float exit
    code, a timeout said three ways, a stop said in error beside an
    empty_tfevents disqualification, a scored setup row, a NaN score), each of
    its index lists is exactly the rows its row function accepts."""
    from pytest_runhealth.features import sweepfacts as sf
    from pytest_runhealth.readers.ledger import read_ledger

    rows = [
        {"run_id": "a", "exit_code": 0, "n_steps": 10, "score": 0.5, "role": "candidate"},
        {"run_id": "b", "exit_code": False, "n_steps": 10},
        {"run_id": "c", "exit_code": 0.0, "n_steps": 10},
        {"run_id": "d", "exit_code": 0, "n_steps": 0},
        {"run_id": "e", "exit_code": 0, "killed_by_timeout": True, "n_steps": 3},
        {"id": "f", "returncode": 0, "error": " Timeout "},
        {"run_id": "g", "disqualified": "timeout", "exit_code": 0},
        {"run_id": "h", "disqualified": "empty_tfevents", "error": "stopped_by_user"},
        {"run_id": "i", "disqualified": "STOPPED_BY_USER", "score": 1},
        {"run_id": "j", "role": "setup", "score": 2, "exit_code": 0},
        {"run_id": "k", "score": float("nan"), "exit_code": 0, "judge_report": {"error": "x"}},
        {"run_id": "l", "killed_by_timeout": "true", "exit_code": 0, "steps": 4},
    ]
    path = tmp_path / "ledger.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ledger = read_ledger(path)
    facts = sf.LedgerFacts(ledger)

    def which(pred):
        return [i for i, r in enumerate(ledger.rows) if pred(r)]

    assert list(facts.finished_ok) == which(sf.finished_ok) == [0, 9, 10, 11]
    assert list(facts.timed_out) == which(sf.timed_out) == [4, 5, 6]
    assert list(facts.empty_tfevents) == which(sf.empty_tfevents) == [7]
    assert list(facts.stopped_by_user) == which(sf.stopped_by_user) == [7, 8]
    assert (
        list(facts.scored) == which(lambda r: sf.trains(r) and sf.finite_number(r.get("score")) is not None) == [0, 8]
    )


def test_healthy_knobs_differing_is_the_plain_comparison():
    """RH105's knob comparison looks at the healthy configs only as far as it must; what it finds is what
    comparing every knob with every healthy config finds: values of mixed types (1, 1.0, True kept apart),
    knobs some configs lack, nested values, a seed that differs on every run."""
    import random

    from pytest_runhealth.features.knobs import HealthyKnobs
    from pytest_runhealth.readers.ledger import LedgerRow

    rng = random.Random(38)
    pool = [1, 1.0, True, 0, False, None, "adamw", "AdamW", 1e-4, 2e-4, [1, 2], {"a": 1}, [1.0, 2]]
    for trial in range(40):
        healthy = []
        for i in range(rng.randint(1, 30)):
            config = {k: rng.choice(pool) for k in ("lr", "opt", "dim", "x") if rng.random() < 0.8}
            config["seed"] = i
            healthy.append(config)
        knobs = HealthyKnobs(
            [
                LedgerRow(i + 1, {"run_id": f"r{i}", "config": config}, {"run_id": "run_id", "config": "config"})
                for i, config in enumerate(healthy)
            ]
        )
        for _ in range(10):
            asked = {k: rng.choice(pool) for k in ("lr", "opt", "dim", "x", "new") if rng.random() < 0.7}
            asked["seed"] = rng.randint(0, 40)
            assert knobs.differing(asked) == sb.plain_differing(healthy, asked, len(healthy)), (trial, asked)


def test_rh103_a_ledger_that_does_not_record_the_judge_is_unknown_not_a_failure(tmp_path):
    """Missing is unknown: rows with no judge_report field at all say nothing about the judge (issue 47); a
    null judge_report (the near miss) still fails."""
    silent = sb.judge_session(tmp_path / "silent", "none")
    rewrite(silent, lambda rows: [r.pop("judge_report", None) for r in rows])
    found = check_on(silent, "RH103")
    assert list(found) == [], [f.render() for f in found]
    assert (
        "no judge_report field" in found.skipped["silent"]
        and "whether the judge was called" in (found.skipped["silent"])
    )
    null = sb.judge_session(tmp_path / "null", "none")
    assert check_on(null, "RH103").of().cause == "judge-not-called"
    # rows that record it are judged on their own: two of four with a null report fail, whatever the other two
    some = sb.judge_session(tmp_path / "some", "none")
    rewrite(some, lambda rows: [r.pop("judge_report", None) for r in rows[2:]])
    r = check_on(some, "RH103").of()
    assert r.cause == "judge-not-called" and "all 2 scored runs have judge_report null" in r.summary


def test_rh101_says_how_many_of_the_runs_after_it_collapsed_when_healthy_runs_sat_between(tmp_path):
    """Issue 47: "so did the 2 runs after it" was said when healthy runs sat between the collapses."""
    leak = sb.vram_leak_session(tmp_path / "between")
    rows = [json.loads(x) for x in (leak / "ledger.jsonl").read_text().splitlines()]
    healthy = {k: rows[0][k] for k in ("duration_s", "n_steps", "score", "exit_code", "killed_by_timeout", "error")}
    for i in (2, 4):  # cur-000-s0 and cand-000-s0 trained fully: two healthy runs among the four after the first
        rows[i].update(healthy, disqualified=None)
    sb.write_session(leak, rows, {r["run_id"]: sb.healthy_log(1500, 1.46) for r in (rows[2], rows[4])})
    first = check_on(leak, "RH101").of("baseline-000-s1")
    assert "and so did 2 of the 4 runs after it." in first.summary, first.summary
    whole = sb.vram_leak_session(tmp_path / "whole")  # the near miss: every later run collapsed
    assert "and so did the 4 runs after it." in check_on(whole, "RH101").of("baseline-000-s1").summary
