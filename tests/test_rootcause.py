"""The root-cause reader on real wordings (issue 13): each cause, wrapper and
prefix form with a failing log and a near-miss that must stay quiet. Log lines
are quoted from public issues (named beside each) or are the libraries' own
message formats; logs are read through the real tail reader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_runhealth.features.status import training_points
from pytest_runhealth.readers.logscan import read_log_tail, scan_log
from pytest_runhealth.readers.rootcause import diagnose, strip_prefix

BAR = "steps:  38%|███▊      | 36/96 [13:09<21:55, 21.93s/it, avr_loss=0.0796]"  # musubi-tuner#477
TB = 'Traceback (most recent call last):\n  File "train_network.py", line 1012, in <module>\n    trainer.train(args)\n'
ACCEL = (
    'Traceback (most recent call last):\n  File "/usr/local/bin/accelerate", line 8, in <module>\n    sys.exit(main())\n'
    '  File "/usr/local/lib/python3.10/dist-packages/accelerate/commands/launch.py", line 637, in simple_launcher\n'
    "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n"
    "subprocess.CalledProcessError: Command '['/usr/bin/python', 'train_network.py']' returned non-zero exit status 1.\n"
)


def read(tmp_path, text: str, *, finished: bool = False):
    path = tmp_path / "train.log"
    path.write_bytes(text.encode())
    scan = scan_log(path)
    last = scan.last_step
    return diagnose(read_log_tail(path, scan=scan), last.line if last else 0, finished=finished)


FAILING = {
    # cause, backend/rank expectations, log
    "accelerate-wraps-module-not-found": (
        "missing-trainer-module",
        None,
        TB + "ModuleNotFoundError: No module named 'bitsandbytes'\n" + ACCEL,
    ),
    "torchrun-wraps-rank-oom": (
        "cuda-oom",
        "CUDA",
        (
            '[rank1]: Traceback (most recent call last):\n[rank1]:   File "train.py", line 9, in <module>\n'
            "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB. GPU 1 has a total capacity of 39.56 GiB\n"
            "E0908 17:08:08.400000 3889263 site-packages/torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: 1\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        ),
    ),
    "deepspeed-return-code": (
        "cuda-oom",
        "CUDA",
        (
            "[default0]:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity)\n"
            "[2024-05-01 10:00:00,123] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py'] exits with return code = 1\n"
        ),
    ),
    "gui-training-failed-loguru": (
        "gpu-oom",
        "MPS",
        (
            "RuntimeError: MPS backend out of memory (MPS allocated: 45.18 GiB, other allocations: 719.81 MiB, max allowed: 45.90 GiB).\n"
            "2026-02-07 19:33:57.629 | INFO     | acestep.gradio_ui.events.training_handlers:start_training:642 - [16s] Step 0: "
            "Training failed: MPS backend out of memory\n"
        ),
    ),
    "chain-root-first": (
        "fused-optimizer-keyerror",
        None,
        (
            TB
            + "KeyError: 'beta1'\n\nDuring handling of the above exception, another exception occurred:\n\n"
            + TB
            + "AttributeError: 'NoneType' object has no attribute 'step'\n"
        ),
    ),
    "glued-killed": ("host-oom", None, "running training / 学習開始\n" + BAR + "Killed\n"),
    "bare-killed-then-sigkill-wrapper": (
        "host-oom",
        None,
        BAR + "\nKilled\n" + ACCEL.replace("returned non-zero exit status 1.", "died with <Signals.SIGKILL: 9>."),
    ),
    "memoryerror": ("host-oom", None, TB + "MemoryError\n"),
    "rust-panic-alloc": (
        "host-oom",
        None,
        "saving checkpoint: out/x-step00000250.safetensors\nmemory allocation of 1073741824 bytes failed\n",
    ),
    "segfault": ("segfault", None, BAR + "\nSegmentation fault (core dumped)\n"),
    "shell-segfault": ("segfault", None, BAR + "\nzsh: segmentation fault  python train.py\n"),
    "dataloader": (
        "dataloader-worker-killed",
        None,
        TB + "RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.\n",
    ),
    "dataloader-exited": (
        "dataloader-worker-killed",
        None,
        TB + "RuntimeError: DataLoader worker (pid(s) 3044) exited unexpectedly\n",
    ),
    "nccl-watchdog": (
        "collective-timeout",
        "NCCL",
        (
            "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for "
            "600061 milliseconds before timing out.\n"
        ),
    ),
    "disk-full": (
        "disk-full",
        None,
        "saving checkpoint: out/x-000003.safetensors\n" + TB + "OSError: [Errno 28] No space left on device\n",
    ),
    "hip-oom": (
        "cuda-oom",
        "HIP",
        TB
        + "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 4.50 GiB. GPU 0 has a total capacity of 15.98 GiB\n",
    ),
    "xpu-oom": (
        "gpu-oom",
        "XPU",
        TB + "RuntimeError: XPU out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.11 GiB total capacity)\n",
    ),
    "old-cuda-oom": (
        "cuda-oom",
        "CUDA",
        TB + "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 8.00 GiB total capacity)\n",
    ),
    "hf-model-not-found": (
        "missing-model-file",
        None,
        TB + "OSError: stabilityai/sdxl-vae is not a local folder and is not a valid "
        "model identifier listed on 'https://huggingface.co/models'\n",
    ),
    "ray-worker-prefix": (
        "cuda-oom",
        "CUDA",
        (
            "(RayWorker pid=1234) Traceback (most recent call last):\n"
            "(RayWorker pid=1234) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
        ),
    ),
    "capture-wrapper-prefix": (
        "missing-trainer-module",
        None,
        (
            "[08:03:35] [STDERR] Traceback (most recent call last):\n"
            "[08:03:35] [STDERR] ModuleNotFoundError: No module named 'musubi_tuner'\n"
        ),
    ),
    "paste-line-numbers": ("segfault", None, "[0041] " + BAR + "\n[0042] Segmentation fault (core dumped)\n"),
    "logging-prefix": ("host-oom", None, "INFO:root:Traceback (most recent call last):\nINFO:root:MemoryError\n"),
    # -- issue 13, second pass (wordings from the holdout and x- field cases) --
    # facebookarchive/loop#36: 2017 PyTorch, glued to a bar
    "thc-oom": (
        "cuda-oom",
        "CUDA",
        BAR + "THCudaCheck FAIL file=/b/wheel/pytorch-src/torch/lib/THC/generic/THCStorage.cu "
        "line=66 error=2 : out of memory\n" + TB + "RuntimeError: cuda runtime error (2) : out of memory at "
        "/b/wheel/pytorch-src/torch/lib/THC/generic/THCStorage.cu:66\n",
    ),
    # QwenLM/Qwen3#873
    "cublas-alloc": (
        "cuda-oom",
        "CUDA",
        TB + "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n",
    ),
    # tensorflow/tensorflow#4735, patrickbryant1/AFProfile#8, jax-ml/jax#788 (wrapped after "Out ")
    "tf-resource-exhausted": (
        "cuda-oom",
        "TensorFlow/XLA",
        "ResourceExhaustedError (see above for traceback): OOM when "
        "allocating tensor with shape[256,112,112,64]\n" + TB + "    raise\n",
    ),
    "xla-resource-exhausted": (
        "cuda-oom",
        "TensorFlow/XLA",
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: "
            "Out of memory while trying to allocate 4770354232 bytes.\nBufferAssignment OOM Debugging.\n"
        ),
    ),
    "xla-wrapped": (
        "cuda-oom",
        "TensorFlow/XLA",
        (
            "[1] 2019-06-13 01:17:08.886805: E external/org_tensorflow/tensorflow/"
            "compiler/xla/python/local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out \n"
            "of memory while trying to allocate 5520758552 bytes.\n"
        ),
    ),
    # hiyouga/EasyR1#185, vllm-project/vllm#2669: Ray's memory monitor
    "raylet-oom": (
        "host-oom",
        None,
        BAR + "\n(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: "
        "1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons\n" + TB,
    ),
    "ray-killed-worker": (
        "host-oom",
        None,
        (
            "Memory on the node (IP: 169.254.181.2) where the task was running was 12.49GB / "
            "13.15GB (0.950003), which exceeds the memory usage threshold of 0.95. Ray killed this worker "
            "(ID: 79a5) because it was the most recently scheduled task\n"
        ),
    ),
    # brain-score/vision#950, chrisknewman/tusas#149: SLURM's cgroup OOM handler, old and new wording
    "slurm-oom-kill": (
        "host-oom",
        None,
        (
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=37205392.0.\n"
            "srun: error: node107: task 0: Out Of Memory\n"
        ),
    ),
    "slurm-oom-kill-underscore": (
        "host-oom",
        None,
        (
            "slurmstepd: error: Detected 1 oom_kill event in StepId=440575.0. Some "
            "of the step tasks have been OOM Killed.\n"
        ),
    ),
    # huggingface/diffusers#1156 and chflame163/ComfyUI_CogView4_Wrapper#7: the Hub's and diffusers' wordings
    "hf-cant-load-tokenizer": (
        "missing-model-file",
        None,
        TB + "OSError: Can't load tokenizer for "
        "'CompVis/stable-diffusion-v1-4'. If you were trying to load it from "
        "'https://huggingface.co/models', make sure you don't have a local directory with the same "
        "name.\n" + ACCEL,
    ),
    "diffusers-no-file-named": (
        "missing-model-file",
        None,
        "!!! Exception during processing !!! Error no file named "
        "diffusion_pytorch_model.bin found in directory E:\\models\\CogView4-6B\\vae.\n" + TB,
    ),
    # ostris/ai-toolkit#45: the job runner's summary before a long re-raised traceback
    "summary-before-reraise": (
        "cuda-oom",
        "CUDA",
        "Error running job: CUDA out of memory. Tried to allocate 48.00 MiB.\n\n"
        "========================================\nResult:\n - 0 completed jobs\n - 1 failure\n"
        "========================================\n" + TB * 4,
    ),
    # issue 46: musubi's LTX-2 trainer finding no cached text embeddings in its batch
    "cached-embeddings-missing": (
        "missing-cache-files",
        None,
        TB + "ValueError: Cached text embeddings missing from batch. Expected either batch['conditions'] (official "
        "format) or 'text'/'text_mask' (legacy musubi format).\n",
    ),
    # issue 46: a local model path that is not there (relative, ~ unexpanded) taken for a Hub id
    "relative-model-path-as-repo-id": (
        "missing-model-file",
        None,
        TB + "huggingface_hub.utils._validators.HFValidationError: Repo id must be in the form 'repo_name' or "
        "'namespace/repo_name': '../cache/ckpt'. Use `repo_type` argument if needed.\n",
    ),
    # issue 46: kohya sd-scripts' `adafactor` scheduler without Adafactor's relative_step (the code line names it)
    "adafactor-scheduler-indexerror": (
        "adafactor-scheduler-config",
        None,
        "Traceback (most recent call last):\n"
        '  File "train_util.py", line 3747, in get_scheduler_fix\n'
        '    initial_lr = float(name.split(":")[1])\n'
        "IndexError: list index out of range\n",
    ),
    # Nerogar/OneTrainer#172: the training thread's death is the run's
    "training-thread": (
        "unknown",
        None,
        "Exception in thread Thread-1 (__training_thread_function):\n"
        + TB
        + "FileNotFoundError: [WinError 2] The system cannot find the file specified\n",
    ),
}


@pytest.mark.parametrize("name", FAILING)
def test_root_cause(tmp_path, name):
    cause, backend, log = FAILING[name]
    found = read(tmp_path, log)
    assert found is not None, name
    assert found.cause == cause, (name, found.cause, found.line.text)
    if backend:
        assert found.backend == backend
        assert backend in found.describe()


def test_wrapper_is_a_consequence_not_the_cause(tmp_path):
    found = read(tmp_path, FAILING["accelerate-wraps-module-not-found"][2])
    assert "ModuleNotFoundError" in found.line.text
    assert any("CalledProcessError" in tl.text for tl in found.consequences)


def test_first_rank_to_fail_is_the_root(tmp_path):
    log = (
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout\n"
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    found = read(tmp_path, TB.replace("\n", "\n", 1) + log)
    assert (found.cause, found.rank) == ("cuda-oom", "3")
    assert found.describe() == "cuda-oom (CUDA) on rank 3"


def test_nccl_timeout_gives_way_to_the_rank_that_died(tmp_path):
    log = (
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout\n"
        "[rank2]: Traceback (most recent call last):\n[rank2]: OSError: [Errno 28] No space left on device\n"
    )
    assert read(tmp_path, log).cause == "disk-full"


def test_unknown_quotes_the_root_exception_not_the_launcher(tmp_path):
    log = (
        TB
        + "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n"
        + ACCEL
    )
    found = read(tmp_path, log)
    assert found.cause == "unknown"
    assert found.line.text.startswith("RuntimeError: Expected all tensors")
    assert found.consequences and "CalledProcessError" in found.consequences[0].text


NEAR_MISSES = {
    "caught-and-retried": TB
    + "ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out.\n"
    "Retrying in 5 seconds...\n",
    "oom-hint-then-steps": "WARNING: If you run out of memory (CUDA out of memory), lower the batch size\n"
    + BAR
    + "\n",
    "oom-hint-warning-last": BAR
    + "\nUserWarning: CUDA out of memory hint: consider enable_xformers_memory_efficient_attention\n",
    # issue 46: the repo-id rule's wording in a handled warning, training going on
    "repo-id-warning-then-steps": "WARNING: Repo id must be in the form 'namespace/repo_name'; using the local "
    "folder ./models/base\n" + BAR + "\n",
    "bloom-and-room": BAR + "\nloading bigscience/bloom-560m; room for 3 more buckets\n",
    "error-on-missing-config": BAR + "\n  error_on_missing: false\n  nan_check: false\n",
    "triton-warnings-steps": (
        "A matching Triton is not available, some optimizations will not be enabled.\n"
        "Error caught was: No module named 'triton'\n" + BAR + "\n"
    ),
    "triton-warning-traceback": (
        "WARNING  A matching Triton is not available, some optimizations will not be enabled   __init__.py:61\n"
        "Traceback (most recent call last):\n    import triton  # noqa\n"
        "ModuleNotFoundError: No module named 'triton'\n"
    ),
    "error-word-in-info": BAR + "\nINFO: computing mean squared error over 4 buckets\n",
    "loss-scaler-overflow": BAR
    + "\n[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768\n",
    # tensorflow/tensorflow#23953: the BFC allocator says itself that this is not a failure
    "tf-allocator-not-a-failure": (
        "2018-11-25 19:04:59.501703: W tensorflow/core/common_runtime/bfc_allocator.cc:215] Allocator "
        "(GPU_0_bfc) ran out of memory trying to allocate 217.69MiB. The caller indicates that this "
        "is not a failure, but may mean that there could be performance gains if more memory were "
        "available.\n"
    ),
    # chflame163/ComfyUI_CogView4_Wrapper#7: a fetch error diffusers falls back from
    "fetch-error-then-default": (
        "An error occurred while trying to fetch E:\\models\\vae: Error no file named "
        "diffusion_pytorch_model.safetensors found in directory E:\\models\\vae.\n"
        "Defaulting to unsafe serialization. Pass `allow_pickle=False` to raise an error instead.\n"
    ),
    "monitor-thread-traceback": "Exception in thread Thread-3 (_monitor):\n"
    + TB
    + "RuntimeError: cannot join current thread\n",
    "xformers-warning": (
        "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
        "  Please reinstall xformers (see https://github.com/facebookresearch/xformers#installing-xformers)\n"
        "  Memory-efficient attention, SwiGLU, sparse and more won't be available.\n"
    ),
}


def test_illegal_memory_access_is_not_an_oom(tmp_path):
    # pytorch/pytorch#34220: "memory" in a CUDA error does not make it an out-of-memory
    found = read(tmp_path, TB + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert (found.cause, found.line.text) == (
        "unknown",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    )


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_near_miss_stays_quiet(tmp_path, name):
    found = read(tmp_path, NEAR_MISSES[name])
    assert found is None, (name, found and (found.cause, found.line.text))


def test_thread_traceback_after_final_step_is_not_fatal(tmp_path):
    log = (
        "steps: 100%|██████████| 96/96 [35:09<00:00, 21.93s/it, avr_loss=0.0796]\n"
        "Exception in thread Thread-3 (_monitor):\n" + TB + "RuntimeError: cannot join current thread\n"
    )
    assert read(tmp_path, log, finished=True) is None


def test_a_traceback_before_the_last_steps_is_history(tmp_path):
    bar2 = BAR.replace("36/96", "37/96")
    log = TB + "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\n" + BAR + "\n" + bar2 + "\n"
    assert read(tmp_path, log) is None


def test_an_error_just_before_the_last_bar_redraw_is_the_end(tmp_path):
    # bmaltais/kohya_ss#1202: stderr and stdout interleave, so the OOM lands before the last redraw
    log = (
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 6.00 GiB total capacity; 5.24 GiB already\n"
        "steps:   0%|          | 1/2100 [00:03<2:05:34,  3.59s/it, loss=0.473]\n"
    )
    assert read(tmp_path, log).cause == "cuda-oom"


def test_strip_prefix_forms():
    assert strip_prefix("[INFO] [rank1]: RuntimeError: x") == ("RuntimeError: x", "1")
    assert strip_prefix("[default0]:torch.OutOfMemoryError: CUDA")[1] == "0"
    assert strip_prefix("(pid=1234) Killed")[0] == "Killed"
    assert strip_prefix("2026-02-07 19:33:57.629 | INFO     | a.b:start_training:642 - text")[0] == "text"
    assert (
        strip_prefix("ERROR    | 2024-08-29 06:16:31 | autotrain.trainers.common:wrapper:120 - train has failed")[0]
        == "train has failed"
    )


# -- RH202: loss in every wording -----------------------------------------------------
NAN_WORDINGS = {
    "transformers-dict": "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.5}\n",
    "loss-colon": "Epoch 3: loss: nan\n",
    "ltx-capital": "Step 120/2000 - Loss: NaN, LR: 1.00e-04, Time/Step: 4.12s, Total Time: 0h 8m\n",
    "prose": "the loss is nan after 3 epochs, stopping\n",
    "tqdm-loss": "steps:   0%|          | 1/2100 [00:03<2:05:34,  3.59s/it, loss=nan]\n",
    "mmdet": "Iter [10100/316440]\tlr: 3.990e-04, frame_0_enc_loss_cls: nan, loss: nan, grad_norm: nan\n",
    # meta-pytorch/torchtune#2776: the loss in the bar's description, pasted in backticks
    "tqdm-description": "`|Loss: nan:   0%|                         | 3/3073 [00:15<4:04:50,  4.79s/it]`\n",
    "bare-pair-behind-rank-prefix": "[rank3]: 76980 nan\n",
    "bare-pair-behind-loguru": "2026-02-07 19:33:57.629 | INFO     | trainer:fit:642 - 76990 nan\n",
}


@pytest.mark.parametrize("name", NAN_WORDINGS)
def test_nan_loss_wordings(tmp_path, name):
    path = tmp_path / "train.log"
    path.write_text(NAN_WORDINGS[name])
    assert scan_log(path).nonfinite_count >= 1, name


NOT_NAN = {
    "grad-norm-only": "{'loss': 0.1474, 'grad_norm': nan, 'learning_rate': 0.0001, 'epoch': 0.04}\n",
    "nan-in-word": "loading nanodet weights; loss: 0.31\nmodel: nano-banana; Loss: 0.2\n",
    "nan-in-file-name": "saved samples/loss=nan.png for debugging: loss=0.12\n",
    "loss-scale-inf": "loss scale: inf | grad norm: nan | number of nan iterations: 0\n",
    "val-loss-in-description": "Epoch 1 val_loss=nan:  10%|#   | 3/30 [00:15<04:50,  4.79s/it]\n",
    "pair-behind-words": "epoch 3 inf\n",
}


@pytest.mark.parametrize("name", NOT_NAN)
def test_not_a_nan_loss(tmp_path, name):
    path = tmp_path / "train.log"
    path.write_text(NOT_NAN[name])
    assert scan_log(path).nonfinite_count == 0, (name, scan_log(path).nonfinite)


def test_nan_then_finite_is_still_a_nan_event(tmp_path):
    path = tmp_path / "train.log"
    lines = [
        f"steps:  {i}%|  | {i}/100 [00:{i:02d}<01:00,  1.00s/it, avr_loss={'nan' if i in (5, 6) else '0.1'}]"
        for i in range(1, 12)
    ]
    path.write_text("\n".join(lines) + "\n")
    scan = scan_log(path)
    assert scan.nonfinite_count == 2
    assert scan.nonfinite[0][0].step == 5


# -- robustness beyond the corpus: every must-alarm excerpt, re-wrapped ---------------
# Each real prefix form the reader claims to strip (rootcause.PREFIX), put in front of every
# line of every RH201/RH202 field excerpt, and CRLF line endings, must leave the diagnosis as
# it was; so must a launcher's wrapper tail appended after the excerpt. The reader works on
# text: one small file per example, no pytest session.
FIELD = Path(__file__).parent / "field"


def _field_logs(check: str) -> list[Path]:
    out = []
    for case in sorted(FIELD.glob("*/case.yaml")):
        spec = yaml.safe_load(case.read_text(encoding="utf-8"))
        log = case.parent / "run" / "train.log"
        if isinstance(spec["expect"], dict) and spec["expect"]["check"] == check and log.is_file():
            out.append(log)
    return out


RH201_LOGS = _field_logs("RH201")
RH202_LOGS = _field_logs("RH202")
PREFIXES = {
    "rank": lambda i: "[rank3]: ",
    "default": lambda i: "[default0]:",
    "info-rank": lambda i: "[INFO] [rank1]: ",
    "iso-timestamp": lambda i: f"2026-02-07T19:33:{i % 60:02d}.629Z ",
    "platform-timestamp": lambda i: f"2024-11-20 14:38:{i % 60:02d}   ",
    "loguru": lambda i: f"2026-02-07 19:33:57.{i % 1000:03d} | INFO     | acestep.training:start_training:642 - ",
    "ray-worker": lambda i: "(RayWorker pid=123) ",
    "paste-line-numbers": lambda i: f"[{i:04d}] ",
    "capture-wrapper": lambda i: "[08:03:35] [STDERR] ",
    "logging-root": lambda i: "INFO:root:",
}
WRAPPER_TAILS = {
    "accelerate": ACCEL,
    "torchrun": (
        'Traceback (most recent call last):\n  File "/usr/local/bin/torchrun", line 8, in <module>\n    sys.exit(main())\n'
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\ntrain.py FAILED\n"
        "------------------------------------------------------------\nFailures:\n  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\nRoot Cause (first observed failure):\n[0]:\n"
        "  time      : 2024-11-20_14:37:28\n  host      : node-1\n  rank      : 0 (local_rank: 0)\n"
        "  exitcode  : 1 (pid: 96)\n  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        "============================================================\n"
    ),
    "deepspeed": (
        "[2024-05-01 10:00:00,123] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', "
        "'train.py', '--local_rank=0'] exits with return code = 1\n"
    ),
}


def _diagnose_text(path: Path, text: str):
    """What RH201 reads (status.RunFacts): the window after the last training step."""
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    scan = scan_log(path)
    points = training_points(scan)
    last = max(points, key=lambda p: (p.step, p.line)) if points else None
    finished = bool((last is not None and last.total and last.step >= last.total) or scan.finished_line is not None)
    found = diagnose(read_log_tail(path, scan=scan), last.line if last else 0, finished=finished)
    return found.cause if found else None


def _rewrap(text: str, prefix) -> str:
    lines = text.split("\n")
    return "\n".join(prefix(i) + ln if ln.strip() else ln for i, ln in enumerate(lines, 1))


def _original(tmp_path, log: Path) -> str:
    cause = _diagnose_text(tmp_path / "orig.log", log.read_bytes().decode("utf-8", "surrogateescape"))
    assert cause is not None, log.parent.parent.name
    return cause


@pytest.mark.parametrize("log", RH201_LOGS, ids=[p.parent.parent.name for p in RH201_LOGS])
def test_prefixes_and_crlf_keep_the_cause(tmp_path, log):
    text = log.read_bytes().decode("utf-8", "surrogateescape")
    want = _original(tmp_path, log)
    got = {name: _diagnose_text(tmp_path / f"{name}.log", _rewrap(text, prefix)) for name, prefix in PREFIXES.items()}
    got["crlf"] = _diagnose_text(tmp_path / "crlf.log", text.replace("\r\n", "\n").replace("\n", "\r\n"))
    assert {k: v for k, v in got.items() if v != want} == {}, want


@pytest.mark.parametrize("log", RH201_LOGS, ids=[p.parent.parent.name for p in RH201_LOGS])
def test_a_launcher_tail_keeps_the_root_cause(tmp_path, log):
    text = log.read_bytes().decode("utf-8", "surrogateescape")
    want = _original(tmp_path, log)
    body = text if text.endswith("\n") else text + "\n"
    got = {name: _diagnose_text(tmp_path / f"{name}.log", body + tail) for name, tail in WRAPPER_TAILS.items()}
    assert {k: v for k, v in got.items() if v != want} == {}, want


@pytest.mark.parametrize("log", RH202_LOGS, ids=[p.parent.parent.name for p in RH202_LOGS])
def test_prefixes_and_crlf_keep_a_nan_loss(tmp_path, log):
    text = log.read_bytes().decode("utf-8", "surrogateescape")
    variants = {name: _rewrap(text, prefix) for name, prefix in PREFIXES.items()}
    variants["crlf"] = text.replace("\r\n", "\n").replace("\n", "\r\n")
    missed = []
    for name, variant in variants.items():
        path = tmp_path / f"{name}.log"
        path.write_bytes(variant.encode("utf-8", "surrogateescape"))
        scan = scan_log(path)
        if not (scan.nonfinite_count or scan.filtered_nan_count):  # or a NaN the HF Trainer logged as 0.0
            missed.append(name)
    assert missed == []


# -- issue 25: wordings real libraries print, and tqdm's closing redraw -----------------------------
ISSUE25_LINES = [
    # pytorch/pytorch#156955 (torch's zip writer on a full /tmp)
    ("  what():  [enforce fail at inline_container.cc:659] . unexpected pos 64 vs 0", "disk-full"),
    ("RuntimeError: basic_ios::clear: iostream error", "disk-full"),
    ("OSError: [Errno 27] File too large", "disk-full"),  # RLIMIT_FSIZE, measured by tests/faults
    (
        "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 2.00 GiB for an array with shape "
        "(2147483648,) and data type uint8",
        "host-oom",
    ),
    (
        "subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGKILL: 9>.",
        "killed-by-signal",
    ),
    ("FloatingPointError: Loss became infinite or NaN at iteration=27!", "nan-loss"),
]


@pytest.mark.parametrize("line,cause", ISSUE25_LINES, ids=[c + str(i) for i, (_, c) in enumerate(ISSUE25_LINES)])
def test_issue25_wordings(tmp_path, line, cause):
    body = "steps:  10%|#         | 10/100 [00:10<01:30,  1.00it/s, loss=0.5]\nTraceback (most recent call last):\n"
    body += '  File "train.py", line 3, in <module>\n    main()\n' + line + "\n"
    assert _diagnose_text(tmp_path / "x.log", body) == cause


def test_a_launcher_signal_beside_the_trainers_own_traceback_is_a_wrapper(tmp_path):
    """torchrun SIGTERMs the other ranks after one raised: the raise is the root, not the signal."""
    body = (
        "steps:  10%|#         | 10/100 [00:10<01:30,  1.00it/s, loss=0.5]\nTraceback (most recent call last):\n"
        "  File \"train.py\", line 3, in <module>\n    main()\nKeyError: 'lr_warmup_steps'\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -15) local_rank: 1 (pid: 7) of binary: python\n"
    )
    assert _diagnose_text(tmp_path / "x.log", body) == "unknown"


def test_tqdm_closing_redraw_after_a_traceback_does_not_hide_it(tmp_path):
    """Real tqdm (tests/faults) redraws its bar once more at interpreter exit, after the traceback."""
    bar = "steps:  29%|##9       | 29/100 [00:01<00:03, 20.00it/s, avr_loss=0.05]"
    tb = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    x = cfg['k']\nKeyError: 'k'\n"
    assert _diagnose_text(tmp_path / "a.log", "\r" + bar + "\n" + tb + "\r" + bar + "\n") == "unknown"
    # The near-miss: a handled warning traceback, then training went on with new steps.
    more = "\r" + bar.replace("29/100", "30/100") + "\r" + bar.replace("29/100", "31/100") + "\n"
    handled = "WARNING:root:retrying after\n" + tb.replace("KeyError: 'k'", "KeyError: 'k' (retrying)")
    assert _diagnose_text(tmp_path / "b.log", "\r" + bar + "\n" + handled + more) is None


ISSUE25_MORE = [
    # Lightning's check_finite_loss, torch.autograd.detect_anomaly, Keras' TerminateOnNaN (library source wordings)
    ("ValueError: The loss returned in `training_step` is nan or inf.", "nan-loss"),
    ("RuntimeError: Function 'PowBackward0' returned nan values in its 0th output.", "nan-loss"),
    # concurrent.futures.process (CPython's wording)
    (
        "concurrent.futures.process.BrokenProcessPool: A process in the process pool was terminated abruptly "
        "while the future was running or pending.",
        "dataloader-worker-killed",
    ),
]


@pytest.mark.parametrize("line,cause", ISSUE25_MORE, ids=[c + str(i) for i, (_, c) in enumerate(ISSUE25_MORE)])
def test_issue25_more_wordings(tmp_path, line, cause):
    body = "steps:  10%|#         | 10/100 [00:10<01:30,  1.00it/s, loss=0.5]\nTraceback (most recent call last):\n"
    body += '  File "train.py", line 3, in <module>\n    main()\n' + line + "\n"
    assert _diagnose_text(tmp_path / "x.log", body) == cause


def test_a_handled_nan_message_is_not_a_nan_death(tmp_path):
    body = "steps:  10%|#         | 10/100 [00:10<01:30,  1.00it/s, loss=0.5]\nWARNING: loss is nan, skipping batch\n"
    assert _diagnose_text(tmp_path / "x.log", body) is None


def test_nested_bars_closed_after_a_traceback(tmp_path):
    """An epoch bar and a step bar both redrawn at exit, after the traceback."""
    step = "steps:  29%|##9       | 29/100 [00:01<00:03, 20.00it/s, avr_loss=0.05]"
    epoch = "epoch:   0%|          | 0/3 [00:01<?, ?it/s]"
    tb = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    x = cfg['k']\nKeyError: 'k'\n"
    log = "\r" + epoch + "\n\r" + step + "\n" + tb + "\r" + step + "\n\r" + epoch + "\n"
    assert _diagnose_text(tmp_path / "a.log", log) == "unknown"


# -- holdout 2's misses, fixed as general patterns (tests/field/HOLDOUT.md) --------------------------
# Each a must-alarm log and its near-miss: the same wording where it means something else.
HOLDOUT2_LOGS = [
    # torchrun's agent itself signalled (a closed terminal's SIGHUP): the signal, not a worker's error
    (
        "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers\n"
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 11 closing signal SIGHUP\n",
        "killed-by-signal",
    ),
    (
        'Traceback (most recent call last):\n  File "run.py", line 3, in <module>\n    main()\n'
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 7 got signal: 15\n",
        "killed-by-signal",
    ),
    # near-miss: the agent *sending* SIGTERM after a rank failed with exit code 1 names no outside signal
    (
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 11 closing signal SIGTERM\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 10) of binary: python\n",
        "unknown",
    ),
    # TensorFlow's OOM on the host allocator is host RAM; on a GPU's allocator it is the accelerator's
    (
        "W op_kernel.cc:1273] OP_REQUIRES failed at cwise_ops_common.h:245 : Resource exhausted: OOM when allocating "
        "tensor with shape[3,3,576,512] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu\n",
        "host-oom",
    ),
    (
        "W op_kernel.cc:1273] OP_REQUIRES failed at conv_ops.cc:386 : Resource exhausted: OOM when allocating "
        "tensor with shape[64,256,56,56] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n",
        "cuda-oom",
    ),
    # basic_ios::clear raised by a Python binding on a failed save is a full disk; a C++ program's own
    # uncaught stream failure is not (unknown, its what() line quoted)
    (
        'Traceback (most recent call last):\n  File "save.py", line 9, in <module>\n    index.saveIndex(path)\n'
        "RuntimeError: basic_ios::clear: iostream error\n",
        "disk-full",
    ),
    (
        "terminate called after throwing an instance of 'std::ios_base::failure[abi:cxx11]'\n"
        "  what():  basic_ios::clear: iostream error\nAborted\n",
        "unknown",
    ),
    # srun cancels the step after a task failed: the task's failure, not the scheduler's decision
    (
        "srun: error: c1: task 1: Exited with exit code 99\nsrun: Terminating job step 15.2\n"
        "slurmstepd: error: *** STEP 15.2 ON c1 CANCELLED AT 2018-08-30T21:14:12 ***\n"
        "srun: error: c1: task 0: Killed\n",
        "unknown",
    ),
    (
        "slurmstepd: error: *** STEP 15.0 ON c1 CANCELLED AT 2026-04-29T23:36:37 DUE TO TASK FAILURE ***\n"
        "srun: error: c1: tasks 0-57,59-63: Terminated\n",
        "unknown",
    ),
    # near-miss: a cancellation with no task failure before it is the scheduler's (scancel)
    (
        "slurmstepd: error: *** STEP 15.0 ON c1 CANCELLED AT 2018-08-30T21:14:12 ***\n"
        "srun: error: c1: task 0: Exited with exit code 143\n",
        "scheduler-cancelled",
    ),
    # a DataLoader worker's death explained by the OOM killer's report after it; alone it is the worker's
    (
        "RuntimeError: DataLoader worker (pid(s) 2150614) exited unexpectedly\n"
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=15.batch. Some of your processes may have been "
        "killed by the cgroup out-of-memory handler.\n",
        "host-oom",
    ),
    ("RuntimeError: DataLoader worker (pid(s) 2150614) exited unexpectedly\n", "dataloader-worker-killed"),
    # a glog stack after Paddle's summary does not push the OOM out of the window; ordinary lines would
    (
        "Error Message Summary:\nResourceExhaustedError: \n"
        "Out of memory error on GPU 0. Cannot allocate 3.125000GB memory on GPU 0, available memory is only 117.75MB.\n"
        "Please check whether there is any other process using GPU 0.\n at (/paddle/cuda_allocator.cc:69)\n"
        "*** Check failure stack trace: ***\n"
        + "".join(f"    @     0x7fd5084678{i:02x}  google::LogMessage::Fail()\n" for i in range(14)),
        "cuda-oom",
    ),
]


@pytest.mark.parametrize("log,cause", HOLDOUT2_LOGS, ids=[f"{c}{i}" for i, (_, c) in enumerate(HOLDOUT2_LOGS)])
def test_holdout2_patterns(tmp_path, log, cause):
    assert _diagnose_text(tmp_path / "x.log", log) == cause


def test_a_message_far_before_the_end_outside_a_native_stack_is_history(tmp_path):
    """The near-miss of the glog rule: 14 ordinary lines after the OOM message push it out of the window."""
    log = "Out of memory error on GPU 0. Cannot allocate 3.1GB memory on GPU 0.\n" + "".join(
        f"epoch 1 batch {i} done\n" for i in range(14)
    )
    assert _diagnose_text(tmp_path / "x.log", log) is None


# -- issue 25, the plumbing trial (tests/faults/test_plumbing.py) --------------------------------------
PLUMB_BAR = "steps:  48%|####8     | 19/40 [00:00<00:00, 45.46it/s, loss=0.1319]"


@pytest.mark.parametrize(
    "said",
    [
        "ERROR: could not read /data/shard-00003.tar: unexpected end of archive",
        "[rank0]:2026-12-01 16:18:35,174 ERROR train: could not read shard-00003.tar",
        "Error: dataset folder /data/train is empty",
    ],
)
def test_an_error_message_then_exit_is_the_end(tmp_path, said):
    """`print("ERROR: ..."); sys.exit(1)`: no traceback, the error record is the last thing said, before
    tqdm's closing redraw or at the very end."""
    log = "\r" + PLUMB_BAR + "\n" + said + "\n"
    assert _diagnose_text(tmp_path / "a.log", log) == "unknown"
    assert _diagnose_text(tmp_path / "b.log", log + "\r" + PLUMB_BAR + "\n") == "unknown"


@pytest.mark.parametrize(
    "body",
    [
        # an error record the run went on past: more lines after it
        "ERROR: could not upload metrics\nsaving checkpoint: a.safetensors\nstep 19 done\nvalidation: 3 images\n",
        # handled
        "ERROR: download failed, retrying in 5 s\n",
        # a count, not a record
        "0 ERROR(s) in the dataset check\n",
    ],
)
def test_an_error_record_near_miss(tmp_path, body):
    assert _diagnose_text(tmp_path / "a.log", "\r" + PLUMB_BAR + "\n" + body) is None


@pytest.mark.parametrize(
    "said",
    ["Received SIGTERM, saving state and exiting", "[rank0]: Received SIGTERM: 15", "caught signal 15, shutting down"],
)
def test_a_trainers_own_signal_handler_is_a_kill_by_signal(tmp_path, said):
    log = "\r" + PLUMB_BAR + "\n" + said + "\n\r" + PLUMB_BAR + "\n"
    assert _diagnose_text(tmp_path / "a.log", log) == "killed-by-signal"
    # Near-misses: torchrun's agent passing a signal on is its own row; a handler that only mentions it.
    assert _diagnose_text(tmp_path / "b.log", "\r" + PLUMB_BAR + "\nsignal handler installed for SIGTERM\n") is None


def test_a_frames_source_line_is_not_the_evidence(tmp_path):
    """`raise OutOfMemoryError(` is the frame's source; the exception line below it is what is quoted."""
    tb = (
        'Traceback (most recent call last):\n  File "/tmp/torch/__init__.py", line 9, in cuda_step\n'
        "    raise OutOfMemoryError(\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB\n"
    )
    path = tmp_path / "a.log"
    path.write_bytes(("\r" + PLUMB_BAR + "\n" + tb).encode())
    scan = scan_log(path)
    found = diagnose(read_log_tail(path, scan=scan), scan.last_step.line)
    assert found is not None and found.cause == "cuda-oom"
    assert found.line.text.startswith("torch.OutOfMemoryError: CUDA out of memory"), found.line.text
    # A launcher's row that matches only on a source line (accelerate's `raise subprocess.CalledProcessError(`)
    # is still a wrapper of the trainer's own death.
    assert _diagnose_text(tmp_path / "b.log", TB + "ModuleNotFoundError: No module named 'x'\n" + ACCEL) == (
        "missing-trainer-module"
    )


# -- issue 35: interrupts, collective timeouts of every backend, other accelerators' OOM, the rank that died ------
GLOO_RECV = (  # genixpro/kwola#2
    "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:84] Timed out waiting 1800000ms "
    "for recv operation to complete"
)
ISSUE35 = {
    "keyboard-interrupt": (TB + "KeyboardInterrupt\n", "interrupted", None),
    "torchrun-sigint": (  # LinkSoul-AI/Chinese-Llama-2-7b#27
        TB
        + '    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)\n'
        + "torch.distributed.elastic.multiprocessing.api.SignalException: Process 1313 got signal: 2\n",
        "interrupted",
        None,
    ),
    "torchrun-agent-sigint": (
        "WARNING:torch.distributed.elastic.agent.server.api:Received 2 death signal, shutting down workers\n",
        "interrupted",
        None,
    ),
    "subprocess-sigint": (
        "subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGINT: 2>.\n",
        "interrupted",
        None,
    ),
    "lightning-graceful-shutdown": (  # lightning/pytorch/trainer/call.py
        "\nDetected KeyboardInterrupt, attempting graceful shutdown ...\n",
        "interrupted",
        None,
    ),
    "own-sigint-handler": ("Received SIGINT, saving checkpoint and exiting\n", "interrupted", None),
    "own-sigterm-handler-stays-a-kill": ("Received SIGTERM, saving checkpoint and exiting\n", "killed-by-signal", None),
    "torchrun-sighup-stays-a-kill": (
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 8665 got signal: 1\n",
        "killed-by-signal",
        None,
    ),
    "gloo-recv-timeout": (TB + GLOO_RECV + "\n", "collective-timeout", "gloo"),
    "gloo-send-timeout": (  # facebookresearch/detectron2#3243
        TB + "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:136] Timed out waiting "
        "1800000ms for send operation to complete\n",
        "collective-timeout",
        "gloo",
    ),
    "horovod-stall-shutdown": (  # horovod/common/stall_inspector.cc
        'One or more rank (marked by "!") is stalled for longer than 600 seconds. Will shutdown.\n',
        "collective-timeout",
        "Horovod (MPI/gloo)",
    ),
    "xla-rendezvous-termination": (  # xla/service/rendezvous.cc
        "E0213 12:41:47.931882   59040 rendezvous.cc:120] Termination timeout for `rendezvous of collective-permute; "
        "run_id=15; op id:1` of 40 seconds exceeded. Exiting to ensure a consistent program state. Expected 8 "
        "threads to join the rendezvous, but not all of them arrived on time.\n",
        "collective-timeout",
        "XLA",
    ),
    "npu-oom": (  # xingchensong/TouchNet#100
        TB + "RuntimeError: NPU out of memory. Tried to allocate 5.03 GiB (NPU 3; 60.96 GiB total capacity; 49.47 GiB "
        "already allocated; 49.47 GiB current active; 1.32 GiB free; 57.55 GiB reserved in total by PyTorch)\n",
        "gpu-oom",
        "Ascend NPU",
    ),
    "mps-oom": (
        TB + "RuntimeError: MPS backend out of memory (MPS allocated: 17.95 GB, other allocations: 124.00 KB, max "
        "allowed: 18.13 GB). Tried to allocate 256.00 MB on private pool.\n",
        "gpu-oom",
        "MPS",
    ),
}


@pytest.mark.parametrize("name", ISSUE35)
def test_issue35_wordings(tmp_path, name):
    log, cause, backend = ISSUE35[name]
    found = read(tmp_path, BAR + "\n" + log)
    assert found is not None and found.cause == cause, (name, found and found.cause)
    assert found.backend == backend
    if backend:
        assert f"({backend})" in found.describe()


ISSUE35_NEAR_MISSES = {
    # ray-project/ray#8005: a gloo timeout the trainer logged as a warning and retried
    "gloo-timeout-retried": "(pid=3769) 2020-05-07 21:07:16,707    WARNING torch_trainer.py:413 -- [/pytorch/third_party/"
    "gloo/gloo/transport/tcp/unbound_buffer.cc:72] Timed out waiting 10000ms for recv operation to complete\n"
    "(pid=3769) 2020-05-07 21:07:19,155    INFO torch_trainer.py:377 -- Retrying training step with 2 workers.\n" + BAR,
    # horovod/horovod#2843: the stall warning, and the ranks caught up
    "horovod-stall-warning": "[2021-04-10 21:28:20.658706: W horovod/common/stall_inspector.cc:105] One or more tensors "
    "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks "
    "for more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that "
    "only subset of ranks is submitting tensors, which will cause deadlock. \n",
    # xla/service/rendezvous.cc: the stuck warning, then unstuck
    "xla-rendezvous-warning": "E0213 12:41:17.931882   59040 rendezvous.cc:98] This thread has been waiting for "
    "`rendezvous of collective-permute; run_id=15; op id:1` for 20 seconds and may be stuck. Expected 8 threads to "
    "join the rendezvous, but not all of them arrived on time.\n"
    "E0213 12:41:19.931882   59040 rendezvous.cc:110] Thread is unstuck! Warning above was a false-positive. "
    "Perhaps the timeout is too short.\n",
    "keyboardinterrupt-word-in-help": "INFO: press Ctrl-C to stop; a KeyboardInterrupt saves a checkpoint first\n"
    + BAR,
}


@pytest.mark.parametrize("name", ISSUE35_NEAR_MISSES)
def test_issue35_near_misses(tmp_path, name):
    assert read(tmp_path, BAR + "\n" + ISSUE35_NEAR_MISSES[name]) is None


# torchrun 2.x with gloo, rank 1 SIGKILLed (issue 35's run): rank 0's gloo error is printed first, then the
# launcher's record names rank 1's death. The dead rank is the root, the peer's error its consequence.
TORCHRUN_RANK_KILLED = (
    BAR + "\n"
    "[rank0]: Traceback (most recent call last):\n"
    '[rank0]:   File "train.py", line 40, in <module>\n'
    "[rank0]:     dist.all_reduce(t)\n"
    "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
    "[127.0.0.1]:12345\n"
    "W1201 10:00:01.000000 4242 torch/distributed/elastic/multiprocessing/api.py:908] Sending process 4300 closing "
    "signal SIGTERM\n"
    "E1201 10:00:01.100000 4242 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: -9) "
    "local_rank: 1 (pid: 4301) of binary: /usr/bin/python3\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/bin/torchrun", line 8, in <module>\n'
    "    sys.exit(main())\n"
    "    raise ChildFailedError(\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    "============================================================\n"
    "train.py FAILED\n"
    "------------------------------------------------------------\n"
    "Failures:\n"
    "  <NO_OTHER_FAILURES>\n"
    "------------------------------------------------------------\n"
    "Root Cause (first observed failure):\n"
    "[0]:\n"
    "  time      : 2026-12-01_10:00:01\n"
    "  host      : box\n"
    "  rank      : 1 (local_rank: 1)\n"
    "  exitcode  : -9 (pid: 4301)\n"
    "  error_file: <N/A>\n"
    "  traceback : Signal 9 (SIGKILL) received by PID 4301\n"
    "============================================================\n"
)


def test_the_rank_that_died_is_the_root_not_the_peer_that_printed_first(tmp_path):
    found = read(tmp_path, TORCHRUN_RANK_KILLED)
    assert (found.cause, found.rank) == ("killed-by-signal", "1"), (found.cause, found.line.text)
    assert any("Connection closed by peer" in tl.text for tl in found.consequences)


def test_a_peers_connection_error_alone_stays_unknown(tmp_path):
    log = (
        BAR
        + "\n"
        + TB
        + "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:10895\n"
    )
    found = read(tmp_path, log)
    assert found.cause == "unknown" and "Connection closed by peer" in found.line.text


def test_a_rank_killed_from_outside_is_the_root_of_the_peers_collective_timeout(tmp_path):
    log = (
        BAR + "\n" + TB + GLOO_RECV + "\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 4301)\n  traceback : Signal 9 (SIGKILL) received by PID 4301\n"
    )
    found = read(tmp_path, log)
    assert (found.cause, found.rank) == ("killed-by-signal", "1")
    assert any("Timed out waiting" in tl.text for tl in found.consequences)


def test_the_watchdogs_own_abort_leaves_the_timeout_the_root(tmp_path):
    """NCCL's watchdog ends its rank with SIGABRT: the launcher's -6 follows from the timeout."""
    log = (
        BAR + "\n[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600061 milliseconds\n"
        "  exitcode  : -6 (pid: 4301)\n  traceback : Signal 6 (SIGABRT) received by PID 4301\n"
    )
    assert read(tmp_path, log).cause == "collective-timeout"


def test_older_cause_names_still_match():
    from pytest_runhealth.readers.rootcause import same_cause

    assert same_cause("nccl-timeout", "collective-timeout") and same_cause("cuda-oom", "gpu-oom")
    assert same_cause("cuda-oom", "cuda-oom") and not same_cause("collective-timeout", "nccl-timeout")
    assert not same_cause("host-oom", "gpu-oom")


def test_another_indexerror_is_not_the_adafactor_scheduler(tmp_path):
    """Near miss: an IndexError from another source line is no scheduler mistake (``unknown``, its line quoted); nor
    is the scheduler's code line quoted in a frame above another exception."""
    other = (
        'Traceback (most recent call last):\n  File "train.py", line 12, in main\n    x = batch[3]\n'
        "IndexError: list index out of range\n"
    )
    assert read(tmp_path, other).cause == "unknown"
    above = (
        'Traceback (most recent call last):\n  File "train_util.py", line 3747, in get_scheduler_fix\n'
        '    initial_lr = float(name.split(":")[1])\n  File "x.py", line 1, in f\n    g()\n'
        "KeyError: 'step'\n"
    )
    assert read(tmp_path, above).cause == "unknown"
