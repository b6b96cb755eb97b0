"""Open once, check what was opened (issue 48 items 1 and 5).

A run file is read through one open (``safeio.open_readonly`` with the run dir's ``RunDir.sizes``): its
last part is never followed as a link (``O_NOFOLLOW``) and the opened file's own real path must lie inside
the run dir. So a ``ledger.jsonl``, a workspace ``config.yaml`` or a pid file that is a link to a file
outside the run is never quoted, never drives a check, never makes the watch call the run running; and a
log swapped for such a link after it was listed is refused when it is opened. Each case has its near miss:
the same content inside the run is read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sweep_builders import healthy_log, healthy_session

from pytest_runhealth.features.status import pid_alive
from pytest_runhealth.readers.rundir import RunDir
from pytest_runhealth.safety import safeio
from pytest_runhealth.testing import check_on

MARKER = "OUTSIDE-MARKER-7f3a"
SECRET = f"root:x:0:0:{MARKER}:/root:/bin/bash\n"


def outside_file(tmp_path: Path, text: str, name: str = "secret") -> Path:
    path = tmp_path / "elsewhere" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def link(at: Path, target: Path) -> None:
    at.unlink(missing_ok=True)
    at.symlink_to(target)


def everything_shown(health) -> str:
    return health.stdout + json.dumps(health.report)


# -- the one open -----------------------------------------------------------------------------
def test_the_open_refuses_a_link_out_and_a_folder_link_on_the_way(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    secret = outside_file(tmp_path, SECRET)
    sizes = safeio.FirstSizes().within(run)
    link(run / "ledger.jsonl", secret)
    with pytest.raises(safeio.LinkOut) as got:
        safeio.open_readonly(run / "ledger.jsonl", sizes=sizes)
    assert "leads out of the run dir" in str(got.value) and str(secret) in str(got.value)
    (run / "linked").symlink_to(secret.parent, target_is_directory=True)  # a folder on the way
    with pytest.raises(safeio.LinkOut):
        safeio.open_readonly(run / "linked" / "secret", sizes=sizes)
    # near misses: a plain file, and a link that stays inside, are read
    (run / "logs" / "train.log").write_text("step 1 loss 0.5\n")
    (run / "latest.log").symlink_to(run / "logs" / "train.log")
    for name in ("logs/train.log", "latest.log"):
        with safeio.open_readonly(run / name, sizes=sizes) as fh:
            assert fh.read() == b"step 1 loss 0.5\n"
    # outside a run dir's view (the user's own config, merge's inputs) nothing is confined
    with safeio.open_readonly(run / "ledger.jsonl") as fh:
        assert MARKER.encode() in fh.read()


# -- fixed names ------------------------------------------------------------------------------
def test_a_linked_ledger_is_not_quoted_and_rh006_says_it_was_not_read(tmp_path, run_health):
    sweep = healthy_session(tmp_path / "sweep")
    secret = outside_file(tmp_path, SECRET + '{"run_id": "' + MARKER + '", "n_steps": 3}\n')
    link(sweep / "ledger.jsonl", secret)
    health = run_health(sweep)
    assert MARKER not in everything_shown(health)
    rh006 = health.result_of("RH006")
    assert rh006["outcome"] == "failed" and rh006["cause"] == "link-outside-run-dir", rh006
    assert "were not read" in rh006["summary"]
    # the ledger's own finding says why it was not read, in words
    assert "leads out of the run dir" in health.stdout


def test_near_miss_the_same_ledger_inside_is_read(tmp_path, run_health):
    sweep = healthy_session(tmp_path / "sweep")
    (sweep / "ledger.jsonl").write_text(SECRET + (sweep / "ledger.jsonl").read_text())
    health = run_health(sweep)
    assert MARKER in health.stdout  # the not-JSON line is quoted (redacted words aside): it was read
    assert health.outcome("RH006") == "passed"


def workspace(root: Path) -> Path:
    (root / "logs").mkdir(parents=True)
    (root / "outputs").mkdir()
    (root / "logs" / "train.log").write_text(healthy_log(100, 1.5))
    return root


def test_a_linked_workspace_config_drives_nothing(tmp_path):
    ws = workspace(tmp_path / "ws")
    outside = outside_file(tmp_path, f"optimization:\n  steps: 7\nnote: {MARKER}\n", "config.yaml")
    link(ws / "config.yaml", outside)
    cfg = RunDir(ws).workspace_config()
    assert cfg is not None and not cfg.data and "leads out of the run dir" in (cfg.error or "")
    # near miss: the same file inside the workspace is the config
    (ws / "config.yaml").unlink()
    (ws / "config.yaml").write_text(outside.read_text())
    cfg = RunDir(ws).workspace_config()
    assert cfg is not None and cfg.error is None and cfg.get("optimization.steps") == 7


def test_a_linked_pid_file_never_makes_a_run_running(tmp_path):
    """The watch and RH203 ask ``pid_alive``: a pid file linked to another file that holds a live pid is not
    read, so the run is not called running on a process the link chose. The process is started after the run's
    files, so that by RH203's provenance rule it could be the run's (the near miss says it is)."""
    ws = workspace(tmp_path / "ws")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        outside = outside_file(tmp_path, f"{child.pid}\n", "train.pid")
        link(ws / "logs" / "train.pid", outside)
        assert pid_alive(RunDir(ws).runs[0]) is None
        # near miss: the same pid file inside the run names a live process that is the run's
        (ws / "logs" / "train.pid").unlink()
        (ws / "logs" / "train.pid").write_text(f"{child.pid}\n")
        assert pid_alive(RunDir(ws).runs[0]) is True
    finally:
        child.kill()
        child.wait()


# -- checked when listed, opened as listed (item 5) --------------------------------------------
DIED = 'Traceback (most recent call last):\n  File "train.py", line 9\nRuntimeError: CUDA out of memory\n'


@pytest.mark.parametrize("swap", [True, False], ids=["swapped-after-listing", "near-miss-not-swapped"])
def test_a_log_swapped_for_a_link_after_listing_is_refused_at_open(tmp_path, monkeypatch, swap):
    """Deterministic: the log is listed as a plain file (the run's logs are computed), then swapped for a
    link to an outside file just before the scanner opens it (a hook on the scanner, not a racing thread).
    RH201 must not quote the outside file as the root cause; it says the log could not be read."""
    from pytest_runhealth.readers import rundir

    ws = workspace(tmp_path / "ws")
    log = ws / "logs" / "train.log"
    log.write_text(healthy_log(100, 1.5, steps=40))
    outside = outside_file(tmp_path, DIED.replace("CUDA out of memory", f"CUDA out of memory {MARKER}"), "x.log")
    real_scan = rundir.scan_log
    swapped: list[Path] = []

    def scan_after_swap(path, sizes=None):
        if swap and Path(path) == log and not swapped:
            link(log, outside)  # what a writer could do between the listing and the open
            swapped.append(log)
        return real_scan(path, sizes)

    monkeypatch.setattr(rundir, "scan_log", scan_after_swap)
    found = check_on(ws, "RH201")
    shown = repr(found) + repr(found.skipped)
    assert MARKER not in shown
    if swap:
        assert swapped == [log]
        assert not found, shown  # no root cause quoted from the outside file: the check says why it could not judge
        assert "logs/train.log: a link that leads out of the run dir" in found.skipped["ws"], shown
    else:
        assert found.of("ws").passed, shown
