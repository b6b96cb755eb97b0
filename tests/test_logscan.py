"""The shared log reader on what real trainer logs contain (kohya's tqdm bars, LTX-2's step lines, \\r redraws)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tracemalloc

from trainerfiles import kohya_bar, kohya_log, ltx_step_lines

from pytest_runhealth.readers.ledger import read_ledger
from pytest_runhealth.readers.logscan import MAX_POINTS, read_log_tail, scan_log


def write(tmp_path, text, name="train.log"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_kohya_redraws_give_the_step_series_with_elapsed_time(tmp_path):
    scan = scan_log(write(tmp_path, kohya_log(96)))
    assert {p.step for p in scan.steps} == set(range(97)) and scan.total == 96  # 0/96 drawn first
    last = scan.last_step
    assert (last.step, last.source) == (96, "tqdm") and last.loss is not None and last.elapsed > 0
    assert scan.redraws >= 96 and scan.newline_step_lines == 0
    assert scan.started_line == 2 and scan.finished_line is not None


def test_bar_variants_without_glyphs_old_loss_key_and_it_per_s(tmp_path):
    lines = [
        "steps:   0% 0/2300 [00:01<?, ?it/s]",
        kohya_bar(1, 2100, 3.59, 0.473, key="loss"),
        kohya_bar(2, 2100, 7.0, 0.47, glyphs=False),
        "steps:   0%|          | 3/2100 [00:01<10:00,  2.50it/s, avr_loss=0.46]",
    ]
    scan = scan_log(write(tmp_path, "\r".join(lines) + "\n"))
    pts = {p.step: p for p in scan.steps}
    assert pts[1].loss == 0.473 and pts[2].loss == 0.47
    assert abs(pts[3].sec_per_step - 0.4) < 1e-9


def test_glued_record_rank_prefix_and_validation_bar_set_aside(tmp_path):
    text = (
        "[08:03:35] [STDERR] steps:  38%|███▊      | 36/96 [13:09<21:55, 21.93s/it, avr_loss=0.0796]"
        "INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 6, epoch: 7\n"
        "validation steps:  50%|█████     | 5/10 [00:05<00:05,  1.00s/it, loss=0.2]\n"
        "[rank 0] INFO     Step 40/96 - Loss: 0.0712, LR: 1.00e-04, Time/Step: 4.12s, Total Time: 0h 3m\n"
    )
    scan = scan_log(write(tmp_path, text))
    assert [p.step for p in scan.series[("steps", None)]] == [36]
    assert ("validation steps", None) not in scan.series
    assert scan.series[("ltx", None)][0].sec_per_step == 4.12


def test_a_sample_image_bar_is_no_training_step(tmp_path):
    """ai-toolkit draws its sample images' own bar between training records (ostris/ai-toolkit#680): its 1/1
    is not the run's step, even where it holds more records than the training bar in the log."""
    text = (
        "Generating Images:   0%|          | 0/1 [00:00<?, ?it/s]\n"
        "Generating Images: 100%|##########| 1/1 [02:07<00:00, 127.18s/it]\n"
        "run_v1:  67%|######7   | 5384/8000 [3:41:53<00:01, 2566.52it/s, lr: 2.0e-04 loss: 3.462e-01]\n"
    )
    scan = scan_log(write(tmp_path, text))
    assert (scan.last_step.step, scan.total) == (5384, 8000)
    assert ("generating images", None) not in scan.series


def test_basicsr_and_kair_records_are_steps_paced_by_their_timestamps(tmp_path):
    """BasicSR's and KAIR's iteration records (hnmizuho/AT-BSN#1, JingyunLiang/VRT#47) carry no time of their
    own: the seconds per step are the time between records; a validation record is no step."""
    text = (
        "24-09-18 13:28:08.779 - INFO: <epoch: 16, iter:   3,900, lr:2.999e-04> l_all: 6.2904e+00 \n"
        "24-09-18 13:29:08.672 - INFO: <epoch: 16, iter:   4,000, lr:2.999e-04> l_all: 4.8104e+00 \n"
        "24-09-18 14:29:46.916 - INFO: <epoch: 16, iter:   4,000> psnr: 3.2174e+01. ssim: 8.1106e-01.\n"
        "24-09-18 14:57:21.217 - INFO: <epoch: 17, iter:   4,100, lr:2.999e-04> l_all: 4.5715e+00 \n"
        "22-09-01 02:31:11.512 : <epoch:  0, iter:     400, lr:4.000e-04> G_loss: 7.544e-02 \n"
        "22-09-01 02:48:36.264 : <epoch:  0, iter:     600, lr:4.000e-04> G_loss: 1.637e-02 \n"
    )
    pts = scan_log(write(tmp_path, text)).series[("basicsr", None)]
    assert [p.step for p in pts] == [3900, 4000, 4100, 400, 600]
    assert pts[0].sec_per_step is None and round(pts[1].sec_per_step, 3) == 0.599
    assert round(pts[2].sec_per_step, 2) == 52.93 and round(pts[2].elapsed) == 5352
    assert pts[3].sec_per_step is None and pts[3].elapsed == 0  # another run's log (its clock went back)
    assert round(pts[4].sec_per_step, 2) == 5.22


def test_ltx_and_generic_step_lines(tmp_path):
    scan = scan_log(write(tmp_path, ltx_step_lines(2000, 400)))
    assert scan.last_step.step == 400 and scan.total == 2000 and scan.newline_step_lines == 20
    generic = "epoch 1 step=10, loss=0.31 step_time=2.5\nStep: 11/500 loss: 0.30\n"
    scan = scan_log(write(tmp_path, generic, "g.log"))
    assert [(p.step, p.loss) for p in scan.steps] == [(10, 0.31), (11, 0.30)]
    assert scan.steps[0].sec_per_step == 2.5 and scan.steps[1].total == 500


def test_loss_scaler_chatter_is_not_a_loss_line(tmp_path):
    text = (
        "Gradient overflow. Skipping step 12, loss scaler 0 reducing loss scale to 32768.0\n"
        "[deepspeed] OVERFLOW! Rank 0 Skipping step 13. Attempted loss scale: 65536, reducing to 32768\n"
    )
    assert scan_log(write(tmp_path, text)).steps == []


def test_a_nan_redraw_is_never_sampled_away(tmp_path):
    # One physical line far beyond the per-line budget: 40,000 redraws, one NaN in the middle.
    redraws = [kohya_bar(i, 40_000, 2.0 * i, 0.05) for i in range(1, 40_001)]
    redraws[23_456] = kohya_bar(23_457, 40_000, 46_914.0, float("nan"))
    scan = scan_log(write(tmp_path, "\r".join(redraws) + "\nINFO done\n"))
    assert scan.nonfinite_count == 1 and scan.nonfinite[0][0].step == 23_457
    assert "avr_loss=nan" in scan.nonfinite[0][1]
    assert len(scan.steps) <= MAX_POINTS + 1 and scan.last_step.step == 40_000


def test_rich_redraws_give_no_steps(tmp_path):
    text = "INFO 🚀 Starting training...\n" + "".join(f"\r\x1b[2KTraining {'━' * i}" for i in range(50))
    scan = scan_log(write(tmp_path, text))
    assert scan.steps == [] and scan.redraws == 50 and scan.started_line == 1


def test_non_utf8_windows_paths_and_nul_bytes(tmp_path):
    data = (
        b"saving checkpoint: outputs\\sheld0nlora-000022.safetensors\n"
        b"\xff\xfe bad bytes \x00\x00 step 3 loss 0.5\n"
        b'FileNotFoundError: No such file or directory: "C:\\\\models\\\\x.safetensors"\n'
    )
    path = write(tmp_path, data)
    scan = scan_log(path)
    assert scan.nul_bytes == 2 and scan.steps[0].step == 3
    tail = read_log_tail(path)
    assert tail.lines[1].text.startswith("\ufffd\ufffd bad bytes \\0\\0")
    assert tail.lines[2].line == 3


def test_tail_line_numbers_match_with_and_without_scan_marks(tmp_path):
    path = write(tmp_path, "".join(f"line {i}\n" for i in range(1, 200_001)))
    plain = read_log_tail(path, nbytes=4096)
    marked = read_log_tail(path, nbytes=4096, scan=scan_log(path))
    assert plain.lines[-1].line == marked.lines[-1].line == 200_000
    assert plain.lines[-1].text == "line 200000" and not plain.complete


def test_unreadable_log_is_an_error_not_an_exception(tmp_path):
    scan = scan_log(tmp_path)  # a directory
    assert scan.error and scan.steps == []


GIANT = textwrap.dedent(
    """
    import resource, sys, tracemalloc
    from pytest_runhealth.readers.logscan import read_log_tail, scan_log
    path, size = sys.argv[1], int(sys.argv[2])
    bar = "\\rsteps:  50%|#####     | {0}/999999 [01:00<01:00, 1.00s/it, avr_loss=0.05{0}]"
    head = "".join(bar.format(i) for i in range(1, 20_000)).encode()
    tail = "".join(bar.format(i) for i in range(500_000, 520_000)).encode() + b"\\rRuntimeError: boom"
    with open(path, "wb") as fh:  # sparse in the middle: 1 GB with no newline anywhere
        fh.write(head)
        fh.seek(size - len(tail))
        fh.write(tail)
    scan = scan_log(path)
    t = read_log_tail(path)
    # VmHWM is this process's own peak; ru_maxrss also carries the peak of the
    # (much bigger) pytest process that forked it. Taken before tracemalloc,
    # whose own traces cost RSS.
    try:
        maxrss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert scan.lines == 1 and scan.overlong_lines > 0, scan
    assert scan.last_step.step == 519_999, scan.last_step
    assert t.lines[-1].text == "RuntimeError: boom"
    tracemalloc.start()
    scan_log(path)
    read_log_tail(path)
    peak = tracemalloc.get_traced_memory()[1]
    print(peak, maxrss)
    """
)


def test_one_gigabyte_without_newline_stays_in_bounded_memory(tmp_path):
    """A real 1 GiB file (sparse in the middle so the test writes ~3 MB):
    the scan and the tail must not hold more than a few chunks at once."""
    path = tmp_path / "giant.log"
    out = subprocess.run(
        [sys.executable, "-c", GIANT, str(path), str(1 << 30)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    peak, maxrss_kb = map(int, out.stdout.split())
    assert peak < 48 << 20, f"traced peak {peak >> 20} MiB"
    assert maxrss_kb < 256 << 10, f"max RSS {maxrss_kb >> 10} MiB"


def test_windows_line_ends_are_not_redraws(tmp_path):
    scan = scan_log(write(tmp_path, "INFO loading\r\nstep 1 loss 0.5\r\nstep 2 loss 0.4\r\n"))
    assert scan.redraws == 0 and [p.step for p in scan.steps] == [1, 2]


def test_big_log_keeps_the_exact_last_step_and_every_nan(tmp_path, monkeypatch):
    """Past STRIDE_FROM bytes lines are parsed by a byte stride; the end of the
    log and any line with a NaN are still parsed in full."""
    from pytest_runhealth.readers import logscan

    body = "".join(f"step {s} loss 0.1 {'x' * 200}\n" for s in range(1, 3001))
    body = body.replace("step 1234 loss 0.1", "step 1234 loss nan")
    path = write(tmp_path, body + "INFO saving\nTraceback (most recent call last):\nKeyError: 'x'\n")
    monkeypatch.setattr(logscan, "STRIDE_FROM", 1024)
    monkeypatch.setattr(logscan, "MAX_POINTS", 400)  # stride: every ~8th line
    scan = scan_log(path)
    assert len(scan.steps) < 3000 and scan.last_step.step == 3000
    assert scan.nonfinite[0][0].step == 1234


def test_big_logs_count_redraws_only_when_asked(tmp_path, monkeypatch):
    """Above STRIDE_FROM the full-file \\r count is not part of the scan (only
    RH002's failure message needs it); asked for, it equals the eager count,
    Windows line ends and sparse holes included."""
    import pytest_runhealth.readers.logscan as logscan

    text = kohya_log(96).replace("\n", "\r\n", 5)
    eager = scan_log(write(tmp_path, text))
    monkeypatch.setattr(logscan, "STRIDE_FROM", 0)
    lazy = scan_log(write(tmp_path, text, "big.log"))
    assert lazy.carriage_returns is None and lazy.crlf == eager.crlf == 5
    assert lazy.redraws == eager.redraws and lazy.carriage_returns is not None
    assert [(p.step, p.loss) for p in lazy.steps][-1] == [(p.step, p.loss) for p in eager.steps][-1]


def test_hundred_mb_line_without_newline_stays_bounded(tmp_path):
    p = tmp_path / "stdout.log"
    with open(p, "wb") as fh:
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            fh.write(chunk)
    tracemalloc.start()
    scan = scan_log(p)
    read_log_tail(p)
    read_ledger(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert scan.overlong_lines >= 1
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"


def test_sparse_two_gb_file_tail_is_cheap(tmp_path):
    p = tmp_path / "train.log"
    with open(p, "wb") as fh:
        fh.seek(2 << 30)
        fh.write(b"\nTraceback (most recent call last):\nRuntimeError: boom\n")
    tracemalloc.start()
    tail = read_log_tail(p, nbytes=1 << 16)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tail.lines[-1].text == "RuntimeError: boom"
    assert peak < 8 << 20
