"""Issue 42: an LLM judge's A/B evaluation as gate evidence. A judge pipeline writes ``judgments.jsonl``
in the documented layout (docs/llm-judge.md); ``pytest --run-dir=FOLDER --runhealth-gate`` judges it with
the same statistic, verdict file and reports as rounds, the item as the unit: an item's judgments (both
orders, several samples) combine into one result; a judge's failure is infra, never a loss, and blocks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_runhealth.evaluation.items import judged_items
from pytest_runhealth.evaluation.judgments import read_judgments

FAST = ("-p", "no:unraisableexception", "-p", "no:threadexception")
CAND, BASE = "model-b", "model-a"
AB, BA = [BASE, CAND], [CAND, BASE]  # the order shown to the judge


def j(item, winner=CAND, *, order=None, sample=0, **extra) -> dict:
    """One judgment line as a judge pipeline writes it."""
    row = {"item": item, "candidate": CAND, "baseline": BASE, "winner": winner, "error": None}
    row.update(judge="qwen2.5-7b-instruct", sample=sample)
    if order is not None:
        row["order"] = order
    row.update(extra)
    return row


def both_orders(item, first=CAND, second=None, **extra) -> list[dict]:
    """The item judged twice, the candidate shown second then first (a position-bias check)."""
    return [j(item, first, order=AB, **extra), j(item, first if second is None else second, order=BA, **extra)]


def write(folder: Path, rows: list, tail: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    (folder / "judgments.jsonl").write_text(text + tail, encoding="utf-8")
    return folder


def won(n: int, start: int = 0) -> list[dict]:
    return [row for i in range(start, start + n) for row in both_orders(f"q-{i:03d}")]


def lost(n: int, start: int = 100) -> list[dict]:
    return [row for i in range(start, start + n) for row in both_orders(f"q-{i:03d}", BASE)]


def gate(run_health, folder: Path, *extra: str, candidate: str = CAND, subprocess: bool = False):
    return run_health(
        folder, args=(*FAST, "--runhealth-gate", f"--runhealth-candidate={candidate}", *extra), subprocess=subprocess
    )


def record_of(pytester) -> dict:
    return json.loads((pytester.path / "runhealth-report.verdict.json").read_text())


# -- end to end: a judge pipeline's file, gated --------------------------------------------------------
def test_a_candidate_that_wins_most_items_promotes(tmp_path, run_health, pytester):
    """9 of 10 items won, each judged in both orders: exit 0, the verdict record says promote on items."""
    folder = write(tmp_path / "ab", won(9) + lost(1))
    res = gate(run_health, folder, subprocess=True)
    assert res.ret == 0, res.stdout
    assert "won 9, lost 1, tied 0, excluded 0 of 10 items" in res.stdout and "PROMOTE" in res.stdout
    record = record_of(pytester)
    assert record["decision"] == "promote" and record["counts"]["won"] == 9 and record["counts"]["lost"] == 1
    counted = record["session"]["counted"]
    assert {c["unit"] for c in counted} == {"item"} and counted[0]["judgments"] == 2 and counted[0]["lines"] == [1, 2]
    assert record["targets"]["ab"]["evidence_files"][0]["path"] == "judgments.jsonl"
    assert res.outcome("RH505") == "passed" and res.outcome("RH104") == "passed"


def test_near_miss_too_few_won_items_block(tmp_path, run_health, pytester):
    """8 of 10: below the boundary at n = 10 (9), so not significant; exit 1, the record says block."""
    res = gate(run_health, write(tmp_path / "ab", won(8) + lost(2)), subprocess=True)
    assert res.ret == 1 and "PROMOTE" not in res.stdout
    assert res.result_of("RH508")["cause"] == "claim-not-significant"
    assert record_of(pytester)["decision"] == "block"


def test_judge_errors_block_and_are_never_counted_as_losses(tmp_path, run_health, pytester):
    """Ten won items and two whose judge failed (an error; a null winner without scores): the two are
    excluded and block (infra), named with their lines; nothing is lost."""
    failed = [
        j("q-900", None, order=AB, error="no JSON scores in response text"),
        j("q-900", CAND, order=BA),
        j("q-901", None, order=AB),
        j("q-901", None, order=BA),
    ]
    res = gate(run_health, write(tmp_path / "ab", won(10) + failed))
    r = res.result_of("RH508")
    assert res.ret == 1 and (r["verdict"], r["cause"]) == ("not-evaluable", "insufficient-evidence")
    assert "won 10, lost 0, tied 0, excluded 2 of 12 items" in res.stdout
    assert "2 item(s) the judge failed (infra: never a loss) (q-900, q-901)" in r["summary"]
    assert "re-run the judge on the 2 item(s)" in r["fix"]
    record = record_of(pytester)
    excluded = {e["item"]: e for e in record["session"]["excluded"]}
    assert record["counts"]["lost"] == 0 and record["decision"] == "block"
    assert excluded["q-900"]["blocks"] and excluded["q-900"]["cause"] == "judge-failed"
    assert excluded["q-900"]["detail"].startswith("judgments.jsonl:21: no JSON scores in response text")
    assert "winner is null and there are no scores" in excluded["q-901"]["detail"]


def test_near_miss_a_retried_judgment_that_succeeded_stands(tmp_path, run_health, pytester):
    """The same failures, then the pipeline's retries of the same sample and order appended: promote."""
    rows = won(10) + [j("q-900", None, order=AB, error="timeout after 60 s"), j("q-900", CAND, order=BA)]
    rows.append(j("q-900", CAND, order=AB))  # the retry of line 21
    res = gate(run_health, write(tmp_path / "ab", rows))
    assert res.ret == 0, res.stdout
    assert "won 11, lost 0, tied 0, excluded 0 of 11 items" in res.stdout
    assert "retried-judgment: 1 failed judgment(s)" in res.stdout


def test_both_orders_combine_into_one_item(tmp_path, run_health, pytester):
    """Six items, each won in both orders: six won items (E = 19.1, one short), never twelve pairs (which
    would promote)."""
    res = gate(run_health, write(tmp_path / "ab", won(6)))
    assert res.ret == 1 and "won 6, lost 0, tied 0, excluded 0 of 6 items" in res.stdout
    assert res.result_of("RH508")["cause"] == "claim-not-significant"
    assert record_of(pytester)["session"]["counted"][0]["judgments"] == 2


def test_near_miss_one_more_item_promotes(tmp_path, run_health):
    res = gate(run_health, write(tmp_path / "ab", won(7)))
    assert res.ret == 0 and "won 7, lost 0, tied 0, excluded 0 of 7 items" in res.stdout


def test_orders_that_disagree_are_a_tie_left_out(tmp_path, run_health, pytester):
    """A judge that prefers whichever answer it saw first: the item's two judgments cancel (position bias)."""
    biased = both_orders("q-500", BASE, CAND)  # shown model-a first: model-a; shown model-b first: model-b
    res = gate(run_health, write(tmp_path / "ab", won(7) + biased))
    assert res.ret == 0 and "won 7, lost 0, tied 1, excluded 0 of 8 items" in res.stdout
    tied = [c for c in record_of(pytester)["session"]["counted"] if c["outcome"] == "tied"]
    assert [c["item"] for c in tied] == ["q-500"] and "position bias" in tied[0]["detail"]
    assert "position-bias: on 1 item(s) the judge preferred the answer in the same position" in res.stdout


# -- combining an item's judgments -------------------------------------------------------------------
def items_of(tmp_path, rows, candidate=CAND, claim="wins", champion=None, tail=""):
    path = write(tmp_path / "ab", rows, tail) / "judgments.jsonl"
    found = read_judgments(path, "judgments.jsonl")
    return found, judged_items([("", found)], candidate, claim, champion)


def test_several_samples_are_one_item_by_majority(tmp_path):
    rows = [j("q-1", CAND, sample=0), j("q-1", CAND, sample=1), j("q-1", BASE, sample=2)]
    rows += [j("q-2", BASE, sample=0), j("q-2", "tie", sample=1), j("q-2", CAND, sample=2), j("q-2", BASE, sample=3)]
    _, got = items_of(tmp_path, rows)
    assert [(v.id, v.outcome, v.episodes) for v in got.verdicts] == [("q-1", "won", 3), ("q-2", "lost", 4)]
    assert got.verdicts[0].detail.startswith("model-b preferred in 2, model-a in 1, tie in 0 of 3")


def test_scores_decide_like_a_winner_and_compare_exactly(tmp_path):
    rows = [
        {"item": "q-1", "candidate": CAND, "baseline": BASE, "scores": {CAND: 2**53 + 1, BASE: 2**53}, "error": None},
        {"item": "q-2", "candidate": CAND, "baseline": BASE, "scores": {CAND: 6.5, BASE: 7}},
        {"item": "q-3", "candidate": CAND, "baseline": BASE, "scores": {CAND: 5, BASE: 5.0}},
    ]
    _, got = items_of(tmp_path, rows)
    assert [v.outcome for v in got.verdicts] == ["won", "lost", "tied"]


def test_the_claim_loses_and_the_candidate_named_as_baseline(tmp_path):
    """The gate's candidate may be either side of a line; a regression claim flips what shows it."""
    _, got = items_of(tmp_path, won(3), candidate=BASE, claim="loses")
    assert [(v.outcome, v.sign) for v in got.verdicts] == [("lost", 1)] * 3


def test_identical_judgments_count_once_and_different_ones_conflict(tmp_path):
    rows = [j("q-1", order=AB), j("q-1", order=AB, timestamp="2026-12-04T10:00:00Z"), j("q-1", order=BA)]
    rows += [j("q-2", CAND, order=AB), j("q-2", BASE, order=AB)]
    _, got = items_of(tmp_path, rows)
    q1, q2 = got.verdicts
    assert (q1.outcome, q1.episodes) == ("won", 2) and any(n.startswith("duplicate-judgment: 1") for n in got.notes)
    assert (q2.outcome, q2.cause, q2.blocks) == ("excluded", "judgment-conflict", True)
    assert "judgments.jsonl:4 and judgments.jsonl:5 record the same judgment" in q2.detail


def test_lines_without_an_identity_are_each_a_judgment(tmp_path):
    """Without id, sample or order two equal lines may be two samples that agreed: both count."""
    rows = [{"item": "q-1", "candidate": CAND, "baseline": BASE, "winner": w} for w in (CAND, CAND, BASE)]
    _, got = items_of(tmp_path, rows)
    assert (got.verdicts[0].outcome, got.verdicts[0].episodes, got.notes) == ("won", 3, [])


def test_several_baselines_need_a_champion(tmp_path):
    rows = [j("q-1"), {**j("q-1", sample=1), "baseline": "model-c"}] + won(2, start=10)
    _, got = items_of(tmp_path, rows)
    assert got.verdicts[0].blocks and "several baselines (model-a, model-c)" in got.verdicts[0].category
    _, named = items_of(tmp_path, rows, champion="model-c")
    assert named.verdicts[0].outcome == "won" and named.verdicts[0].episodes == 1
    assert all(not v.blocks for v in named.verdicts) and named.verdicts[1].category.endswith("not judged on this item")


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"item": "q-9", "candidate": "model-b", "baseline": "model-a", "winner": "model-c"}', "neither"),
        (
            '{"item": "q-9", "candidate": "model-b", "baseline": "model-a", "scores": {"A": 7, "B": 5}}',
            "never by position",
        ),
        (
            '{"item": "q-9", "candidate": "model-b", "baseline": "model-a", "winner": "model-a", '
            '"scores": {"model-b": 9, "model-a": 2}}',
            "contradictory",
        ),
        (
            '{"item": "q-9", "candidate": "model-b", "baseline": "model-a", "scores": {"model-b": NaN, "model-a": 2}}',
            "not a finite number",
        ),
        (
            '{"item": "q-9", "candidate": "model-b", "baseline": "model-a", "scores": {"model-b": "9", "model-a": 2}}',
            "not a JSON number",
        ),
        (
            '{"item": "q-9", "candidate": "model-b", "baseline": "model-a", "scores": {"model-b": 1'
            + "0" * 5000
            + ', "model-a": 2}}',
            "too long",
        ),
        ('{"item": "q-9", "candidate": "model-b", "baseline": "model-a", "verdict": "model-b"}', "neither winner nor"),
        ('{"item": "q-9", "candidate": "model-b", "winner": "model-b"}', "no baseline"),
        ('["q-9", "model-b"]', "not an object"),
    ],
    ids=[
        "winner-names-neither",
        "scores-by-position",
        "contradictory",
        "nan",
        "string",
        "huge",
        "no-verdict-field",
        "no-baseline",
        "array",
    ],
)
def test_a_line_that_is_not_a_judgment_blocks_its_item_with_its_line(tmp_path, line, why):
    found, got = items_of(tmp_path, [*won(3), line])
    assert [b.line for b in found.bad] == [7] and why in found.bad[0].why
    bad = [v for v in got.verdicts if v.blocks]
    assert len(bad) == 1 and bad[0].cause == "format-not-understood" and "judgments.jsonl:7" in bad[0].detail


def test_a_cut_last_line_says_the_file_may_still_be_written(tmp_path):
    found, got = items_of(tmp_path, won(3), tail='{"item": "q-9", "candidate": "mod')
    assert "still writing" in found.bad[0].why
    assert [v.id for v in got.verdicts if v.blocks] == ["judgments.jsonl:7"]


def test_unreadable_lines_are_rh505_findings_with_file_and_line(tmp_path, run_health):
    folder = write(
        tmp_path / "ab",
        [*won(7), '{"item": "q-9", "candidate": "model-b", "baseline": "model-a", "scores": {"1": 7, "2": 5}}'],
    )
    res = gate(run_health, folder)
    r = res.result_of("RH505")
    assert (r["verdict"], r["cause"]) == ("not-evaluable", "format-not-understood") and res.ret == 1
    assert r["evidence"][0]["path"] == "judgments.jsonl" and r["evidence"][0]["line"] == 15
    assert "1 item(s) a judgment line that cannot be read (q-9)" in res.result_of("RH508")["summary"]


# -- the judge failing as a whole (RH104), its model (RH404), discovery, usage -------------------------
def test_a_judge_that_mostly_answers_without_json_is_rh104(tmp_path, run_health):
    rows = [j(f"q-{i}", None, error="no JSON scores in response text", judge="qwen3-8b-thinking") for i in range(6)]
    res = run_health(write(tmp_path / "ab", rows + won(2)), args=FAST)
    r = res.result_of("RH104")
    assert (r["verdict"], r["cause"]) == ("infra", "judge-no-json")
    assert "6 of 10 judgments in judgments.jsonl came back without a verdict" in r["summary"]
    assert "qwen3-8b-thinking (a thinking variant)" in r["summary"] and r["evidence"][0]["line"] == 1


def test_near_miss_a_few_judge_failures_are_under_min_share(tmp_path, run_health):
    rows = [j("q-x", None, error="no JSON scores in response text")] + won(5)
    res = run_health(write(tmp_path / "ab", rows), args=FAST)
    assert res.outcome("RH104") == "passed"


def test_rh404_reads_the_judge_model_a_judgments_file_names(tmp_path, run_health):
    rows = [j("q-1", judge="deepseek-r1-distill-qwen-7b")]
    res = run_health(write(tmp_path / "ab", rows), args=(*FAST, "-k", "RH404"))
    r = res.result_of("RH404")
    assert (r["outcome"], r["cause"]) == ("failed", "thinking-judge-model") and "judgments.jsonl:1" in r["summary"]


def test_a_judgments_folder_is_a_run_of_its_own_kind(tmp_path, run_health):
    root = tmp_path / "evals"
    write(root / "ab-0412", won(1))
    res = run_health(root, args=("--runhealth-list-runs",))
    assert res.ret == 0 and re.search(r"^  judgments +ab-0412$", res.stdout, re.M), res.stdout
    assert "1 judgments folder" in res.stdout


def test_a_candidate_no_judgment_names_is_a_usage_error(tmp_path, run_health, pytester):
    res = gate(run_health, write(tmp_path / "ab", won(7)), candidate="model-bb")
    assert res.ret == 4 and "'model-bb' is not a player of any round (players: model-a, model-b" in str(
        res.result.stderr
    )
    assert record_of(pytester)["decision"] == "usage-error"


def test_a_copied_folder_counts_each_judgment_once(tmp_path, run_health, pytester):
    """Four won items, and a retry folder holding the same four lines again plus three new items: seven items,
    not eleven; the copies are noted, and each item's detail names the file its lines are in."""
    write(tmp_path / "ab", won(4))
    write(tmp_path / "ab-retry", won(4) + won(3, start=4))
    res = run_health(
        tmp_path / "ab", tmp_path / "ab-retry", args=(*FAST, "--runhealth-gate", f"--runhealth-candidate={CAND}")
    )
    assert res.ret == 0 and "won 7, lost 0, tied 0, excluded 0 of 7 items" in res.stdout
    assert "duplicate-judgment: 8 judgment line(s)" in res.stdout
    details = {c["item"]: c["detail"] for c in record_of(pytester)["session"]["counted"]}
    assert details["q-000"].endswith("(ab/judgments.jsonl:1,2)") and details["q-006"].endswith(
        "(ab-retry/judgments.jsonl:13,14)"
    )


def test_a_null_score_is_the_judge_failing_not_a_loss(tmp_path):
    rows = [{"item": "q-1", "candidate": CAND, "baseline": BASE, "scores": {CAND: None, BASE: 7}, "error": None}]
    _, got = items_of(tmp_path, rows)
    v = got.verdicts[0]
    assert (v.outcome, v.cause, v.blocks) == ("excluded", "judge-failed", True) and "no score for model-b" in v.detail


def test_a_judgments_file_that_is_a_link_is_not_read_and_blocks(tmp_path, run_health):
    elsewhere = write(tmp_path / "elsewhere", won(7)) / "judgments.jsonl"
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "judgments.jsonl").symlink_to(elsewhere)
    res = gate(run_health, tmp_path / "ab")
    assert res.ret == 1 and "PROMOTE" not in res.stdout
    assert "1 item(s) judgments not read in full (judgments.jsonl)" in res.result_of("RH508")["summary"]


def test_an_id_names_one_judgment_of_one_item(tmp_path):
    rows = [{**j("q-1"), "id": 7}, {**j("q-2"), "id": 7}, {**j("q-1"), "id": 7}]
    _, got = items_of(tmp_path, rows)
    assert [(v.id, v.episodes) for v in got.verdicts] == [("q-1", 1), ("q-2", 1)]


def test_a_regression_claim_and_a_named_champion_read_the_same_file(tmp_path, run_health, pytester):
    """model-a named as the candidate with the claim `loses`, against model-b: the same seven items promote;
    the items judged against a third model are excluded and named, never counted or blocking."""
    other = [{**row, "baseline": "model-c"} for row in won(2, start=50)]
    folder = write(tmp_path / "ab", won(7) + other)
    res = gate(run_health, folder, "--runhealth-claim=loses", f"--runhealth-champion={CAND}", candidate=BASE)
    assert res.ret == 0, res.stdout
    assert "model-a loses (against model-b): won 0, lost 7, tied 0, excluded 2 of 9 items" in res.stdout
    excluded = record_of(pytester)["session"]["excluded"]
    assert [(e["item"], e["blocks"]) for e in excluded] == [("q-050", False), ("q-051", False)]
    assert excluded[0]["reason"] == "model-a against model-b not judged on this item"
