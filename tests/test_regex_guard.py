"""The rule-regex guard (regexsafe.py), proven on generated patterns (issue 48).

A planted ``runhealth.yaml`` rule with ``^(?:a{1,30}){1,30}$`` or ``^(?:aa?)+$`` got past the old guard and
held ``check`` until it was killed. Here every form that makes a backtracking matcher try exponentially many
ways -- a quantified part inside a quantified part (unbounded or bounded: ``+``, ``*``, ``{1,30}``, ``{2,}``,
``{3}``, lazy or not), an optional part beside its own kind inside a repeat, overlapping alternatives, two
neighbours whose border can move, a part that matches the empty string -- is generated over several
character classes and group spellings, and each must be refused with the rule error; its twin with a
separator the repeated part cannot hold must pass, as must the patterns of the docs and examples. Patterns
drawn from a small grammar that the guard accepts are run in the step model of ``re``
(tests/regex_steps.py): their work on adversarial text grows polynomially, never exponentially."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st
from regex_steps import StepBudget, Steps, _deep, model_spans

from pytest_runhealth.plugins.rules import RuleError, parse_rules
from pytest_runhealth.safety.regexsafe import backtracking_risk

ROOT = Path(__file__).resolve().parent.parent

ATOMS = ["a", "\\w", "[ab]", ".", "[^,]", "\\S", "(?:a|b)"]
INNER = ["+", "*", "{1,30}", "{1,}", "{2,5}", "+?", "{0,3}"]
OUTER = ["+", "*", "{1,30}", "{2,}", "{3}", "{2,9}", "+?", "{1,30}?", "*?"]
GROUPS = ["({})", "(?:{})", "(?P<g>{})", "((?:{}))", "(?i:{})"]
FRAMES = ["^{}$", "{}$", "^{}!", "{}b", "{}"]


def _dangerous_bodies(atom: str) -> list[str]:
    """Repeated parts that match one text in several ways, or divide it into repetitions in several ways."""
    bodies = [atom + inner for inner in INNER]  # a quantifier inside a quantifier
    bodies += [atom + atom + "?", atom + "?" + atom, atom + atom + "{0,2}"]  # an optional part beside its kind
    bodies += [atom + "|" + atom, atom + "|" + atom + atom, atom + "+" + atom + "+"]  # alternatives, neighbours
    bodies += [atom + "?", atom + "*" + atom + "*"]  # a part that matches the empty string
    return bodies


def _dangerous() -> list[str]:
    out = []
    for atom, outer, group, frame in itertools.product(ATOMS, OUTER, GROUPS, FRAMES):
        for body in _dangerous_bodies(atom):
            out.append(frame.format(group.format(body) + outer))
    return out


def _separated() -> list[str]:
    """The same nestings with a separator that the repeated part cannot hold: one way to divide a text."""
    out = []
    for atom, inner, outer, group in itertools.product(["a", "\\d", "[ab]", "\\w"], INNER, OUTER, GROUPS):
        out.append("^" + group.format(atom + inner + ",") + outer + "$")
    return out


DANGEROUS = _dangerous()
SEPARATED = _separated()


def test_the_generator_makes_thousands_of_distinct_patterns_that_re_compiles():
    assert len(set(DANGEROUS)) > 5000 and len(set(SEPARATED)) > 1000
    for pattern in DANGEROUS[::97] + SEPARATED[::41]:
        re.compile(pattern)


def test_every_generated_dangerous_pattern_is_refused():
    accepted = [p for p in DANGEROUS if backtracking_risk(p) is None]
    assert not accepted, f"{len(accepted)} accepted, e.g. {accepted[:10]}"


def test_every_generated_separated_twin_passes():
    refused = [(p, backtracking_risk(p)) for p in SEPARATED if backtracking_risk(p) is not None]
    assert not refused, f"{len(refused)} refused, e.g. {refused[:5]}"


@pytest.mark.parametrize(
    "pattern",
    ["^(?:a{1,30}){1,30}$", "^(?:aa?)+$", "(a{2,}){2,}", "(?:\\w{1,9}\\s?){1,20}$", "(?>(a+)+b)", "(a?){30}a{30}"],
)
def test_the_issues_bypasses_are_refused_as_a_rule_error(pattern):
    with pytest.raises(RuleError) as err:
        parse_rules([{"id": "EVIL101", "slug": "evil", "regex": pattern, "verdict": "infra"}])
    message = str(err.value)
    assert "rule EVIL101" in message and "field 'regex'" in message and "refused" in message
    assert "exponential time" in message


def _doc_rule_patterns() -> list[str]:
    """Every ``regex:`` of the shipped example configs and of the docs' YAML blocks."""
    found = []
    for path in [*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("docs/*.md")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            m = re.match(r"\s*(?:-\s*)?regex:\s*(.+?)\s*(?:#.*)?$", line)
            if m:
                found.append(yaml.safe_load(m.group(1)))
    return found


ORDINARY = [
    "Watchdog caught collective operation timeout",
    "grad_norm=([0-9.eE+-]+)",
    "(?:error|warn)+: \\d+",
    "(\\d+\\.){3}\\d+",
    "(?:\\d{1,3}\\.){3}\\d{1,3}",
    "CUDA out of memory.*Tried to allocate ([0-9.]+) GiB",
    "(?>a+)+$",
    "a++b",
    "(a|ab)+c",
    "(?:error|errors)+",
    "(\\S+\\s+){3}",
    "(?:[^,]*,)+x",
    "loss[=:]\\s*(nan|inf)",
    "^\\[rank(\\d+)\\]:",
    "step (\\d+)/(\\d+)",
    "(?:w0x|w1x|w10x|w11x)+",  # fixed words compared position by position: no two alike
    "(?:" + "|".join(f"job{i};" for i in range(150)) + ")+",
]


@pytest.mark.parametrize(
    "pattern", ["(?:ab|ab)+", "(?:w10x|w1[0-9]x)+", "(?:" + "|".join(f"k{i}" for i in range(201)) + ")+"]
)
def test_alternatives_that_may_match_the_same_word_under_a_repeat_are_refused(pattern):
    assert backtracking_risk(pattern) is not None


def test_a_pattern_too_long_to_judge_is_refused_and_judging_is_cheap():
    """A planted 1 MiB regex would take half a minute to judge: over 4,096 characters it is refused unread;
    at the limit, judging takes a fraction of a second (counted in characters, not timed)."""
    from pytest_runhealth.safety.regexsafe import MAX_PATTERN

    assert "over the 4,096" in backtracking_risk("a" * (MAX_PATTERN + 1))
    assert backtracking_risk("a" * MAX_PATTERN) is None


def test_the_docs_and_examples_have_rule_patterns_to_check():
    assert len(_doc_rule_patterns()) >= 2


@pytest.mark.parametrize("pattern", ORDINARY + _doc_rule_patterns())
def test_ordinary_and_documented_rule_patterns_pass(pattern):
    assert backtracking_risk(pattern) is None
    assert parse_rules([{"id": "ACME101", "slug": "a", "regex": pattern, "verdict": "infra"}])


# -- accepted patterns do polynomial work (the step model of re) ------------------------------------------
_LEAVES = st.sampled_from(["a", "b", "ab", "\\w", "[ab]", ".", "[^b]", ",", "\\d"])


def _grow(children):
    return st.one_of(
        st.tuples(children, children).map(lambda t: t[0] + t[1]),
        st.tuples(children, children).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        st.tuples(children, st.sampled_from(["+", "*", "?", "{1,3}", "{2}", "+?", "{0,4}"])).map(
            lambda t: f"(?:{t[0]}){t[1]}"
        ),
    )


PATTERNS = st.recursive(_LEAVES, _grow, max_leaves=6)
TEXTS = ["a", "ab", "a,", "b", "aab", "1"]


def _steps(pattern: re.Pattern[str], text: str) -> int:
    steps = Steps(limit=400_000)
    _deep(lambda: model_spans(pattern, text, steps, first_only=True))
    return steps.n


@given(PATTERNS)
@example("(?:a{1,3}){1,3}")
@example("(?:aa?)+")
def test_a_pattern_the_guard_accepts_does_polynomial_work_on_adversarial_text(body):
    """On ``unit * n + '!'`` the accepted pattern's steps from n=8 to 16 to 32 grow by at most 2^4 a
    doubling (a search is a power of the text's length of the degree its nesting allows, ``.*a.*a`` is 3);
    an exponential one grows by 2^8 and more, or runs past the step budget."""
    pattern = "^(?:" + body + ")$"
    if backtracking_risk(pattern) is not None:
        return
    compiled = re.compile(pattern)
    for unit in TEXTS:
        try:
            counts = [_steps(compiled, unit * n + "!") for n in (8, 16, 32)]
        except StepBudget:  # pragma: no cover - the failure this test exists for
            pytest.fail(f"{pattern!r} on {unit!r}*32: over the step budget")
        assert counts[2] <= 16 * counts[1] + 64 and counts[1] <= 16 * counts[0] + 64, (pattern, unit, counts)
