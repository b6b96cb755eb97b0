"""RH001-RH006, the evidence family (``checks/evidence.py``): is the evidence itself readable? Each
check on the run dir where it fails and on its near miss. (RH002 on real trainer logs is in
test_trainer.py beside RH201, RH003 on real processes in test_live_process.py, RH004 on harvests in
test_eval.py, RH005 on event files in test_tfevents.py.)"""

from __future__ import annotations


def test_rh006_says_where_links_lead(tmp_path, run_health):
    root = tmp_path / "run"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "train.log").write_text("ok\n")
    outside = tmp_path / "scratch.log"
    outside.write_text("x\n")
    (root / "dataset").symlink_to(tmp_path)
    res = run_health(root, args=("-k", "RH006", "-rA"))
    r = res.result_of("RH006")
    assert r["outcome"] == "passed"  # a link to data is only worth a note
    assert f"dataset -> {tmp_path}" in r["note"]
    (root / "logs" / "stdout.log").symlink_to(outside)  # but a log the checks would read is a finding
    r = run_health(root, args=("-k", "RH006")).result_of("RH006")
    assert (r["outcome"], r["cause"]) == ("failed", "link-outside-run-dir")
    assert r["evidence"][0] == {"path": "logs/stdout.log", "line": None, "text": f"-> {outside}"}
    (root / "logs" / "stdout.log").unlink()
    (root / "dataset").unlink()
    assert run_health(root, args=("-k", "RH006")).result_of("RH006")["note"] is None
