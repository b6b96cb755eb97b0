"""The docs match the tool (issue 33): every relative link in README.md and docs/*.md reaches a file
or folder of this checkout, and every plugin option they name (``--runhealth-*``, ``--run-dir`` and the
service options) is one that ``pytest --help`` lists with the plugin installed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
OPTION = re.compile(r"(?<![\w-])--(?:runhealth-[a-z0-9-]+|run-dir|lmstudio-[a-z-]+|eval-[a-z-]+|orchestrator-[a-z-]+)")


def prose(page: Path) -> str:
    """The page without its fenced code blocks (code may hold brackets that are not links)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page)) if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", t)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_reaches_a_file_of_the_checkout(page):
    broken = []
    for target in relative_links(page):
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or not path.is_relative_to(REPO):
            broken.append(target)
    assert broken == [], (
        f"{page.relative_to(REPO)}: links to nothing in this checkout (relative to {page.parent.name}/)"
    )


def test_the_link_finder_sees_links_and_leaves_urls_and_anchors():
    assert LINK.findall("see [a](docs/a.md#x), [b](https://x.org) and [c](#here)") == [
        "docs/a.md#x",
        "https://x.org",
        "#here",
    ]


@pytest.fixture(scope="module")
def pytest_help(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("help")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_every_option_the_docs_name_is_one_pytest_help_lists(pytest_help):
    listed = set(OPTION.findall(pytest_help))
    assert {"--run-dir", "--runhealth-gate", "--runhealth-report"} <= listed
    missing = {}
    for page in PAGES:
        for name in set(OPTION.findall(page.read_text(encoding="utf-8"))) - listed:
            missing.setdefault(name, []).append(str(page.relative_to(REPO)))
    assert missing == {}, "options named in the docs that `pytest --help` does not list"
