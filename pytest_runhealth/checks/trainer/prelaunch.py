"""RH209–RH211: may I launch? Checks of a trainer workspace's config.yaml
made before the trainer starts (the launch-and-monitor runbook's "Pre-Launch
Checks" and "Do Not"), so a bad path or an about-to-be-overwritten run is
caught in a second instead of after the model has loaded for ten minutes."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...model.registry import check
from ...readers.rundir import LTX_CKPT
from ...readers.workspace import WorkspaceConfig
from ...safety import reading
from ...safety.shown import one_line

# The keys that make a config.yaml an LTX-2 trainer config (Lightricks/LTX-2
# packages/ltx-trainer/src/ltx_trainer/config.py).
LTX_SECTIONS = ("model", "data", "training_strategy", "optimization", "checkpoints")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# Validation conditions name their media files with these keys (configuration-reference.md).
VALIDATION_MEDIA_KEYS = ("image_or_video", "video", "audio", "mask", "image")


def workspace_config(ctx) -> WorkspaceConfig:
    """The run dir's config.yaml when it is an LTX-2 trainer config; skips otherwise."""
    cfg = ctx.run_dir.workspace_config()
    if cfg is None:
        ctx.skip(f"no config.yaml in {ctx.run_dir.path}")
    if cfg.error is None and not any(cfg.has(key) for key in LTX_SECTIONS):
        ctx.skip(f"{ctx.run_dir.rel(cfg.path)} is not an LTX-2 trainer config (none of {', '.join(LTX_SECTIONS)})")
    return cfg


def config_evidence(ctx, cfg: WorkspaceConfig, dotted: str):
    line = cfg.line_of(dotted)
    return ctx.evidence(cfg.path, line, cfg.source_line(line) or f"{dotted}: (not set)")


# -- RH209 ----------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigPath:
    """One path the trainer will open, with the key it came from."""

    key: str
    what: str
    value: Any
    base: Path | None = None  # folder a bare name resolves against (dataset subfolders)
    required: bool = False


def dataset_folders(cfg: WorkspaceConfig, root: Path) -> Iterator[ConfigPath]:
    """Folders under ``data.preprocessed_data_root`` that the strategy reads
    (``get_data_sources`` of the flexible and legacy strategies)."""
    strategy = cfg.get("training_strategy") or {}
    if not isinstance(strategy, dict):
        strategy = {}
    name = strategy.get("name", "text_to_video")
    yield ConfigPath("data.preprocessed_data_root", "text-embedding folder", "conditions", root)
    if name == "flexible":
        for modality in ("video", "audio"):
            conf = strategy.get(modality)
            if not isinstance(conf, dict):
                continue
            key = f"training_strategy.{modality}"
            if conf.get("latents_dir"):
                kind = "generated" if conf.get("is_generated") else "conditioning"
                yield ConfigPath(
                    f"{key}.latents_dir", f"{modality} latents ({kind} modality)", conf["latents_dir"], root
                )
            for i, cond in enumerate(conf.get("conditions") or []):
                if not isinstance(cond, dict):
                    continue
                if cond.get("type") == "reference":
                    yield ConfigPath(
                        f"{key}.conditions.{i}.latents_dir",
                        f"{modality} reference latents",
                        cond.get("latents_dir"),
                        root,
                        required=True,
                    )
                elif cond.get("type") == "mask":
                    yield ConfigPath(
                        f"{key}.conditions.{i}.mask_dir", f"{modality} masks", cond.get("mask_dir"), root, required=True
                    )
        return
    yield ConfigPath("data.preprocessed_data_root", "video latents", "latents", root)
    if name == "text_to_video" and strategy.get("with_audio"):
        yield ConfigPath(
            "training_strategy.audio_latents_dir",
            "audio latents",
            strategy.get("audio_latents_dir", "audio_latents"),
            root,
        )
    if name == "video_to_video":
        yield ConfigPath(
            "training_strategy.reference_latents_dir",
            "reference latents",
            strategy.get("reference_latents_dir", "reference_latents"),
            root,
            required=True,
        )
    legacy = cfg.get("conditioning") or {}
    if isinstance(legacy, dict) and legacy.get("mode") == "reference_video":
        yield ConfigPath(
            "conditioning.reference_latents_dir",
            "reference latents",
            legacy.get("reference_latents_dir", "reference_latents"),
            root,
            required=True,
        )


def validation_media(cfg: WorkspaceConfig) -> Iterator[ConfigPath]:
    for i, sample in enumerate(_as_list(cfg.get("validation.samples"))):
        if not isinstance(sample, dict):
            continue
        for j, cond in enumerate(_as_list(sample.get("conditions"))):
            if not isinstance(cond, dict):
                continue
            for key in VALIDATION_MEDIA_KEYS:
                if isinstance(cond.get(key), str):
                    kind = cond.get("type", "validation")
                    yield ConfigPath(
                        f"validation.samples.{i}.conditions.{j}.{key}", f"validation {kind} {key}", cond[key]
                    )
    for key, what in (
        ("validation.images", "validation image"),
        ("validation.reference_videos", "validation reference video"),
    ):
        for i, value in enumerate(_as_list(cfg.get(key))):
            yield ConfigPath(f"{key}.{i}", what, value)
    for i, group in enumerate(_as_list(cfg.get("validation.keyframe_images"))):
        for j, value in enumerate(_as_list(group)):
            yield ConfigPath(f"validation.keyframe_images.{i}.{j}", "validation keyframe image", value)


def config_paths(cfg: WorkspaceConfig) -> Iterator[ConfigPath]:
    yield ConfigPath("model.model_path", "model checkpoint", cfg.get("model.model_path"), required=True)
    for key, what in (
        ("model.text_encoder_path", "text encoder"),
        ("model.video_vae_path", "video VAE"),
        ("model.audio_vae_path", "audio VAE"),
    ):
        if cfg.get(key) is not None:
            yield ConfigPath(key, what, cfg.get(key))
    root_value = cfg.get("data.preprocessed_data_root")
    yield ConfigPath("data.preprocessed_data_root", "preprocessed dataset", root_value, required=True)
    if isinstance(root_value, str) and root_value and not _URL.match(root_value):
        root = cfg.resolve_path(root_value)
        if root.is_dir():
            yield from dataset_folders(cfg, root)
    yield from validation_media(cfg)


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def path_problem(cfg: WorkspaceConfig, item: ConfigPath) -> tuple[str, bool] | None:
    """Why the trainer could not open this path (None when it can), and
    whether a relative path was resolved against the config's folder."""
    value = item.value
    if value is None or value == "":
        return (f"{item.key} ({item.what}) is not set", False) if item.required else None
    if not isinstance(value, (str, os.PathLike)):
        return f"{item.key} ({item.what}) is {type(value).__name__} {value!r}, not a path", False
    text = os.fspath(value)
    shown = one_line(text)  # a YAML string may hold a newline: it starts no line of the message
    if _URL.match(text):
        return (
            f'{item.key} ({item.what}) is a URL ({shown}); the trainer needs a local path ("Model path cannot be a URL")',
            False,
        )
    path = Path(text).expanduser()
    relative = not path.is_absolute()
    resolved = (item.base / path) if item.base is not None else cfg.resolve_path(text)
    try:
        found = resolved.exists()
    except OSError as exc:  # a name too long, a folder we may not list: the trainer could not open it either
        return f"{item.key} ({item.what}) {shown[:200]} cannot be looked up: {exc.strerror or exc}", False
    if found:
        return None if not relative or item.base is not None else ("", True)
    where = f" (looked in {one_line(str(resolved))})" if relative else ""
    return f"{item.key} ({item.what}) {shown} does not exist{where}", False


def frames_problems(cfg: WorkspaceConfig, temporal: int, spatial: int) -> Iterator[tuple[str, str]]:
    """(key, message) for each ``video_dims`` [width, height, frames] that the
    VAE cannot encode: frames must be ``1 + k*T``, sides multiples of ``spatial``."""
    dims = [("validation.video_dims", cfg.get("validation.video_dims"))]
    dims += [
        (f"validation.samples.{i}.video_dims", s.get("video_dims"))
        for i, s in enumerate(_as_list(cfg.get("validation.samples")))
        if isinstance(s, dict)
    ]
    for key, value in dims:
        if value is None:
            continue
        if not (
            isinstance(value, (list, tuple))
            and len(value) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            yield key, f"{key} is {value!r}; expected [width, height, frames] as integers"
            continue
        width, height, frames = value
        if frames < 1 or (frames - 1) % temporal:
            lower = max(1, frames - (frames - 1) % temporal) if frames >= 1 else 1
            yield (
                key,
                (
                    f"{key} frames = {frames} breaks the VAE rule (frames - 1) % {temporal} == 0 "
                    f"(nearest valid: {lower} or {lower + temporal})"
                ),
            )
        for side, size in (("width", width), ("height", height)):
            if size < 1 or size % spatial:
                yield key, f"{key} {side} = {size} is not a multiple of the VAE spatial factor {spatial}"


@check(
    "RH209",
    "config-self-check",
    needs=["config"],
    scope="session",
    phases=["prelaunch"],
    verdicts=["config"],
    thresholds={"vae_temporal_factor": 8, "vae_spatial_factor": 32},
    detects="Before launch, config.yaml names a model, text encoder, VAE, dataset root, latents folder, "
    "reference-latents or mask folder, or validation media file that does not exist (relative paths resolve "
    "against the config's folder; dataset folders against data.preprocessed_data_root), or names a URL where "
    "the trainer needs a local path; or a validation video_dims breaks the VAE rule (frames - 1) % T == 0 "
    "(T, the VAE temporal factor, 8 by default) or has a side that is not a multiple of 32; or a conditional "
    "mode (reference, mask, video_to_video) lacks its folder.",
    why='The trainer checks these one at a time, after loading for minutes ("Model path does not exist", a '
    "missing latents folder at the first batch, a frames error at the first validation pass); this reads them "
    "all in a second, before the GPU is taken.",
    example="config.yaml:3   text_encoder_path: models/gemma-3-12b-it  (does not exist, looked in "
    "/ws/models/gemma-3-12b-it); config.yaml:41 video_dims: [960, 544, 96] (frames - 1) % 8 = 7",
    fix="Point each named key at a path that exists (absolute paths are safest: the trainer resolves relative "
    "ones against its own working directory), run process_dataset.py for a missing latents/mask folder, and use "
    "a frame count of 1 + 8k (e.g. 89 or 97).",
    fails_on={"workspace-missing-encoder": "config-path-missing"},
    passes_on=["workspace-ready", "workspace-resume", "workspace-reused-output"],
)
def config_self_check(ctx):
    cfg = workspace_config(ctx)
    if cfg.error:
        return ctx.fail(
            "config",
            None,
            f"{ctx.run_dir.rel(cfg.path)}: {cfg.error}",
            [ctx.evidence(cfg.path, None, cfg.error)],
            fix="fix config.yaml so the trainer can parse it.",
        )
    missing, relative = [], []
    for item in config_paths(cfg):
        problem = path_problem(cfg, item)
        if problem is None:
            continue
        message, is_relative = problem
        if is_relative:
            relative.append(item.key)
        else:
            missing.append((item.key, message))
    temporal = int(ctx.thresholds.get("vae_temporal_factor") or 8)
    spatial = int(ctx.thresholds.get("vae_spatial_factor") or 32)
    frames = list(frames_problems(cfg, temporal, spatial))
    if not missing and not frames:
        if relative:
            return (
                f"every path exists; {len(relative)} relative path(s) ({', '.join(relative)}) were resolved "
                f"against {ctx.run_dir.rel(cfg.path.parent) or '.'}: the trainer resolves them against its "
                "working directory, so launch from there or make them absolute"
            )
        return "every path in config.yaml exists and video_dims satisfy the VAE rule"
    lines = [message for _, message in missing] + [message for _, message in frames]
    summary = f"config.yaml would not launch cleanly: {len(lines)} problem(s)\n" + "\n".join(lines)
    evidence = [config_evidence(ctx, cfg, _nearest_key(cfg, key)) for key, _ in missing + frames]
    return ctx.fail("config", "config-path-missing" if missing else "frames-constraint", summary, evidence)


def _nearest_key(cfg: WorkspaceConfig, dotted: str) -> str:
    """The deepest key of ``dotted`` that the file spells (a dataset folder
    that comes from a default points at its strategy section)."""
    parts = dotted.split(".")
    while parts and cfg.line_of(".".join(parts)) is None:
        parts.pop()
    return ".".join(parts) or dotted


# -- RH210 ----------------------------------------------------------------------
def wandb_api_key(wandb: Any, timeout_s: float) -> tuple[bool, str]:
    """Does a W&B key resolve? The runbook's own probe, ``wandb.Api().api_key``:
    it reads the environment, settings and netrc, and needs no network when no
    query is made. Returns (resolved, what was seen), bounded by ``timeout_s``."""
    outcome: dict[str, Any] = {}

    def probe() -> None:
        try:
            outcome["key"] = wandb.Api().api_key
        except Exception as exc:  # UsageError "api_key not configured (no-tty)", …
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=probe, name="runhealth-wandb-probe", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TimeoutError(f"wandb.Api() did not return within {timeout_s:g} s")
    if "error" in outcome:
        return False, f"wandb.Api() raised {outcome['error']}"
    if outcome.get("key"):
        source = "WANDB_API_KEY" if os.environ.get("WANDB_API_KEY") else "wandb settings or netrc"
        return True, f"a key resolves (from {source})"
    return False, "wandb.Api().api_key is empty"


@check(
    "RH210",
    "tracker-credentials",
    needs=["config"],
    scope="session",
    phases=["prelaunch"],
    verdicts=["config"],
    thresholds={"timeout_s": 10.0},
    detects="Before launch, config.yaml enables W&B (wandb.enabled: true) but no W&B API key resolves, "
    "checked the way the runbook says: wandb.Api().api_key through the installed wandb library, never "
    "`wandb status` and no network call. Skipped with the reason when W&B is disabled in the config or by "
    "WANDB_MODE=disabled, or when wandb is not installed in the Python running pytest.",
    why="Without a key the trainer stops at wandb.init (or waits on a login prompt nobody sees in a background "
    "launch), after the model has loaded; the user may prefer to log in or to run without tracking.",
    example="config.yaml:52 enabled: true — wandb.Api().api_key is empty",
    fix="Run `wandb login` (or export WANDB_API_KEY) in the environment that launches the trainer, or set "
    "wandb.enabled: false to train without tracking.",
)
def tracker_credentials(ctx):
    cfg = workspace_config(ctx)
    if cfg.error:
        ctx.skip(f"config.yaml cannot be read ({cfg.error}); RH209 reports it")
    if cfg.get("wandb.enabled") is not True:
        ctx.skip("W&B is disabled in config.yaml (wandb.enabled is not true); no key is needed")
    mode = os.environ.get("WANDB_MODE", "").strip().lower()
    if mode in ("disabled", "dryrun"):
        ctx.skip(f"WANDB_MODE={mode} in this environment: W&B will not log, no key is needed")
    if mode == "offline":
        return "WANDB_MODE=offline: the run logs locally and needs no key until `wandb sync`"
    try:
        import wandb
    except ImportError as exc:
        ctx.skip(
            f"wandb is not installed in this Python ({exc}); run pytest in the trainer's environment "
            "(e.g. `uv run pytest …`) to check the W&B key"
        )
    try:
        resolved, seen = wandb_api_key(wandb, float(ctx.thresholds.get("timeout_s") or 10.0))
    except TimeoutError as exc:
        ctx.skip(f"{exc}; the W&B key could not be checked")
    version = getattr(wandb, "__version__", "?")
    if resolved:
        return f"W&B is enabled and {seen} (wandb {version})"
    return ctx.fail(
        "config",
        "tracker-credentials-missing",
        f"config.yaml enables W&B but no API key resolves ({seen}; wandb {version}): the trainer would stop "
        "at wandb.init or wait on a login prompt.",
        [config_evidence(ctx, cfg, "wandb.enabled"), ctx.evidence("wandb.Api()", None, seen)],
    )


# -- RH211 ----------------------------------------------------------------------
def saved_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of the trainer's weight files in ``folder``, oldest first;
    listed, never opened."""
    found = []
    try:
        entries = list(os.scandir(folder))
    except (OSError, ValueError):  # absent, unreadable, or a name the OS refuses
        return []
    for entry in entries:
        m = LTX_CKPT.match(entry.name)
        if m:
            found.append((int(m["step"]), Path(entry.path)))
    return sorted(found)


@check(
    "RH211",
    "output-dir-fresh",
    needs=["config"],
    scope="session",
    phases=["prelaunch"],
    verdicts=["config"],
    detects="Before launch, the output dir (config output_dir, default outputs/) already holds "
    "{lora|model}_weights_step_N.safetensors checkpoints and config.yaml neither resumes from them "
    "(model.load_checkpoint) nor says to start fresh (checkpoints.no_resume: true).",
    why="The trainer does not auto-resume from output_dir: a second launch starts at step 0, writes checkpoints "
    "with the same names over the first run's and prunes the rest (checkpoints.keep_last_n, default 1). "
    "Checkpoints belong to the user; the runbook forbids a second run into the same dir without approval.",
    example="outputs/checkpoints/lora_weights_step_02000.safetensors exists; config.yaml:5 load_checkpoint: null",
    fix="To continue: set model.load_checkpoint to the latest checkpoint (its training_state_step_N.pt beside "
    "it restores the step). To start over: point output_dir at a new folder, or set checkpoints.no_resume: true "
    "after copying the old checkpoints away. Ask the user before either.",
    fails_on={"workspace-reused-output": "output-dir-reused"},
    passes_on=["workspace-missing-encoder", "workspace-ready", "workspace-resume"],
)
def output_dir_fresh(ctx):
    cfg = workspace_config(ctx)
    if cfg.error:
        ctx.skip(f"config.yaml cannot be read ({cfg.error}); RH209 reports it")
    out_value = cfg.get("output_dir") or "outputs"
    if not isinstance(out_value, str):
        ctx.skip(f"output_dir is {out_value!r}, not a path; RH209 reports config problems")
    out = cfg.resolve_path(out_value)
    saved = saved_checkpoints(out / "checkpoints")
    shown = ctx.run_dir.rel(out)
    if not saved:
        return (
            f"{shown} holds no checkpoints: a fresh run" if out.is_dir() else f"{shown} does not exist yet: a fresh run"
        )
    latest_step, latest = saved[-1]
    load = cfg.get("model.load_checkpoint")
    if load:
        note = f"resumes from {load} ({len(saved)} checkpoint(s) in {shown}, latest step {latest_step})"
        target = LTX_CKPT.match(Path(str(load)).name)
        target_step = reading.integer(target["step"]) if target else None  # a YAML string's digits: any number
        if target_step is not None and target_step < latest_step:
            note += (
                f"; load_checkpoint is step {target_step}, older than the latest: later checkpoints "
                "will be overwritten as the run passes their steps"
            )
        return note
    if cfg.get("checkpoints.no_resume") is True:
        keep = cfg.get("checkpoints.keep_last_n", 1)
        return (
            f"starts fresh on purpose (checkpoints.no_resume: true) into {shown}, which holds {len(saved)} "
            f"checkpoint(s) up to step {latest_step}; keep_last_n={keep} will prune them as the new run saves"
        )
    keep = cfg.get("checkpoints.keep_last_n", 1)
    summary = (
        f"{ctx.run_dir.rel(out / 'checkpoints')} already holds {len(saved)} checkpoint(s), latest "
        f"{latest.name} (step {latest_step}), and config.yaml neither resumes from them "
        "(model.load_checkpoint) nor says to start fresh (checkpoints.no_resume): a launch would start at "
        f"step 0 and write over them (keep_last_n={keep} prunes the rest)."
    )
    evidence = [
        ctx.evidence(latest, None, f"{latest.name} (step {latest_step})"),
        config_evidence(ctx, cfg, _nearest_key(cfg, "model.load_checkpoint")),
    ]
    fix = (
        f"to continue the run, set model.load_checkpoint: {latest} ; to start over, point output_dir at a new "
        "folder or set checkpoints.no_resume: true after copying these checkpoints away. Ask the user first."
    )
    return ctx.fail("config", "output-dir-reused", summary, evidence, fix=fix)
