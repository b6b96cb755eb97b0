"""Checkpoint naming (kohya, LTX-2), safetensors headers, and RH205/RH206."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from trainerfiles import EXAMPLES, cut_file, ltx_step_lines, ltx_workspace, write_safetensors

from pytest_runhealth.readers.checkpoints import check_safetensors, find_checkpoints, latest, parse_name
from pytest_runhealth.testing import check_on


def test_names_of_both_trainers():
    assert parse_name(Path("lora_weights_step_01000.safetensors")).step == 1000
    assert parse_name(Path("model_weights_step_00020.safetensors")).name == "model"
    c = parse_name(Path("qwen_edit_anify_1024x1024-step00000250.safetensors"))
    assert (c.trainer, c.name, c.step) == ("kohya", "qwen_edit_anify_1024x1024", 250)
    c = parse_name(Path("sheld0nlora-000022.safetensors"))
    assert (c.trainer, c.epoch, c.state_path().name) == ("kohya", 22, "sheld0nlora-000022-state")
    assert parse_name(Path("training_state_step_00020.pt")) is None
    assert parse_name(Path("base_model.safetensors")) is None


def test_latest_prefers_kohya_final_then_highest_step():
    files = [
        Path(p)
        for p in (
            "o/x-step00000500.safetensors",
            "o/x-step00001500.safetensors",
            "o/x.safetensors",
            "o/unrelated.safetensors",
        )
    ]
    found = find_checkpoints(files)
    assert latest(found).final and latest(found).path.name == "x.safetensors"
    assert "unrelated.safetensors" not in {c.path.name for c in found}
    assert latest(find_checkpoints(files[:2])).step == 1500


def test_valid_file_passes(tmp_path):
    res = check_safetensors(write_safetensors(tmp_path / "a.safetensors"))
    assert res.ok and res.tensors == 3


def header_file(path: Path, header: dict, data: bytes) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)
    return path


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: p.write_bytes(b""), "too short"),
        (lambda p: p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}"), "cut short"),
        (lambda p: p.write_bytes((2**40).to_bytes(8, "little")), "100 MB"),
        (lambda p: p.write_bytes(b"\x04\x00\x00\x00\x00\x00\x00\x00\xff\xfe{}"), "not JSON"),
        (
            lambda p: header_file(p, {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\x00" * 8),
            "cut short",
        ),
        (
            lambda p: header_file(p, {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}, b"\x00" * 12),
            "needs 16 bytes",
        ),
        (
            lambda p: header_file(p, {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\x00" * 9),
            "follow the last tensor",
        ),
        (lambda p: header_file(p, {"w": {"shape": [1]}}, b""), "no valid dtype"),
        # issue 48: a shape of two 4,000-digit strings once made an 8,000-digit product that str() refused
        (
            lambda p: header_file(p, {"w": {"dtype": "F32", "shape": ["9" * 4000] * 2, "data_offsets": [0, 4]}}, b""),
            "no valid dtype",
        ),
        (
            lambda p: header_file(
                p, {"w": {"dtype": "F32", "shape": [10**39] * 1000, "data_offsets": [0, 4]}}, b"\x00" * 4
            ),
            "needs more bytes than any file holds, offsets give 4",
        ),
        (
            lambda p: header_file(p, {"w" * 100_000: {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b""),
            "www... (F32 [2]) needs 8 bytes",
        ),
    ],
    ids=[
        "zero-byte",
        "header-beyond-file",
        "huge-length",
        "not-json",
        "data-short",
        "shape-mismatch",
        "trailing",
        "no-offsets",
        "digit-strings-as-shape",
        "thousand-40-digit-dimensions",
        "a-key-of-100k-characters",
    ],
)
def test_damaged_headers(tmp_path, make, words):
    path = tmp_path / "x.safetensors"
    make(path)
    res = check_safetensors(path)
    assert not res.ok and words in res.problem


def test_agrees_with_the_safetensors_library(tmp_path):
    """Whatever we call intact, the library can open; what we call cut short, it refuses."""
    from safetensors import safe_open

    good = write_safetensors(tmp_path / "g.safetensors")
    bad = cut_file(write_safetensors(tmp_path / "b.safetensors"), good.stat().st_size - 3)
    with safe_open(str(good), "np") as fh:
        assert len(list(fh.keys())) == 3
    with pytest.raises(Exception):
        safe_open(str(bad), "np")
    assert check_safetensors(good).ok and not check_safetensors(bad).ok


# -- RH205 / RH206 through the plugin ------------------------------------------------------
def workspace(tmp_path, **kw):
    kw.setdefault("log", ltx_step_lines(2000, 1240))
    return ltx_workspace(tmp_path / "ws", **kw)


def test_rh205_newest_pair_present_while_older_pruned_passes(tmp_path):
    ws = workspace(tmp_path, weights=[1000, 1500], states=[1500])  # step 500 pruned, state 1000 pruned
    r = check_on(ws, "RH205").of()
    assert r.passed and "1500 has its training state" in r.note


def test_rh205_load_checkpoint_missing(tmp_path):
    ws = workspace(
        tmp_path, weights=[500], states=[500], load="outputs/checkpoints/lora_weights_step_00900.safetensors"
    )
    r = check_on(ws, "RH205").of()
    assert (r.passed, r.cause) == (False, "load-checkpoint-missing")
    assert r.evidence[0].path == "config.yaml" and r.evidence[0].line == 5


def test_rh205_load_checkpoint_without_state_beside_it(tmp_path):
    ws = workspace(
        tmp_path, weights=[500, 1000], states=[1000], load="outputs/checkpoints/lora_weights_step_00500.safetensors"
    )
    r = check_on(ws, "RH205").of()
    assert (r.passed, r.cause) == (False, "resume-state-missing")
    assert "restart at step 0" in r.summary


def test_rh205_state_being_written_is_named(tmp_path):
    ws = workspace(tmp_path, weights=[500, 1000], states=[500])
    (ws / "outputs/checkpoints/training_state_step_01000.pt.tmp").write_bytes(b"PK")
    r = check_on(ws, "RH205").of()
    assert r.cause == "resume-state-missing" and ".pt.tmp exists" in r.summary


def test_rh205_kohya_state_folders(tmp_path):
    kohya = tmp_path / "k"
    shutil.copytree(EXAMPLES / "kohya-healthy", kohya)
    shutil.rmtree(kohya / "mylora-state")  # the final checkpoint lost its state; step 50 kept one
    r = check_on(kohya, "RH205").of()
    assert (r.passed, r.cause) == (False, "resume-state-missing")


def test_rh206_zero_byte_and_oversized_claim(tmp_path):
    ws = workspace(tmp_path, weights=[500, 1000], states=[500, 1000])
    ck = ws / "outputs" / "checkpoints"
    (ck / "lora_weights_step_01000.safetensors").write_bytes(b"")
    header_file(
        ck / "extra.safetensors", {"w": {"dtype": "F16", "shape": [1024], "data_offsets": [0, 2048]}}, b"\x00" * 10
    )
    r = check_on(ws, "RH206").of()
    assert (r.passed, r.cause) == (False, "truncated-checkpoint")
    assert "2 of 3 checkpoint(s)" in r.summary and "lora_weights_step_00500" in r.summary


def hf_checkpoint(out: Path, step: int, weights: dict[str, bool]) -> None:
    """checkpoint-<step>/ with the non-weight parts the Trainer writes and the
    weight entries given (name: is a folder)."""
    ck = out / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    for name in ("rng_state_0.pth", "rng_state_1.pth", "scheduler.pt", "training_args.bin", "config.json"):
        (ck / name).write_bytes(b"x")
    (ck / "trainer_state.json").write_text(f'{{"global_step": {step}, "log_history": [], "max_steps": 3000}}')
    for name, folder in weights.items():
        if folder:
            (ck / name).mkdir()
            (ck / name / "mp_rank_00_model_states.pt").write_bytes(b"x")
        else:
            (ck / name).write_bytes(b"x")


def test_distributed_checkpoints_keep_their_weights_in_folders(tmp_path):
    """QA: a DeepSpeed ZeRO-3 save without stage3_gather_16bit_weights_on_model_save
    writes no model.safetensors (transformers Trainer.save_model: "use
    zero_to_fp32.py to recover weights"), only global_step<N>/; FSDP's sharded
    save keeps them in pytorch_model_fsdp_0/. RH206 called both incomplete."""
    ds = tmp_path / "ds"
    for step in (500, 1000):
        hf_checkpoint(ds, step, {f"global_step{step}": True, "latest": False, "zero_to_fp32.py": False})
    assert check_on(ds, "RH206").of().passed
    fsdp = tmp_path / "fsdp"
    for step in (500, 1000):
        hf_checkpoint(fsdp, step, {"pytorch_model_fsdp_0": True, "optimizer_0": True})
    assert check_on(fsdp, "RH206").of().passed
    # near miss: a checkpoint with neither weights nor an engine folder is still incomplete
    hf_checkpoint(ds, 1500, {"latest": False})
    f = check_on(ds, "RH206").of()
    assert f.cause == "checkpoint-incomplete" and "checkpoint-1500/ lacks weights" in f.summary
