"""Which live process a pid file proves to be the run's (RH203, the watch,
the status block; issue 36): never pid 1, never a kernel thread, never an
old process whose command line merely holds a word equal to the run folder's
last name. Real processes throughout: sleepers started here, and the
machine's own pid 1 and kernel threads."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from live_helpers import write_pid_file

from pytest_runhealth.readers.procs import BEFORE_FILES_SLACK_S, MAX_LAUNCH_GAP_S, pid_is_the_runs, pid_status

psutil = pytest.importorskip("psutil")

OLD = MAX_LAUNCH_GAP_S + 120  # the pid file written two minutes past the launch gap: the process is "old"


@pytest.fixture
def spawn():
    procs: list[subprocess.Popen] = []

    def start(argv: list[str], cwd: Path) -> subprocess.Popen:
        proc = subprocess.Popen(argv, cwd=cwd)
        procs.append(proc)
        # The event: the child has exec'd (before that, /proc shows the forking pytest's command line).
        deadline = time.monotonic() + 60
        while psutil.Process(proc.pid).cmdline() != argv and time.monotonic() < deadline:
            time.sleep(0.01)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


def _sleeping(*extra: str) -> list[str]:
    return [sys.executable, "-c", "import time; time.sleep(60)", *extra]


def _command_word(pid: int) -> str:
    return os.path.basename(psutil.Process(pid).cmdline()[0]) if psutil.Process(pid).cmdline() else ""


@pytest.mark.parametrize("folder", ["init", "systemd", "pid-one-command"])
def test_pid_1_never_proves_a_run_even_in_a_folder_named_like_its_command(tmp_path, folder):
    """Shortly after boot pid 1 started minutes before any run: it is still not the trainer."""
    name = _command_word(1) if folder == "pid-one-command" else folder
    if not name:
        pytest.skip("pid 1's command line is hidden here")
    run = tmp_path / name
    st = pid_status(write_pid_file(run, 1))  # written now: well inside the launch gap after pid 1 began
    assert st.state == "foreign" and not st.alive, st
    assert "pid 1" in st.detail and "init process" in st.detail


def _kernel_threads() -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if psutil.Process(int(entry.name)).ppid() == 2:
                    found.append(int(entry.name))
            except psutil.Error:
                continue
    return found


@pytest.mark.parametrize("which", ["kthreadd", "a-kernel-thread"])
def test_a_kernel_thread_never_proves_a_run(tmp_path, which):
    threads = _kernel_threads()
    if not os.path.isdir("/proc/2") or not threads:
        pytest.skip("no kernel threads visible in this pid namespace")
    pid = 2 if which == "kthreadd" else threads[0]
    st = pid_status(write_pid_file(tmp_path / "run", pid))
    assert st.state in ("foreign", "reused"), st  # a kernel thread started after the file would be "reused"
    assert not st.alive


def test_a_run_folder_named_like_a_word_of_an_old_process_command_line_does_not_make_it_the_runs(tmp_path, spawn):
    """The sleeper's command line holds ``time`` and ``sleep``; a run folder named ``time`` is not its."""
    run = tmp_path / "time"
    run.mkdir()
    proc = spawn(_sleeping(), cwd=tmp_path)
    st = pid_status(write_pid_file(run, proc.pid, OLD))
    assert st.state == "foreign", st
    assert "full path" in st.detail


@pytest.mark.parametrize("form", ["absolute", "option=absolute", "relative-to-its-cwd", "inside-the-run"])
def test_an_old_process_whose_command_line_names_the_runs_full_path_is_the_runs(tmp_path, spawn, form):
    run = tmp_path / "sweep" / "time"
    run.mkdir(parents=True)
    arg = {
        "absolute": str(run),
        "option=absolute": f"--output_dir={run}",
        "relative-to-its-cwd": os.path.join("sweep", "time"),
        "inside-the-run": str(run / "checkpoints"),
    }[form]
    proc = spawn(_sleeping(arg), cwd=tmp_path)
    st = pid_status(write_pid_file(run, proc.pid, OLD))
    assert st.state == "alive", st


def test_a_relative_path_that_resolves_elsewhere_is_no_match(tmp_path, spawn):
    """``other/time`` from the process's folder is not ``sweep/time``, though both end in ``time``."""
    run = tmp_path / "sweep" / "time"
    run.mkdir(parents=True)
    (tmp_path / "other" / "time").mkdir(parents=True)
    proc = spawn(_sleeping(os.path.join("other", "time")), cwd=tmp_path)
    st = pid_status(write_pid_file(run, proc.pid, OLD))
    assert st.state == "foreign", st


def test_a_fresh_sleeper_is_still_the_runs(tmp_path, spawn):
    """The near miss: a process launched just before its pid file was written is the run's."""
    run = tmp_path / "init"
    run.mkdir()
    proc = spawn(_sleeping(), cwd=tmp_path)
    st = pid_status(write_pid_file(run, proc.pid, 0.5))
    assert st.state == "alive", st


# -- started before the run's own files existed (issue 36) ------------------------------------------------------
def _run_files(run: Path, when: float) -> None:
    """The run's own files (its config, its log), all last written at ``when``."""
    (run / "logs").mkdir(parents=True, exist_ok=True)
    for path in (run / "config.yaml", run / "logs" / "train.log"):
        path.write_text("model: {}\n" if path.suffix == ".yaml" else "step 1/10 loss 0.5\n")
        os.utime(path, (when, when))


def test_a_process_started_before_the_runs_files_existed_is_not_the_runs(tmp_path, spawn):
    """The sleeper runs first; the run folder's files (config, log, pid file) are written after it, dated
    ten minutes past its start: well inside the hour a pid file may follow its launch, yet the process was
    running before the run existed (the slack is BEFORE_FILES_SLACK_S, 30 s)."""
    run = tmp_path / "run"
    run.mkdir()
    proc = spawn(_sleeping(), cwd=tmp_path)
    started = psutil.Process(proc.pid).create_time()
    later = started + 600
    _run_files(run, later)
    pidfile = write_pid_file(run, proc.pid)
    os.utime(pidfile, (later, later))
    st = pid_status(pidfile)
    assert st.state == "foreign" and not st.alive, st
    assert "before the run's earliest file" in st.detail and "running before the run's own files existed" in st.detail
    assert "10 min" in st.detail and "full path" in st.detail
    assert pid_is_the_runs(proc.pid, pidfile)[0] is False  # the watch and the status block read the same rule


@pytest.mark.parametrize("files", ["written-before-it-started", "written-within-the-slack"])
def test_a_process_started_after_the_runs_first_files_is_the_runs(tmp_path, spawn, files):
    """Near misses: the run folder was prepared before the launch (its config, older than the process), or
    its first file came a few seconds after the process started (within the slack)."""
    run = tmp_path / "run"
    run.mkdir()
    if files == "written-before-it-started":
        _run_files(run, time.time() - 600)
    proc = spawn(_sleeping(), cwd=tmp_path)
    started = psutil.Process(proc.pid).create_time()
    pidfile = write_pid_file(run, proc.pid)
    if files == "written-within-the-slack":
        soon = started + BEFORE_FILES_SLACK_S / 3
        _run_files(run, soon)
        os.utime(pidfile, (soon, soon))
    first = min(os.stat(p).st_mtime for p in (pidfile, run / "config.yaml"))
    if files == "written-before-it-started":  # the premise, in that order
        assert first < started
    else:
        assert started < first <= started + BEFORE_FILES_SLACK_S
    st = pid_status(pidfile)
    assert st.state == "alive", st
    assert pid_is_the_runs(proc.pid, pidfile) == (True, "")


def test_a_process_naming_the_run_folder_is_the_runs_though_it_made_the_folder(tmp_path, spawn):
    """A trainer that creates its own output folder (``--output_dir=<run>``) starts before any of its files:
    its command line names the run folder's full path, and that proves it."""
    run = tmp_path / "out"
    proc = spawn(_sleeping(f"--output_dir={run}"), cwd=tmp_path)
    started = psutil.Process(proc.pid).create_time()
    _run_files(run, started + 600)
    pidfile = write_pid_file(run, proc.pid)
    os.utime(pidfile, (started + 600, started + 600))
    assert pid_status(pidfile).state == "alive"
