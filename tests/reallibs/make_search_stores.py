"""Rebuild the search stores under tests/reallibs/stores/ from the real libraries (issue 45):
``python tests/reallibs/make_search_stores.py`` with the ``[reallibs]`` extra installed. ``optuna.db`` is a real
Optuna SQLite storage holding the studies of ``search_objectives.OPTUNA_STUDIES`` (healthy, fails, pruned,
collapse). ``ray-search/`` is the folder a real Ray Tune experiment (``search_objectives.RAY_CASES`` on a local
Ray of 2 CPUs) left, made portable: every pickle removed (``*.pkl``; the state file's pickled values, hex text
that starts ``8005``, blanked: nothing here ever loads one), the build folder written as ``.``, the virtual
environment as ``/opt/venv``. Small by design: a few trials each."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import search_objectives  # noqa: E402

STORES = HERE / "stores"


def make_optuna(dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "optuna.db"
        search_objectives.run_optuna_studies(f"sqlite:///{db}")
        import sqlite3

        con = sqlite3.connect(db)
        con.execute("PRAGMA page_size = 512")  # ~40 tables and indexes of a page each: the smallest pages
        con.execute("VACUUM")  # the smallest file that holds the same rows (under the repository's binary cap)
        con.close()
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(db.read_bytes())


PICKLED = re.compile(r"^8005[0-9a-f]*$")  # a pickle (protocol 5) as Ray writes one into JSON: hex text


def _unpickled(value):
    """``value`` with every pickled string blanked, whatever it is nested in."""
    if isinstance(value, str):
        if PICKLED.match(value):
            return ""
        if value.lstrip().startswith("{"):  # a trial's state: JSON text inside the JSON
            try:
                return json.dumps(_unpickled(json.loads(value)), indent=2)
            except ValueError:
                return value
        return value
    if isinstance(value, list):
        return [_unpickled(v) for v in value]
    if isinstance(value, dict):
        return {k: _unpickled(v) for k, v in value.items()}
    return value


def portable_experiment(folder: Path, build: Path) -> None:
    for p in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if p.suffix == ".pkl" or p.name.startswith(".validate"):
            p.unlink()
            continue
        if not p.is_file() or p.suffix not in (".json", ".txt", ".csv"):
            continue
        try:
            text = p.read_text()
        except UnicodeDecodeError:  # Ray's search-algorithm state (basic-variant-state-*.json) is a pickle
            p.unlink()
            continue
        for old, new in (
            (str(build.resolve()), "."),
            (str(build), "."),
            (str(HERE.resolve()), "."),
            (sys.prefix, "/opt/venv"),
        ):
            text = text.replace(old, new)
        if p.name.startswith(("experiment_state-", "basic-variant-state-")):
            text = json.dumps(_unpickled(json.loads(text)), indent=2)
        p.write_text(text)


def make_ray(dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        search_objectives.run_ray_tune(tmp, "ray-search")
        portable_experiment(Path(tmp) / "ray-search", Path(tmp))
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(Path(tmp) / "ray-search", dest)


def main(only: list[str]) -> None:
    if not only or "optuna" in only:
        make_optuna(STORES / "optuna.db")
        print(f"wrote {STORES / 'optuna.db'}")
    if not only or "ray" in only:
        make_ray(STORES / "ray-search")
        print(f"wrote {STORES / 'ray-search'}")


if __name__ == "__main__":
    main(sys.argv[1:])
