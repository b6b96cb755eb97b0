"""The objectives of the real searches behind tests/reallibs/stores/ (issue 45): Optuna studies in a SQLite
storage and Ray Tune trainables, each a small stand-in for a training run that reports one value per step.
``make_search_stores.py`` runs them to build the committed stores; the slow tier runs them again and judges what
they leave. Kept apart from both so the two run the very same searches."""

from __future__ import annotations

import os
import re
import time
import traceback

STEPS = 20  # a healthy trial's steps
STEP_S = 0.01  # a healthy step
SLOW_STEP_S = 1.2  # a step with the knob that collapses (offload_optimizer=True)
WALL_S = 3.0  # the collapse study's wall clock per trial (a healthy trial needs ~1 s)


def _record_failure(trial) -> None:
    """Optuna 3+ keeps no exception in the storage (only its log shows it): the objective records it as the
    trial's ``fail_reason`` user attribute, the pattern docs/optuna.md describes."""
    text = re.sub(r'File "[^"]*[/\\\\]', 'File "', traceback.format_exc())  # no machine's folders in a store
    trial.set_user_attr("fail_reason", text[-4000:])


def healthy(trial) -> float:
    lr = trial.suggest_float("lr", 1e-4, 1e-2, log=True)
    batch = trial.suggest_categorical("batch_size", [8, 16])
    loss = 1.0
    for step in range(1, STEPS + 1):
        loss *= 0.9 + lr
        trial.report(loss, step)
        time.sleep(STEP_S)
    return loss + batch * 1e-4


def failing(trial) -> float:
    """The trials that sample optimizer=adamw8bit die before their first step, alike: CUDA out of memory."""
    optimizer = trial.suggest_categorical("optimizer", ["adafactor", "adamw8bit"])
    trial.suggest_float("lr", 1e-4, 1e-2, log=True)
    try:
        if optimizer == "adamw8bit":
            raise RuntimeError(
                "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; "
                "21.90 GiB already allocated; 1.02 GiB free)"
            )
        loss = 1.0
        for step in range(1, STEPS + 1):
            loss *= 0.9
            trial.report(loss, step)
            time.sleep(STEP_S)
        return loss
    except Exception:
        _record_failure(trial)
        raise


def pruned(trial) -> float:
    """A search with a median pruner: the trials whose loss falls behind are stopped early (the search working)."""
    import optuna

    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    loss = 1.0
    for step in range(1, STEPS + 1):
        loss *= 1.0 - lr
        trial.report(loss, step)
        time.sleep(STEP_S)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return loss


def collapsing(trial) -> float:
    """The first trials train all their steps; later ones sample offload_optimizer=True, whose steps are 100x
    slower, and hit the trial's wall clock after 3 steps (TimeoutError, recorded as the trial's failure)."""
    offload = trial.suggest_categorical("offload_optimizer", [False, True])
    trial.suggest_int("rank", 4, 16)
    trial.set_user_attr("wall_secs", WALL_S)
    trial.set_user_attr("planned_steps", STEPS)
    start = time.monotonic()
    loss = 1.0
    try:
        for step in range(1, STEPS + 1):
            if time.monotonic() - start >= WALL_S:
                raise TimeoutError(f"trial {trial.number} hit its wall clock of {WALL_S} s at step {step - 1}")
            time.sleep(SLOW_STEP_S if offload else STEP_S)
            loss *= 0.9
            trial.report(loss, step)
        return loss
    except Exception:
        _record_failure(trial)
        raise


# study name -> (objective, trials enqueued first (params), further sampled trials, pruner wanted)
OPTUNA_STUDIES = {
    "healthy": (healthy, [], 5, False),
    "fails": (
        failing,
        [{"optimizer": "adafactor"}, {"optimizer": "adamw8bit"}, {"optimizer": "adafactor"}]
        + [{"optimizer": "adamw8bit"}] * 2,
        0,
        False,
    ),
    "pruned": (pruned, [{"lr": 0.05}, {"lr": 0.04}, {"lr": 0.03}, {"lr": 0.0002}, {"lr": 0.0001}], 3, True),
    "collapse": (
        collapsing,
        [{"offload_optimizer": False, "rank": 8}, {"offload_optimizer": False, "rank": 4}]
        + [{"offload_optimizer": True, "rank": r} for r in (8, 12, 16)],
        0,
        False,
    ),
}


def run_optuna_studies(url: str) -> None:
    """Every study of OPTUNA_STUDIES into the storage at ``url``, one after the other, one worker each."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    for name, (objective, enqueued, sampled, prune) in OPTUNA_STUDIES.items():
        pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=3) if prune else None
        study = optuna.create_study(
            study_name=name, storage=url, sampler=optuna.samplers.RandomSampler(seed=7), pruner=pruner
        )
        for params in enqueued:
            study.enqueue_trial(params)
        study.optimize(objective, n_trials=len(enqueued) + sampled, catch=(Exception,))


# -- Ray Tune ---------------------------------------------------------------------------------------------------
# Each trial's case: two healthy trials, two whose offload_optimizer=True steps are slow enough to hit the trial's
# wall clock after 3 steps (the collapse), one that raises (a module missing), one that runs out of memory under
# an address-space limit (MemoryError).
RAY_CASES = ["healthy-a", "healthy-b", "slow-a", "slow-b", "raise", "oom"]
RAY_ITERATIONS = 10
RAY_WALL_S = 3.0


def _ray_report(metrics: dict) -> None:
    try:
        from ray.tune import report
    except ImportError:  # pragma: no cover - Ray before 2.41
        from ray.train import report
    report(metrics)


def ray_trainable(config: dict) -> None:
    import resource

    case = config["case"]
    start = time.monotonic()
    loss = 1.0
    for step in range(1, RAY_ITERATIONS + 1):
        if case == "raise" and step == 2:
            raise ModuleNotFoundError("No module named 'flash_attn'")
        if case == "oom" and step == 2:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            with open("/proc/self/statm") as fh:
                size = int(fh.read().split()[0]) * resource.getpagesize()
            resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 20), hard))
            try:
                block = bytearray(4 << 30)  # 4 GiB under a limit of what is mapped + 256 MiB: MemoryError
                del block
            finally:
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        if time.monotonic() - start >= RAY_WALL_S:
            raise TimeoutError(f"trial hit its wall clock of {RAY_WALL_S} s at step {step - 1}")
        time.sleep(SLOW_STEP_S if config["offload_optimizer"] else STEP_S)
        loss *= 1.0 - config["lr"]
        _ray_report({"loss": loss, "wall_secs": RAY_WALL_S, "planned_steps": RAY_ITERATIONS})


def run_ray_tune(storage: str, name: str = "search") -> None:
    """The experiment of RAY_CASES under ``storage``/``name``, on a local Ray of 2 CPUs, no trial retried."""
    import ray
    from ray import tune

    run_config_class = getattr(tune, "RunConfig", None)
    failure_class = getattr(tune, "FailureConfig", None)
    if run_config_class is None:  # pragma: no cover - older Ray
        from ray.train import FailureConfig as failure_class
        from ray.train import RunConfig as run_config_class
    here = os.path.dirname(os.path.abspath(__file__))  # the workers import this module as the driver does
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": here}},
    )
    try:
        tuner = tune.Tuner(
            ray_trainable,
            param_space={
                "case": tune.grid_search(RAY_CASES),
                "offload_optimizer": tune.sample_from(lambda spec: spec.config.case.startswith("slow")),
                "lr": tune.sample_from(lambda spec: 0.01 if spec.config.case.endswith("b") else 0.02),
            },
            tune_config=tune.TuneConfig(max_concurrent_trials=2),
            run_config=run_config_class(
                storage_path=storage, name=name, failure_config=failure_class(max_failures=0), verbose=0
            ),
        )
        tuner.fit()
    finally:
        ray.shutdown()
