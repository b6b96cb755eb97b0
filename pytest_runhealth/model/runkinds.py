"""Run kinds a check pack declares: the files that make a folder a run of its
kind (docs/custom-checks.md, "A run kind of your own").

Why: a project's own runs (an evaluation that writes only ``evals.jsonl``)
are no layout the plugin knows, so ``pytest --run-dir`` found nothing there
to check (exit 4) although a check of the project's judged it under
``check_on``. A check declares its kind (``@runhealth.check(...,
run_kind=runhealth.run_kind("evals", files=["evals.jsonl"]))``) or a pack
adds one in its ``pytest_runhealth_register_checks`` hook
(``registry.add_run_kind(...)``); the registry holds them, and discovery
(``pytest --run-dir``, ``pytest-runhealth check`` and ``watch``, whose
sessions discover the same way) and ``testing.check_on`` ask it. A check
that declares a kind is skipped, with the reason, on a run dir of another
kind. A folder a built-in layout recognises keeps its built-in kind."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


def builtin_kinds() -> frozenset[str]:
    """The built-in kinds (discovery.KINDS, and what a folder classifies as on the way): a pack may not take
    them. Asked at declaration only: a conftest that declares a check does not pay for the layouts' readers."""
    from ..readers import layouts

    return frozenset({"trainer", "kohya", "sweep", "harvest", "round", "generic", "unrecognised", *layouts.KINDS})


class RunKindError(ValueError):
    """A run kind that cannot be declared; the registry turns it into a ``RegistryError``."""


@dataclass(frozen=True)
class RunKind:
    """``name``: the kind as discovery prints it (``--runhealth-list-runs``); ``files``: file-name patterns
    (``fnmatch``: ``evals.jsonl``, ``*.evals.jsonl``), each of which must name a file directly in the folder
    for it to be a run of this kind."""

    name: str
    files: tuple[str, ...]

    def matches(self, files: Iterable[str]) -> bool:
        names = list(files)
        return all(any(fnmatch.fnmatchcase(n, pattern) for n in names) for pattern in self.files)

    def describe(self) -> str:
        return f"{' with '.join(self.files)} (run kind {self.name})"

    def missing(self, folder: Path) -> str | None:
        """Why ``folder`` is no run of this kind (a check's skip reason), or None."""
        try:
            with os.scandir(folder) as it:
                names = [e.name for e in it if e.is_file(follow_symlinks=False)]
        except OSError:
            names = []
        return (
            None if self.matches(names) else f"{folder} is no run of kind {self.name} (no {' with '.join(self.files)})"
        )


def run_kind(name: str, files: Iterable[str]) -> RunKind:
    """Declare a run kind: ``run_kind("evals", files=["evals.jsonl"])``."""
    patterns = tuple(files) if not isinstance(files, str) else (files,)
    if not _NAME.match(name):
        raise RunKindError(f"run kind {name!r}: a name is lower-case words joined by '-'")
    if name in builtin_kinds():
        raise RunKindError(f"run kind {name!r} is a built-in kind; name yours differently")
    if not patterns or any(not p or "/" in p or os.sep in p for p in patterns):
        raise RunKindError(f"run kind {name!r}: files= names one or more files of the run's own folder, not paths")
    return RunKind(name, patterns)
