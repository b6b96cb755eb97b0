"""The work a regular expression does, counted in steps instead of timed.

Python's ``re`` exposes no step count, and this machine has no hardware counters, so a growth test that
timed ``re`` (even in CPU time) still read a clock. :func:`compile_steps` turns a compiled pattern's parse
tree into a backtracking matcher that tries the same alternatives in the same order as ``re``'s engine
(leftmost start, greedy or lazy repeats, branches in order, look-arounds) and counts one step per character
tested, per repeat position tried and per start position searched. No memo, no shortcuts: a pattern that
makes ``re`` rescan the rest of the text from every start makes this matcher do the same, in steps.

:class:`CountingPattern` wraps a real pattern: each call adds the model's steps to a shared counter and
returns the real engine's answer, after checking that the model found the same match (so the count is of
the real search, not of a look-alike's)."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]
from typing import Any

Cont = Callable[[int], "int | None"]
Matcher = Callable[[int, Cont], "int | None"]


class StepBudget(Exception):
    """More steps than the measurement allowed: growth already beyond what it checks for."""


class Steps:
    """The running count, shared by every pattern of one measurement; past ``limit`` the next start
    position searched raises :class:`StepBudget`, so a quadratic search fails in seconds, not hours."""

    def __init__(self, limit: int | None = None) -> None:
        self.n = 0
        self.limit = limit


def _word(c: str, ascii_only: bool) -> bool:
    return (c.isascii() or not ascii_only) and (c.isalnum() or c == "_")


def _category(cat, c: str, ascii_only: bool) -> bool:
    if cat is C.CATEGORY_DIGIT:
        return c.isdecimal() and (c.isascii() or not ascii_only)
    if cat is C.CATEGORY_NOT_DIGIT:
        return not (c.isdecimal() and (c.isascii() or not ascii_only))
    if cat is C.CATEGORY_SPACE:
        return c in " \t\n\r\f\v" if ascii_only else c.isspace()
    if cat is C.CATEGORY_NOT_SPACE:
        return not (c in " \t\n\r\f\v" if ascii_only else c.isspace())
    if cat is C.CATEGORY_WORD:
        return _word(c, ascii_only)
    if cat is C.CATEGORY_NOT_WORD:
        return not _word(c, ascii_only)
    raise NotImplementedError(cat)


def _variants(c: str, ignorecase: bool) -> tuple[str, ...]:
    return (c, c.lower(), c.upper()) if ignorecase else (c,)


def _char_test(op, av, flags: int) -> Callable[[str], bool]:
    """A one-character item (literal, class, any) as a test of one character."""
    ic = bool(flags & re.IGNORECASE)
    ascii_only = bool(flags & re.ASCII)
    if op is C.LITERAL:
        want = set(_variants(chr(av), ic))
        return lambda c: any(v in want for v in _variants(c, ic))
    if op is C.NOT_LITERAL:
        want = set(_variants(chr(av), ic))
        return lambda c: not any(v in want for v in _variants(c, ic))
    if op is C.ANY:
        return (lambda c: True) if flags & re.DOTALL else (lambda c: c != "\n")
    if op is C.IN:
        negate = bool(av) and av[0][0] is C.NEGATE
        items = av[1:] if negate else av

        def one(c: str) -> bool:
            for iop, iav in items:
                if iop is C.LITERAL and c == chr(iav):
                    return True
                if iop is C.RANGE and iav[0] <= ord(c) <= iav[1]:
                    return True
                if iop is C.CATEGORY and _category(iav, c, ascii_only):
                    return True
            return False

        return lambda c: any(one(v) for v in _variants(c, ic)) != negate
    raise NotImplementedError(op)


CHAR_OPS = {C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN}


class _Compiler:
    def __init__(self, text: str, steps: Steps, flags: int) -> None:
        self.s = text
        self.n = len(text)
        self.steps = steps
        self.multiline = bool(flags & re.MULTILINE)

    def seq(self, items, flags: int) -> Matcher:
        parts = [self.node(op, av, flags) for op, av in items]

        def run(i: int, pos: int, k: Cont) -> int | None:
            if i == len(parts):
                return k(pos)
            return parts[i](pos, lambda p: run(i + 1, p, k))

        return lambda pos, k: run(0, pos, k)

    def node(self, op, av, flags: int) -> Matcher:
        s, steps = self.s, self.steps
        if op in CHAR_OPS:
            test = _char_test(op, av, flags)

            def char(pos: int, k: Cont) -> int | None:
                steps.n += 1
                return k(pos + 1) if pos < self.n and test(s[pos]) else None

            return char
        if op is C.AT:
            return self.at(av, flags)
        if op is C.SUBPATTERN:
            _group, add, remove, body = av
            return self.seq(body, (flags | add) & ~remove)
        if op is C.BRANCH:
            alts = [self.seq(alt, flags) for alt in av[1]]

            def branch(pos: int, k: Cont) -> int | None:
                for alt in alts:
                    steps.n += 1
                    end = alt(pos, k)
                    if end is not None:
                        return end
                return None

            return branch
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            return self.repeat(op, av, flags)
        if op is C.ATOMIC_GROUP:
            body = self.seq(av, flags)
            return lambda pos, k: None if (e := body(pos, lambda p: p)) is None else k(e)
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction, sub = av
            body = self.seq(sub, flags)
            width = sub.getwidth()[0] if direction < 0 else 0

            def look(pos: int, k: Cont) -> int | None:
                steps.n += 1
                if direction < 0:
                    found = pos - width >= 0 and body(pos - width, lambda p: p if p == pos else None) is not None
                else:
                    found = body(pos, lambda p: p) is not None
                return k(pos) if found == (op is C.ASSERT) else None

            return look
        raise NotImplementedError(op)

    def at(self, where, flags: int) -> Matcher:
        s, n, steps = self.s, self.n, self.steps
        ascii_only = bool(flags & re.ASCII)

        def boundary(pos: int) -> bool:
            before = pos > 0 and _word(s[pos - 1], ascii_only)
            after = pos < n and _word(s[pos], ascii_only)
            return before != after

        tests = {
            C.AT_BEGINNING: lambda p: p == 0 or (self.multiline and s[p - 1] == "\n"),
            C.AT_BEGINNING_STRING: lambda p: p == 0,
            C.AT_END: lambda p: p == n or (p == n - 1 and s[p] == "\n") or (self.multiline and s[p] == "\n"),
            C.AT_END_STRING: lambda p: p == n,
            C.AT_BOUNDARY: boundary,
            C.AT_NON_BOUNDARY: lambda p: not boundary(p),
        }
        test = tests[where]

        def at(pos: int, k: Cont) -> int | None:
            steps.n += 1
            return k(pos) if test(pos) else None

        return at

    def repeat(self, op, av, flags: int) -> Matcher:
        lo, hi, sub = av
        steps, s, n = self.steps, self.s, self.n
        if len(sub) == 1 and sub[0][0] in CHAR_OPS and op is not C.POSSESSIVE_REPEAT:
            test = _char_test(sub[0][0], sub[0][1], flags)
            if op is C.MAX_REPEAT:  # greedy: run to the end of the run, then give back one at a time

                def greedy_one(pos: int, k: Cont) -> int | None:
                    end = pos
                    while end - pos < hi and end < n and test(s[end]):
                        steps.n += 1
                        end += 1
                    steps.n += 1
                    while end >= pos + lo:
                        steps.n += 1
                        got = k(end)
                        if got is not None:
                            return got
                        end -= 1
                    return None

                return greedy_one

            def lazy_one(pos: int, k: Cont) -> int | None:
                end = pos
                while end - pos < lo:
                    steps.n += 1
                    if end >= n or not test(s[end]):
                        return None
                    end += 1
                while True:
                    steps.n += 1
                    got = k(end)
                    if got is not None:
                        return got
                    if end - pos >= hi or end >= n or not test(s[end]):
                        return None
                    end += 1

            return lazy_one
        body = self.seq(sub, flags)
        if op is C.POSSESSIVE_REPEAT:

            def possessive(pos: int, k: Cont) -> int | None:
                count, end = 0, pos
                while count < hi:
                    nxt = body(end, lambda p: p)
                    if nxt is None or nxt == end:
                        break
                    count, end = count + 1, nxt
                return k(end) if count >= lo else None

            return possessive

        def more(pos: int, count: int, k: Cont) -> int | None:
            steps.n += 1
            if op is C.MIN_REPEAT and count >= lo:
                got = k(pos)
                if got is not None:
                    return got
            if count < hi:
                got = body(pos, lambda p: None if p == pos and count >= lo else more(p, count + 1, k))
                if got is not None:
                    return got
            return k(pos) if op is C.MAX_REPEAT and count >= lo else None

        return lambda pos, k: more(pos, 0, k)


def compile_steps(pattern: re.Pattern, text: str | bytes, steps: Steps) -> Matcher:
    """The model of ``pattern`` over ``text``: ``matcher(pos, k)`` is the end ``k`` accepts, or None."""
    s = text.decode("latin-1") if isinstance(text, bytes) else text
    flags = pattern.flags | (re.ASCII if isinstance(pattern.pattern, bytes) else 0)
    tree = P.parse(pattern.pattern.decode("latin-1") if isinstance(pattern.pattern, bytes) else pattern.pattern, flags)
    return _Compiler(s, steps, flags).seq(list(tree), flags | tree.state.flags)


def model_spans(
    pattern: re.Pattern, text: str | bytes, steps: Steps, pos: int = 0, first_only: bool = False
) -> list[tuple[int, int]]:
    """The spans that ``pattern.finditer(text, pos)`` (or ``search``, ``first_only``) finds, counting steps:
    every start position tried, as ``re``'s search tries them."""
    match = compile_steps(pattern, text, steps)
    spans: list[tuple[int, int]] = []
    must_advance = False
    while pos <= len(text):
        found = None
        for start in range(pos, len(text) + 1):
            steps.n += 1
            if steps.limit is not None and steps.n > steps.limit:
                raise StepBudget(f"over {steps.limit:,} steps")
            avoid_empty = must_advance and start == pos
            end = match(start, lambda p, st=start, ae=avoid_empty: None if ae and p == st else p)
            if end is not None:
                found = (start, end)
                break
        if found is None:
            break
        spans.append(found)
        if first_only:
            break
        must_advance = found[0] == found[1]
        pos = found[1]
    return spans


def _deep(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a thread with a deep stack: the model recurses once per repeat of a group."""
    out: dict[str, Any] = {}

    def work() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            out["error"] = exc

    old_limit, old_size = sys.getrecursionlimit(), threading.stack_size()
    sys.setrecursionlimit(200_000)
    threading.stack_size(512 << 20)
    try:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    finally:
        threading.stack_size(old_size)
        sys.setrecursionlimit(old_limit)
    if "error" in out:
        raise out["error"]
    return out["value"]


class CountingPattern:
    """A compiled pattern whose ``search``, ``match`` and ``sub`` add the model's steps to ``steps`` and
    return the real engine's result, after checking that the model found the same span."""

    def __init__(self, real: re.Pattern, steps: Steps) -> None:
        self.real = real
        self.steps = steps
        self.pattern = real.pattern
        self.flags = real.flags

    def search(self, text, pos: int = 0):
        got = self.real.search(text, pos)
        model = _deep(lambda: model_spans(self.real, text, self.steps, pos, first_only=True))
        assert model == ([got.span()] if got else []), (self.real.pattern, model, got)
        return got

    def match(self, text, pos: int = 0):
        got = self.real.match(text, pos)
        model = _deep(lambda: compile_steps(self.real, text, self.steps)(pos, lambda p: p))
        assert model == (got.end() if got else None), (self.real.pattern, model, got)
        return got

    def sub(self, replacement, text, count: int = 0):
        assert count == 0
        model = _deep(lambda: model_spans(self.real, text, self.steps))
        assert model == [m.span() for m in self.real.finditer(text)], self.real.pattern
        return self.real.sub(replacement, text)
