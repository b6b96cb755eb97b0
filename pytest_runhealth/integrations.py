"""Trainer callbacks: the run-health checks from inside training, at each save and at the end
(docs/python-api.md, "Trainer callbacks").

``HFRunHealthCallback`` is a Hugging Face ``transformers.TrainerCallback``, ``LightningRunHealthCallback`` a
Lightning ``Callback``. Each judges the run's own folder through the Python API (``api.check``, the session
``pytest-runhealth check`` runs): at a save, the checks that judge a run in progress (``-m live``: a NaN loss,
RH202, is one), at the end of training every check. The JSON report is written beside the run, never inside it
(``<run>.runhealth.json`` next to the folder), each root cause is logged as a warning with its diagnosis, and
``stop_on_failure=True`` asks the trainer to stop at the first one. Only the main process judges.

The libraries are optional: the classes are made when first asked for (PEP 562), subclassing the library's
own base class, and a missing library is an ``ImportError`` that says which to install
(``pip install 'pytest-runhealth[hf]'`` or ``[lightning]``)."""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

from .api import Report, check

# HFRunHealthCallback and LightningRunHealthCallback are made on first access (module __getattr__ below).
__all__ = ["RunHealthJudge", "report_beside"]

log = logging.getLogger("pytest_runhealth")
REPORT_SUFFIX = ".runhealth.json"


def report_beside(run_dir: Path) -> Path:
    """``out/`` -> ``out.runhealth.json`` beside it: a run dir is never written into (docs/robustness.md)."""
    run_dir = Path(run_dir).absolute()
    return run_dir.parent / f"{run_dir.name}{REPORT_SUFFIX}"


class RunHealthJudge:
    """What both callbacks do: judge a run dir, write the report beside it, say the roots.

    ``run_dir``: the folder to judge (default: the trainer's output dir, or Lightning's log dir);
    ``report``: write the JSON report beside the run (default True); ``stop_on_failure``: ask the trainer to
    stop when a check fails; ``options``: the Python API's (``depth=``, ``config=``, ``select=``, ...)."""

    def __init__(
        self,
        run_dir: str | Path | None = None,
        *,
        report: bool = True,
        stop_on_failure: bool = False,
        **options: Any,
    ) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.write_report = report
        self.stop_on_failure = stop_on_failure
        self.options = options
        self.reports: list[Report] = []  # every report, in order

    @property
    def last(self) -> Report | None:
        return self.reports[-1] if self.reports else None

    def judge(self, run_dir: Path, final: bool) -> Report:
        """At a save (``final=False``) the checks of a run in progress; at the end, every check."""
        options = dict(self.options)
        if not final:
            options.setdefault("markers", "live")
        if self.write_report:
            options.setdefault("report", report_beside(run_dir))
        report = check(self.run_dir or run_dir, **options)
        self.reports.append(report)
        for root in report.roots:
            log.warning("run-health: %s", root.render())
        if final and report.ok:
            log.info("run-health: no check failed (%s)", report.summary)
        return report

    def should_stop(self, report: Report) -> bool:
        return self.stop_on_failure and bool(report.roots)

    def judge_at(self, run_dir: Path, final: bool) -> bool:
        """What a callback does at a save or at the end, in either framework (on the main process only):
        judge, and say whether to ask the trainer to stop (never at the end: it is stopping)."""
        return self.should_stop(self.judge(run_dir, final)) and not final


def _hf_class() -> type:
    try:
        from transformers import TrainerCallback
    except ImportError as exc:
        raise ImportError(
            f"HFRunHealthCallback needs transformers ({exc}): pip install 'pytest-runhealth[hf]'"
        ) from None

    class HFRunHealthCallback(TrainerCallback, RunHealthJudge):  # type: ignore[misc, valid-type]
        """Judges ``args.output_dir`` (or ``run_dir``) at each save and at the end of training."""

        def __init__(self, run_dir: str | Path | None = None, **kwargs: Any) -> None:
            RunHealthJudge.__init__(self, run_dir, **kwargs)

        def _judge(self, args: Any, state: Any, control: Any, final: bool) -> Any:
            if getattr(state, "is_world_process_zero", True) and self.judge_at(Path(args.output_dir), final):
                control.should_training_stop = True
            return control

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            return self._judge(args, state, control, final=False)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            return self._judge(args, state, control, final=True)

    return HFRunHealthCallback


def _lightning_class() -> type:
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        try:
            from pytorch_lightning.callbacks import Callback
        except ImportError as exc:
            raise ImportError(
                f"LightningRunHealthCallback needs lightning ({exc}): pip install 'pytest-runhealth[lightning]'"
            ) from None

    class LightningRunHealthCallback(Callback, RunHealthJudge):  # type: ignore[misc, valid-type]
        """Judges the trainer's log dir (``lightning_logs/version_N``, or ``run_dir``) at each checkpoint
        save and at the end of training."""

        def __init__(self, run_dir: str | Path | None = None, **kwargs: Any) -> None:
            Callback.__init__(self)
            RunHealthJudge.__init__(self, run_dir, **kwargs)

        def _judge(self, trainer: Any, final: bool) -> None:
            main = getattr(trainer, "is_global_zero", True)  # the log dir is asked for on the main process only
            if main and self.judge_at(Path(trainer.log_dir or trainer.default_root_dir), final):
                trainer.should_stop = True

        def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
            self._judge(trainer, final=False)

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self._judge(trainer, final=True)

    return LightningRunHealthCallback


# Each class is made once, on first use (its framework is imported then), and is the same object
# ever after (``isinstance`` holds): a memoised maker, a constant made late, not state a session changes.
_MAKERS = {
    "HFRunHealthCallback": functools.cache(_hf_class),
    "LightningRunHealthCallback": functools.cache(_lightning_class),
}


def __getattr__(name: str) -> Any:
    maker = _MAKERS.get(name)
    if maker is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return maker()
