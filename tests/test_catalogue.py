"""The catalogue documents itself and tests itself: every built-in check has
its four sections, a failing and a passing example under examples/, and
docs/checks.md is what ``--runhealth-list=markdown`` prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO, regenerate

from pytest_runhealth.checks import builtin_registry
from pytest_runhealth.plugins.catalogue import render_catalogue

DOCS = REPO / "docs" / "checks.md"

# Built-in checks that still lack a failing or a passing example: a visible,
# shrinking list. A check that gains its examples must leave it.
KNOWN_GAPS: dict[str, str] = {
    "RH003": "no failing example dir (needs a live pid beside a stale log)",
    "RH109": "live: needs the orchestrator's /api/session",
    "RH301": "live: needs a GPU (NVML)",
    "RH302": "live: needs a GPU (NVML)",
    "RH401": "live: needs an LM Studio server",
    "RH403": "live: needs the lms CLI on PATH",
    "RH404": "live: needs an LM Studio server",
    "RH406": "no example dir",
    "RH210": "needs the wandb library, which is not a dependency; tests/test_prelaunch.py drives it through a stand-in wandb",
}


BUILTINS = list(builtin_registry())


def expectations() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """check ID -> example names it must fail on / pass on, as the check declares them (``fails_on``,
    ``passes_on``; regenerate.declared_examples, which the family pages list)."""
    fails, passes = regenerate.declared_examples(BUILTINS)
    return {k: v for k, v in fails.items() if v}, {k: v for k, v in passes.items() if v}


def gaps_of(spec, fails, passes) -> list[str]:
    missing = [f"section '{title}'" for title, text in spec.doc_sections().items() if not text.strip()]
    if spec.id not in fails:
        missing.append('a failing example (`@check(..., fails_on={"<example>": "<cause>"})`)')
    if spec.id not in passes:
        missing.append('a near miss it passes on (`@check(..., passes_on=["<example>"])`)')
    return missing


@pytest.mark.parametrize("spec", BUILTINS, ids=[s.id for s in BUILTINS])
def test_builtin_check_is_documented_with_examples(spec):
    fails, passes = expectations()
    missing = gaps_of(spec, fails, passes)
    if spec.id in KNOWN_GAPS:
        if not missing:
            pytest.fail(f"{spec.id} now has its docs and examples: remove it from KNOWN_GAPS", pytrace=False)
        pytest.xfail(f"known gap: {spec.id} lacks " + "; ".join(missing))
    assert not missing, f"{spec.id} {spec.slug} ({spec.owner}) lacks " + "; ".join(missing)


# A sentence ends at a full stop, "!" or "?" before a capital, a backtick, a bracket or a quote; "e.g." and
# "i.e." end none. The detail of a check lives in its family page (issue 37), above the generated list.
SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)[.!?](?=\s+[A-Z`(\"'])")


def sentences(text: str) -> int:
    return len(SENTENCE_END.findall(" ".join(text.split()))) + 1


@pytest.mark.parametrize("spec", BUILTINS, ids=[s.id for s in BUILTINS])
def test_builtin_detects_is_at_most_two_sentences(spec):
    assert sentences(spec.detects) <= 2, (
        f"{spec.id}'s detects has {sentences(spec.detects)} sentences: keep two there and move the detail "
        "to its family page (docs/sweeps.md, trainer-runs.md, evaluation.md or live-probes.md)"
    )


def test_sentences_are_counted_as_a_reader_counts_them():
    assert sentences("One thing, e.g. `a`. Then another (i.e. b). And a third.") == 3
    assert sentences("Steps <= 0.1 s/it are noise: 29 -> 44 s/it. Done") == 2


def test_every_builtin_lacking_docs_or_examples_is_named():
    """One list of every gap, so a reviewer sees them all at once."""
    fails, passes = expectations()
    gaps = {s.id: gaps_of(s, fails, passes) for s in BUILTINS}
    unlisted = {k: v for k, v in gaps.items() if v and k not in KNOWN_GAPS}
    assert not unlisted, "built-in checks lacking docs or examples:\n" + "\n".join(
        f"  {k}: {'; '.join(v)}" for k, v in sorted(unlisted.items())
    )
    assert set(KNOWN_GAPS) <= {s.id for s in BUILTINS}, "KNOWN_GAPS names checks that do not exist"


def test_examples_name_only_known_checks():
    fails, passes = expectations()
    known = {s.id for s in BUILTINS}
    strays = sorted((set(fails) | set(passes)) - known)
    assert not strays, f"declarations name unknown checks: {strays}"


def test_the_family_pages_list_their_checks_from_the_registry():
    for page, text in regenerate.family_pages().items():
        rel = str(page.relative_to(REPO))
        assert page.read_text(encoding="utf-8") == text, regenerate.out_of_date_message(rel)
    titles = {page: page.read_text(encoding="utf-8").split("\n", 1)[0] for page in regenerate.FAMILY_PAGES}
    homeless = [s.id for s in BUILTINS if regenerate.page_of(s.id, titles) is None]
    assert homeless == [], f"no family page's title names these checks: {homeless}"


def test_docs_checks_md_is_in_sync():
    rendered = render_catalogue(builtin_registry(), "markdown")
    assert DOCS.is_file(), regenerate.out_of_date_message("docs/checks.md")
    assert DOCS.read_text(encoding="utf-8") == rendered, regenerate.out_of_date_message("docs/checks.md")


def test_list_markdown_prints_the_docs(pytester):
    res = pytester.runpytest("--runhealth-list=markdown")
    assert res.ret == 0
    assert res.stdout.str().rstrip("\n") == render_catalogue(builtin_registry(), "markdown").rstrip("\n")


def test_explain_prints_one_page(pytester):
    res = pytester.runpytest("--runhealth-explain", "RH001")
    assert res.ret == 0
    res.stdout.fnmatch_lines(
        [
            "RH001 ledger-readable",
            "*family: evidence*",
            "What it detects",
            "*ledger.jsonl*",
            "Why it matters",
            "Example evidence",
            "Fix",
            "Run it: pytest --run-dir=PATH -k RH001",
        ]
    )
    by_slug = pytester.runpytest("--runhealth-explain", "ledger-readable")
    assert by_slug.stdout.str() == res.stdout.str()


def test_explain_unknown_check_suggests_close_ones(pytester):
    res = pytester.runpytest("--runhealth-explain", "RH0001")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "no check 'RH0001'; did you mean RH001" in res.stderr.str()


def test_explain_and_list_include_conftest_checks_and_rules(pytester):
    pytester.makeini("[pytest]\n")
    pytester.makeconftest("""
        import pytest_runhealth as runhealth

        @runhealth.check("LOCAL101", "warmup-finished", detects="no 'warmup done' line", why="w",
                         example="logs/train.log:9 step 1", fix="set warmup_steps")
        def warmup(ctx):
            return None
    """)
    pytester.path.joinpath("runhealth.yaml").write_text(
        "rules:\n  - {id: TEAM101, slug: disk-full, literal: 'No space left on device', verdict: infra,"
        " why: 'checkpoints stop', fix: 'free disk'}\n"
    )
    listing = pytester.runpytest("--runhealth-list")
    listing.stdout.fnmatch_lines(["LOCAL101  warmup-finished*local*", "TEAM101  disk-full*team*"])
    page = pytester.runpytest("--runhealth-explain", "TEAM101")
    page.stdout.fnmatch_lines(
        [
            "TEAM101 disk-full",
            "*from: rules in *runhealth.yaml",
            "Why it matters",
            "  checkpoints stop",
            "Thresholds*",
            "  count: 1",
        ]
    )


def test_list_prints_catalogue(pytester):
    res = pytester.runpytest("-p", "no:anyio", "--runhealth-list")
    assert res.ret == 0
    res.stdout.fnmatch_lines(["RH001  ledger-readable*evidence*"])


def test_no_fix_points_into_another_projects_source():
    """A fix says what to do, not where in some other project's source tree to look (issue 47: RH103's fix named
    ``_pair_samples_with_prompts in bracket/orchestrator/scorer.py``): every fix text in the package (the
    checks' ``fix=``, the findings' ``fix=``, the causes' fixes) is free of paths two folders deep into a .py
    file. A command to run (``scripts/train.py``) is one folder deep and stays."""
    import ast
    import re

    import pytest_runhealth
    from pytest_runhealth.readers.causes import CAUSES

    source_path = re.compile(r"(?:[\w.-]+/){2,}[\w.-]+\.py\b")
    root = Path(pytest_runhealth.__file__).parent
    texts: list[tuple[str, str]] = [(f"cause {name}", c.fix) for name, c in CAUSES.items()]
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "fix":
                for const in ast.walk(node.value):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        texts.append((f"{path.relative_to(root)}:{node.value.lineno}", const.value))
    assert len(texts) > 50
    bad = [(where, hit) for where, text in texts for hit in source_path.findall(text)]
    assert bad == []
    assert source_path.findall("(_pair_samples_with_prompts in bracket/orchestrator/scorer.py)")  # the rule bites


def test_next_id_is_one_past_each_familys_highest():
    """``scripts/regenerate.py --next-id``, the step "choose the ID" of docs/writing-checks.md: a free ID,
    never a gap (a gap may be a retired ID), with the module the family's checks are in."""
    ids = {s.id for s in BUILTINS}
    lines = regenerate.next_ids()
    assert len(lines) == 6
    for line in lines:
        found = re.search(r"next free: (RH\d{3})\s+\w+\s+(\S+)", line)
        assert found, line
        next_id, module = found.groups()
        assert next_id not in ids and f"RH{int(next_id[2:]) - 1:03d}" in ids, line
        assert (REPO / module.rstrip(",")).is_file(), line
