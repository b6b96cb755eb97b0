"""The hook that turns ``--optuna-storage URL`` (``--optuna-study NAME``, repeatable) into run dirs: one sweep per
study (docs/optuna.md). A storage that cannot be read is a usage error (exit 4) naming its URL without the
password. Ray Tune experiments need no option: discovery finds them under ``--run-dir``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..readers.rundir import RunDir


def pytest_runhealth_targets(config: pytest.Config, settings) -> list[RunDir]:
    url = config.getoption("runhealth_optuna_storage", None) or config.getini("runhealth_optuna_storage") or ""
    wanted = list(config.getoption("runhealth_optuna_studies", None) or config.getini("runhealth_optuna_studies"))
    if not url:
        if wanted:
            raise pytest.UsageError("--optuna-study needs --optuna-storage URL (or ini runhealth_optuna_storage)")
        return []
    from ..readers.optuna_study import OptunaStudy, StorageError, open_storage, shown_url

    base = None if config.getoption("runhealth_optuna_storage", None) else Path(str(config.inipath or ".")).parent
    try:
        storage = open_storage(url, base)
        names = storage.study_names()
    except StorageError as exc:
        raise pytest.UsageError(f"--optuna-storage {exc}") from None
    missing = [n for n in wanted if n not in names]
    if missing:
        raise pytest.UsageError(
            f"--optuna-storage {shown_url(url)}: no study named {', '.join(repr(n) for n in missing)} "
            f"(it holds {', '.join(repr(n) for n in names[:20]) or 'no study'})"
        )
    if not names:
        raise pytest.UsageError(f"--optuna-storage {shown_url(url)}: holds no study (nothing to check)")
    out = []
    for name in wanted or names:
        store = OptunaStudy(storage, name)
        out.append(RunDir(store.where.parent, store.where.name, store=store))  # core hands it the session's sizes
    return out
