"""Which regular expressions a config may run: the ones Python's ``re`` runs
in time that does not explode with the text.

``re`` backtracks and has no linear-time mode and no timeout, so a rule's
regex from a ``runhealth.yaml`` (the user's, or one planted in a folder the
user stands in) such as ``^(a+)+$`` would hold the session for ever on one
line of ``a``\\ s. Rather than add an engine as a dependency, a pattern is
refused when it is loaded if a backtracking matcher could try exponentially
many ways through it (the catastrophic forms,
https://www.regular-expressions.info/catastrophic.html). Backtracking explodes
only where a repeated part can match the same text in more than one way: each
repetition doubles the ways, and a failing line tries them all. So every
quantifier that can repeat its part more than once -- unbounded or bounded
(``{1,30}`` repeated 30 times is a power of 30 of the line's length, as bad) --
is checked, and refused when its part

- can match the empty string (``(a*)*``, ``(a?b?)+``);
- can itself match one text in two ways: two alternatives that can match the
  same text (``(a|a)+``), or two neighbours whose border can move
  (``(x+x+)+``, ``(a*ab)+``), or a part refused below nested inside it;
- can divide one text into repetitions in two ways (``(a+)+``,
  ``(a{1,30}){1,30}``, ``(aa?)+``, ``(\\w+\\s?)+``): a character that can end
  one repetition can also be followed, inside one repetition, by a character
  that can begin the next;

and a backreference (``\\1``, ``(?P=name)``, ``(?(1)...)``) is refused: no
automaton can run it. The judgement works on sets of characters (the ones a
part can begin and end with, and the pairs that can stand side by side inside
it), so it is conservative: it may refuse a pattern that is in fact safe, never
the reverse for the forms above. A repeated part whose repetitions are set
apart by a character that cannot occur inside them passes
(``(\\d+\\.){3}\\d+``, ``(?:error|warn)+: \\d+``, ``(a|ab)+c``).

Atomic groups and possessive quantifiers (``(?>...)``, ``a++``) never give
back what they matched, so from the outside they match one way; what is
inside them is judged like any other part (``(?>(a+)+b)`` still explodes
while the group looks for its first match). What stays possible is polynomial
time on one long line (``.*a.*a.*a``, or any search that rescans from every
start): bounded by the line lengths the rule reader reads (docs/robustness.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

try:  # Python 3.11+: the parser behind re.compile
    from re import _constants as C  # type: ignore[attr-defined]
    from re import _parser as P  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

_REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT}
_POSSESSIVE = getattr(C, "POSSESSIVE_REPEAT", None)
_ATOMIC = getattr(C, "ATOMIC_GROUP", None)
_BACKREFS = {C.GROUPREF, C.GROUPREF_EXISTS} | ({C.GROUPREF_IGNORE} if hasattr(C, "GROUPREF_IGNORE") else set())
_ZERO_WIDTH = {C.AT, C.ASSERT, C.ASSERT_NOT}
_MAX_PAIRS = 64  # past this many, a part's neighbour pairs are merged into one (coarser, still conservative)
_INF = float("inf")

NULLABLE = "a quantifier repeats a part that can match the empty string (as in '(a*)*')"
AMBIGUOUS = (
    "a quantifier repeats a part that can match the same text in more than one way (as in '(a|a)+' or '(x+x+)+')"
)
SPLITS = (
    "a quantifier repeats a part whose repetitions can divide the same text in more than one way "
    "(as in '(a+)+', '(a{1,30}){1,30}' or '(aa?)+')"
)
BACKREFERENCE = "a backreference, which no linear-time matcher can run"


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


@dataclass(frozen=True)
class _Chars:
    """A superset of the characters an item can match: the ASCII ones as a bit mask, the rest as the kinds
    of non-ASCII character it may hold (Unicode digits, other word characters, spaces, anything else)."""

    ascii: int = 0
    wide: frozenset[str] = frozenset()

    def __or__(self, other: _Chars) -> _Chars:
        return _Chars(self.ascii | other.ascii, self.wide | other.wide)

    def meets(self, other: _Chars) -> bool:
        return bool(self.ascii & other.ascii) or not self.wide.isdisjoint(other.wide)


_ANY_WIDE = frozenset({"digit", "letter", "space", "other"})
_NONE = _Chars()
_ALL_ASCII = (1 << 128) - 1
_EVERY = _Chars(_ALL_ASCII, _ANY_WIDE)


def _mask(chars: str) -> int:
    out = 0
    for c in chars:
        out |= 1 << ord(c)
    return out


_CATEGORIES = {
    C.CATEGORY_DIGIT: _Chars(_mask("0123456789"), frozenset({"digit"})),
    C.CATEGORY_SPACE: _Chars(_mask(" \t\n\r\f\v\x1c\x1d\x1e\x1f"), frozenset({"space"})),
    C.CATEGORY_WORD: _Chars(
        _mask("0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
        frozenset({"letter", "digit"}),
    ),
}
for _positive, _negative in (
    (C.CATEGORY_DIGIT, C.CATEGORY_NOT_DIGIT),
    (C.CATEGORY_SPACE, C.CATEGORY_NOT_SPACE),
    (C.CATEGORY_WORD, C.CATEGORY_NOT_WORD),
):
    _CATEGORIES[_negative] = _Chars(_ALL_ASCII & ~_CATEGORIES[_positive].ascii, _ANY_WIDE - _CATEGORIES[_positive].wide)


def _kind(c: str) -> frozenset[str]:
    """The kind of one non-ASCII character, and of those it may fold to."""
    kinds = set()
    for f in {c, c.lower(), c.upper(), c.casefold()}:
        for x in f:
            if x.isdecimal():
                kinds.add("digit")
            elif x.isalnum() or x == "_":
                kinds.add("letter")
            elif x.isspace():
                kinds.add("space")
            else:
                kinds.add("other")
    return frozenset(kinds)


def _not(chars: _Chars) -> _Chars:
    """Every character but these: all the kinds of non-ASCII character (one character of a kind does not
    take the kind away)."""
    return _Chars(_ALL_ASCII & ~chars.ascii, _ANY_WIDE)


def _char(code: int) -> _Chars:
    """One character, in either case (a rule may ignore case, and ``(?i)`` may stand anywhere); ``k``, ``s``
    and ``i`` also match non-ASCII letters when case is ignored (KELVIN SIGN, LONG S, DOTTED I)."""
    c = chr(code)
    if code >= 128:  # and the ASCII letter it may fold to ("\u017f" is "s" when case is ignored)
        folds = "".join(f for f in (c.lower(), c.upper(), c.casefold()) if len(f) == 1 and f.isascii())
        return _Chars(_mask(folds + folds.swapcase()), _kind(c))
    return _Chars(_mask(c + c.swapcase()), frozenset({"letter"}) if c.lower() in "kis" else frozenset())


def _range(lo: int, hi: int) -> _Chars:
    out = _Chars(0, _ANY_WIDE if hi >= 128 else frozenset())
    for code in range(lo, min(hi, 127) + 1):
        out = out | _char(code)
    return out


def _class(items: list[tuple[Any, Any]]) -> _Chars:
    negate = bool(items) and items[0][0] is C.NEGATE
    out = _NONE
    for op, av in items[1:] if negate else items:
        if op is C.LITERAL:
            out = out | _char(av)
        elif op is C.RANGE:
            out = out | _range(*av)
        elif op is C.CATEGORY and av in _CATEGORIES:
            out = out | _CATEGORIES[av]
        else:
            return _EVERY  # anything else: any character
    return _not(out) if negate else out


@dataclass
class _Shape:
    """What the judgement needs of a part of a pattern: whether it can match the empty string, the characters
    its matches can begin and end with, the pairs of characters that can stand side by side inside one match,
    the lengths it can match, and whether it can match one text in more than one way."""

    nullable: bool = True
    first: _Chars = _NONE
    last: _Chars = _NONE
    pairs: list[tuple[_Chars, _Chars]] = field(default_factory=list)
    shortest: float = 0
    longest: float = 0
    ambiguous: bool = False
    # A part that matches exactly one character from each of these sets, in order (a word, "[ab]c"), or None:
    # two such alternatives share a text only if every position can hold the same character.
    chars: tuple[_Chars, ...] | None = ()


def _pairs(pairs: list[tuple[_Chars, _Chars]]) -> list[tuple[_Chars, _Chars]]:
    if len(pairs) <= _MAX_PAIRS:
        return pairs
    left, right = _NONE, _NONE
    for a, b in pairs:
        left, right = left | a, right | b
    return [(left, right)]


def _one(chars: _Chars) -> _Shape:
    return _Shape(nullable=False, first=chars, last=chars, shortest=1, longest=1, chars=(chars,))


def _then(a: _Shape, b: _Shape) -> _Shape:
    """``a`` followed by ``b``. Their border can move (one text, two ways) only if ``a`` can match texts of
    different lengths and either can match the empty string and also begin with what ``b`` begins with, or
    has a character that can end it followed, inside it, by one that can begin ``b``."""
    moves = a.shortest < a.longest and (  # matches of one length: no match is a longer one's start
        (a.nullable and a.first.meets(b.first)) or any(x.meets(a.last) and y.meets(b.first) for x, y in a.pairs)
    )
    across = [(a.last, b.first)] if a.longest and b.longest else []
    return _Shape(
        nullable=a.nullable and b.nullable,
        first=a.first | b.first if a.nullable else a.first,
        last=a.last | b.last if b.nullable else b.last,
        pairs=_pairs(a.pairs + b.pairs + across),
        shortest=a.shortest + b.shortest,
        longest=a.longest + b.longest,
        ambiguous=a.ambiguous or b.ambiguous or moves,
        chars=a.chars + b.chars if a.chars is not None and b.chars is not None and len(a.chars) < _MAX_PAIRS else None,
    )


def _may_share_a_text(a: _Shape, b: _Shape) -> bool:
    if a.nullable and b.nullable:
        return True
    if a.chars is not None and b.chars is not None:  # fixed strings: position by position ("w10x" and "w11x" differ)
        return len(a.chars) == len(b.chars) and all(x.meets(y) for x, y in zip(a.chars, b.chars))
    low, high = max(a.shortest, b.shortest, 1), min(a.longest, b.longest)
    return low <= high and a.first.meets(b.first) and a.last.meets(b.last)


_MAX_COMPARED = 200  # alternatives compared pairwise; past this many they are taken to overlap (conservative)


def _either(shapes: list[_Shape]) -> _Shape:
    """Alternatives: ambiguous when one is, or when two may match the same text."""
    if len(shapes) > _MAX_COMPARED:
        clash = True
    else:
        clash = any(_may_share_a_text(a, b) for i, a in enumerate(shapes) for b in shapes[i + 1 :])
    first, last = _NONE, _NONE
    pairs: list[tuple[_Chars, _Chars]] = []
    for s in shapes:
        first, last, pairs = first | s.first, last | s.last, _pairs(pairs + s.pairs)
    return _Shape(
        nullable=any(s.nullable for s in shapes),
        first=first,
        last=last,
        pairs=pairs,
        shortest=min((s.shortest for s in shapes), default=0),
        longest=max((s.longest for s in shapes), default=0),
        ambiguous=clash or any(s.ambiguous for s in shapes),
        chars=None,
    )


def _repeat(lo: int, hi: int, body: _Shape, possessive: bool) -> _Shape:
    """``body`` repeated ``lo`` to ``hi`` times; refused where repetition multiplies the ways."""
    many = hi > 1 and body.longest > 0
    # A possessive repeat never gives back a repetition once it has ``lo`` of them: it can only be
    # driven back into its repetitions while it has fewer.
    judged = many and (not possessive or lo > 1)
    if judged:
        if body.nullable:
            raise _Refused(NULLABLE)
        if body.ambiguous:
            raise _Refused(AMBIGUOUS)
        if body.shortest < body.longest and any(x.meets(body.last) and y.meets(body.first) for x, y in body.pairs):
            raise _Refused(SPLITS)  # (repetitions of one length divide a text one way only)
    seen = body if not possessive else _Shape(body.nullable, body.first, body.last, [], body.shortest, body.longest)
    fixed = body.chars if lo == hi and body.chars is not None and lo * len(body.chars) <= _MAX_PAIRS else None
    return _Shape(
        nullable=lo == 0 or body.nullable,
        first=seen.first,
        last=seen.last,
        pairs=_pairs(seen.pairs + ([(body.last, body.first)] if many and not possessive else [])),
        shortest=lo * body.shortest,
        longest=_INF if hi == C.MAXREPEAT and body.longest else hi * body.longest,
        ambiguous=seen.ambiguous,
        chars=None if fixed is None else fixed * lo,
    )


def _shape(items: list[tuple[Any, Any]]) -> _Shape:
    out = _Shape()
    for op, av in items:
        out = _then(out, _item(op, av))
    return out


def _item(op: Any, av: Any) -> _Shape:
    if op in _BACKREFS:
        raise _Refused(BACKREFERENCE)
    if op is C.LITERAL:
        return _one(_char(av))
    if op is C.NOT_LITERAL:
        return _one(_not(_char(av)))
    if op is C.ANY:
        return _one(_EVERY)
    if op is C.IN:
        return _one(_class(list(av)))
    if op is C.SUBPATTERN:
        return _shape(list(av[-1]))
    if op is C.BRANCH:
        return _either([_shape(list(b)) for b in av[1]])
    if op in _REPEATS or (_POSSESSIVE is not None and op is _POSSESSIVE):
        lo, hi, body = av
        return _repeat(lo, hi, _shape(list(body)), possessive=op is _POSSESSIVE)
    if _ATOMIC is not None and op is _ATOMIC:
        inner = _shape(list(av))  # judged inside; from outside it matches one way
        return _Shape(inner.nullable, inner.first, inner.last, [], inner.shortest, inner.longest, chars=inner.chars)
    if op in (C.ASSERT, C.ASSERT_NOT):
        _shape(list(av[1]))  # what is inside a look-around is judged too; it consumes nothing
        return _Shape()
    if op in _ZERO_WIDTH:
        return _Shape()
    return _one(_EVERY)  # anything the parser adds later: any one character, the conservative guess


MAX_PATTERN = (
    4096  # characters: a rule's regex is a line of a log's worth, not a file (judging costs ~30 us a character)
)


def backtracking_risk(pattern: str) -> str | None:
    """Why ``pattern`` may take exponential time in ``re``, or None. (A
    pattern ``re`` cannot compile is the caller's to report.)"""
    if len(pattern) > MAX_PATTERN:
        return (
            f"it is {len(pattern):,} characters long, over the {MAX_PATTERN:,} a rule's pattern may have to be judged"
        )
    try:
        parsed = P.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    try:
        _shape(list(parsed))
    except _Refused as refused:
        return refused.reason
    except RecursionError:
        return "it is nested too deeply to be judged"
    return None
