"""Make generated examples free of the machine that wrote them (issue 33).

The real libraries write where they ran: wandb links ``logs/debug-core.log`` to
``~/.cache/wandb/logs/`` by an absolute path (dangling on any other machine) and
records the working directory, the interpreter and ``sys.path`` in its logs and
its binary ``run-<id>.wandb`` record; a traceback names the builder's own path.
:func:`scrub` removes every link that is absolute or leaves the example, and
rewrites the generating machine's absolute paths to neutral ``~/...`` ones.
``tests/test_repository.py`` enforces the result on what is committed.

The ``.wandb`` record is rewritten byte for byte like the text files, so its
record checksums no longer verify: the plugin reads only its name and time
(``layouts/wandb_run.py``: ``record_files``), never its content.

    python examples/_make/machine_free.py EXAMPLE_DIR... --replace OLD=NEW...

rewrites examples already written on another machine (the generator calls
:func:`scrub` itself, with :func:`this_machine`)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def this_machine() -> dict[str, str]:
    """The absolute prefixes of this machine that a library may write, most specific first."""
    prefixes = {
        str(REPO): "~/pytest-runhealth",
        sys.prefix: "~/venv",
        sys.base_prefix: "~/python",
        tempfile.gettempdir(): "~/tmp",
        str(Path.home()): "~",
    }
    return {old: new for old, new in prefixes.items() if old not in ("", "/")}


def _inside(link: Path, root: Path) -> bool:
    target = os.readlink(link)
    if os.path.isabs(target):
        return False
    resolved = (link.parent / target).resolve()
    return resolved.is_relative_to(root.resolve()) and resolved.exists()


def scrub(example: Path, replace: dict[str, str]) -> list[Path]:
    """Remove the links of ``example`` that are absolute, leave it or dangle, rewrite ``replace``'s
    prefixes (longest first) in every file; return what changed."""
    changed: list[Path] = []
    pairs = sorted(((o.encode(), n.encode()) for o, n in replace.items()), key=lambda p: -len(p[0]))
    for path in sorted(example.rglob("*")):
        if path.is_symlink():
            if not _inside(path, example):
                path.unlink()
                changed.append(path)
            continue
        if not path.is_file():
            continue
        data = path.read_bytes()
        new = data
        for old, repl in pairs:
            new = new.replace(old, repl)
        if new != data:
            path.write_bytes(new)
            changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("examples", nargs="+", type=Path)
    parser.add_argument("--replace", action="append", default=[], metavar="OLD=NEW")
    args = parser.parse_args(argv)
    replace = this_machine() | dict(pair.split("=", 1) for pair in args.replace)
    for example in args.examples:
        for path in scrub(example, replace):
            print(f"machine_free: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
