"""Which regular expressions a config may run: the ones Python's ``re`` runs
in time that does not explode with the text.

``re`` backtracks and has no linear-time mode and no timeout, so a rule's
regex from a ``runhealth.yaml`` (the user's, or one planted in a folder the
user stands in) such as ``^(a+)+$`` would hold the session for ever on one
line of ``a``\\ s. Rather than add an engine as a dependency, a pattern is
refused when it is loaded if it holds what makes backtracking exponential
(the classic catastrophic forms, https://www.regular-expressions.info/catastrophic.html):

- a backreference (``\\1``, ``(?P=name)``, ``(?(1)...)``): no automaton can run it;
- a quantifier that repeats without bound a part that itself holds a
  quantifier over more than one character (``(a+)+``, ``(a*b?)*``, ``(\\w+\\s?)+``);
- a quantifier that repeats without bound alternatives that can begin with
  the same character (``(a|ab)+``, ``(\\w|\\d)*``).

Atomic groups and possessive quantifiers (``(?>...)``, ``a++``) never
backtrack into what they matched, and are allowed around anything.
What stays possible is polynomial time on one long line (``.*a.*a.*a``):
bounded by the line lengths the rule reader reads (docs/robustness.md)."""

from __future__ import annotations

import re
from typing import Any

try:  # Python 3.11+: the parser behind re.compile
    from re import _constants as C  # type: ignore[attr-defined]
    from re import _parser as P  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

_REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT}
_SAFE = {getattr(C, "POSSESSIVE_REPEAT", None), getattr(C, "ATOMIC_GROUP", None)} - {None}
_BACKREFS = {C.GROUPREF, C.GROUPREF_EXISTS} | ({C.GROUPREF_IGNORE} if hasattr(C, "GROUPREF_IGNORE") else set())
_ANY_CHAR = object()


def backtracking_risk(pattern: str) -> str | None:
    """Why ``pattern`` may take exponential time in ``re``, or None. (A
    pattern ``re`` cannot compile is the caller's to report.)"""
    try:
        parsed = P.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    try:
        return _walk(list(parsed), inside_unbounded=False)
    except RecursionError:
        return "it is nested too deeply to be judged"


def _walk(items: list[tuple[Any, Any]], inside_unbounded: bool) -> str | None:
    for op, av in items:
        if op in _BACKREFS:
            return "a backreference, which no linear-time matcher can run"
        if op in _SAFE:
            continue  # never backtracks into itself
        if op in _REPEATS:
            lo, hi, body = av
            body = list(body)
            if _repeats(body) and (hi == C.MAXREPEAT or inside_unbounded):
                return "a quantifier repeats a part that holds a quantifier itself (as in '(a+)+')"
            if hi == C.MAXREPEAT or inside_unbounded:
                clash = _overlapping_branches(body)
                if clash:
                    return clash
            found = _walk(body, inside_unbounded or hi == C.MAXREPEAT)
            if found:
                return found
        elif op is C.SUBPATTERN:
            found = _walk(list(av[-1]), inside_unbounded)
            if found:
                return found
        elif op is C.BRANCH:
            for branch in av[1]:
                found = _walk(list(branch), inside_unbounded)
                if found:
                    return found
        elif op in (C.ASSERT, C.ASSERT_NOT):
            found = _walk(list(av[1]), inside_unbounded)
            if found:
                return found
    return None


def _repeats(items: list[tuple[Any, Any]]) -> bool:
    """Whether ``items`` hold a quantifier that can match more than one character's worth."""
    for op, av in items:
        if op in _SAFE:
            continue
        if op in _REPEATS and av[1] > 1:
            return True
        if op in _REPEATS and _repeats(list(av[2])):
            return True
        if op is C.SUBPATTERN and _repeats(list(av[-1])):
            return True
        if op is C.BRANCH and any(_repeats(list(b)) for b in av[1]):
            return True
    return False


def _overlapping_branches(items: list[tuple[Any, Any]]) -> str | None:
    """Alternatives under an unbounded quantifier that can start alike."""
    for op, av in items:
        if op is C.SUBPATTERN:
            found = _overlapping_branches(list(av[-1]))
            if found:
                return found
        elif op is C.BRANCH:
            starts: list[set[Any] | object] = [_first(list(b)) for b in av[1]]
            for i, a in enumerate(starts):
                for b in starts[i + 1 :]:
                    if a is _ANY_CHAR or b is _ANY_CHAR or (a & b):  # type: ignore[operator]
                        return (
                            "a quantifier repeats alternatives that can begin with the same character (as in '(a|ab)+')"
                        )
    return None


def _first(items: list[tuple[Any, Any]]) -> set[Any] | object:
    """The literal characters a branch can begin with, or _ANY_CHAR where that is not a plain literal."""
    for op, av in items:
        if op is C.AT:
            continue  # an anchor matches no character
        if op is C.LITERAL:
            return {av}
        if op is C.SUBPATTERN:
            return _first(list(av[-1]))
        return _ANY_CHAR
    return _ANY_CHAR  # an empty branch overlaps everything under a repeat
