"""Print a command of the README's quick start, so CI runs exactly what a user is told to run.

The quick start is the block of indented lines under "## Quick start": the first sets up and checks a
shipped example, the second sets up the test extras and runs the test suite. ``--test`` prints the
second, ``--example`` the first; with no argument both are printed, one per line."""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def quick_start(text: str) -> list[str]:
    """The indented command lines of the README's "Quick start" section, in order."""
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ") and line.strip()]


def main(argv: list[str]) -> int:
    commands = quick_start(README.read_text(encoding="utf-8"))
    if len(commands) != 2:
        print(f"readme_commands: the quick start has {len(commands)} commands, not 2", file=sys.stderr)
        return 2
    picked = {"--example": commands[:1], "--test": commands[1:]}.get(argv[0] if argv else "", commands)
    print("\n".join(picked))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
