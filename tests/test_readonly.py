"""The plugin never writes inside a run dir. A full session over every shipped
example runs under a Python audit hook that records every open for writing and
every rename, removal, chmod or utime; the trees' hashes and mtimes must also be
unchanged afterwards."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import declared_examples

AUDITED = """
import json, os, sys
roots = [os.path.realpath(p) for p in json.loads(sys.argv[1])]
writes = []
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
MUTATING = {"os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.utime",
            "os.symlink", "os.link", "os.truncate", "shutil.rmtree", "shutil.move"}

def under(path):
    try:
        p = os.path.realpath(os.fsdecode(path)) if not isinstance(path, int) else None
    except Exception:
        return False
    return p is not None and any(p == r or p.startswith(r + os.sep) for r in roots)

def hook(event, args):
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & WRITE_FLAGS)
        if writing and under(path):
            writes.append((event, os.fsdecode(path), mode, flags))
    elif event in MUTATING and args and under(args[0]):
        writes.append((event, os.fsdecode(args[0])))

sys.addaudithook(hook)
import pytest
# --tb=line: failures still rendered, without pytest rescanning every report per failure (long style)
argv = ["-p", "no:anyio", "-p", "no:cacheprovider", "-q", "--tb=line", "--runhealth-report", sys.argv[2]]
for r in roots:
    argv += ["--run-dir", r]
code = pytest.main(argv)
print("AUDIT-WRITES", json.dumps(writes))
sys.exit(0 if code in (0, 1) else code)
"""


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def test_full_session_over_every_example_writes_nothing(tmp_path):
    examples = [exp.example for exp in declared_examples()]  # every check's failing examples and near misses
    assert examples
    work = tmp_path / "examples"
    copies = []
    for ex in examples:
        shutil.copytree(ex, work / ex.name, symlinks=True)
        copies.append(work / ex.name)
    sweep = work / "synthetic"
    (sweep / "runs" / "a" / "logs").mkdir(parents=True)
    (sweep / "ledger.jsonl").write_text('{"run_id": "a", "n_steps": 3}\n{"run_id": "b"')
    (sweep / "runs" / "a" / "logs" / "stdout.log").write_bytes(b"steps: 1/10 [00:01<00:09, 1.00s/it, avr_loss=0.1]\r")
    copies.append(sweep)
    before = {str(c): snapshot(c) for c in copies}
    proc = subprocess.run(
        [sys.executable, "-c", AUDITED, json.dumps([str(c) for c in copies]), str(tmp_path / "report.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((l for l in proc.stdout.splitlines() if l.startswith("AUDIT-WRITES")), None)
    assert line is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads(line.split(" ", 1)[1]) == []
    assert "INTERNALERROR" not in proc.stdout
    assert {str(c): snapshot(c) for c in copies} == before
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["results"], "the session ran no check"


def test_the_audit_catches_a_writing_check(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "train.log").write_text("hello\n")
    (tmp_path / "conftest.py").write_text(
        "import pytest_runhealth as rh\n"
        "@rh.check('BAD001', 'writes', scope='session')\n"
        "def writes(ctx):\n"
        "    (ctx.run_dir.path / 'oops.txt').write_text('x')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", AUDITED, json.dumps([str(run)]), str(tmp_path / "report.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next(l for l in proc.stdout.splitlines() if l.startswith("AUDIT-WRITES"))
    assert any(w[1].endswith("oops.txt") for w in json.loads(line.split(" ", 1)[1]))


def test_a_session_hands_its_file_sizes_to_every_run_dir(pytester, run_health, tmp_path):
    """The size each file had when the session first opened it is the session's own state, handed down
    (``RunHealthSession.sizes`` -> ``RunDir.sizes`` -> each reader), not a process-global (issue 37): a log a
    writer appends to after the session's first read is read up to the size first seen, by any reader."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        size_checks=textwrap.dedent("""
        import pytest_runhealth as runhealth
        from pytest_runhealth.safety import safeio

        @runhealth.check("TEAM301", "sizes-handed-down", detects="d", why="w", example="e", fix="f")
        def sizes_handed_down(ctx):
            sizes = ctx.run_dir.sizes
            assert sizes is not None and sizes.shares(ctx.session.sizes)  # a view: this run dir's roots
            log = ctx.run.main_log
            before = safeio.read_head(log, 1 << 20, sizes)
            with open(log, "ab") as w:  # a writer that goes on after the session first looked (a test stand-in)
                w.write(b"RuntimeError: CUDA out of memory\\n")
            assert safeio.read_head(log, 1 << 20, sizes) == before
            assert ctx.run_dir.log_tail(log).lines[-1].text == "step 1/10 loss 0.5"
            return "capped"
    """)
    )
    pytester.makeconftest("""
        import size_checks

        def pytest_runhealth_register_checks(registry, config):
            registry.register_prefix("TEAM", owner="team")
            registry.add_module(size_checks, owner="team")
    """)
    pytester.syspathinsert()
    (tmp_path / "train.log").write_text("step 1/10 loss 0.5\n")
    res = run_health(tmp_path, args=("-k", "TEAM301"))
    assert res.result_of("TEAM301")["note"] == "capped", res.result_of("TEAM301")
