"""The gate's unit for an LLM judge's A/B evaluation: the item (a prompt or a
task), as rounds are for games (docs/llm-judge.md).

Every judgment of one item, in every judgments file of the session, combines
into ONE result for the gate's candidate: each judgment is +1 (the candidate
preferred), -1 (its opponent preferred) or 0 (a tie); the item is won when
the sum is positive, lost when negative, tied at zero (ties are left out of
the test, as tied rounds are). Both orders of a position-bias check that
disagree cancel: that item is a tie, not evidence either way; three samples
of which two prefer the candidate are one won item, not two.

The golden rule of the evaluation runbook, for judges: a judgment with an
``error``, or with a null winner and no scores, is the judge failing (infra):
never a loss. Its item is not evidence, is named, and blocks the gate until
the judge is re-run on it. So does a line that cannot be read (with its
file:line), and the same judgment (one ``id``, or one item, pair, judge,
``sample`` and ``order``) recorded twice with different verdicts. A failed
judgment followed by a successful one of the same identity is a retry: the
success stands (a note says so)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .judgments import TIE, BadLine, Judgment, Judgments
from .rounds import RoundVerdict

JUDGE_FAILED = "judge-failed"
FORMAT = "format-not-understood"
CONFLICT = "judgment-conflict"
SHOW = 5


@dataclass
class ItemVerdict(RoundVerdict):
    """One item's place in the decision (a :class:`~.rounds.RoundVerdict` whose unit is the item)."""

    unit: ClassVar[str] = "item"
    lines: list[int] = field(default_factory=list)  # the lines of its judgments, in its file
    order_decided: bool = False  # a tie because each order preferred the answer in the same position

    def to_record(self) -> dict[str, Any]:
        return {**super().to_record(), "unit": "item", "item": self.id, "judgments": self.episodes, "lines": self.lines}


@dataclass
class ItemEvidence:
    verdicts: list[ItemVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Item:
    id: str
    origin: str
    source: str
    judgments: list[Judgment] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def _at(line: Judgment | BadLine) -> str:
    return f"{line.where}:{line.line}"


def _where(lines: Iterable[Judgment | BadLine]) -> str:
    """'judgments.jsonl:1,2' (or, over several files, 'a/judgments.jsonl:1; b/judgments.jsonl:4')."""
    by_file: dict[str, list[int]] = {}
    for x in lines:
        by_file.setdefault(x.where, []).append(x.line)
    parts = []
    for where, numbers in by_file.items():
        shown = sorted(set(numbers))
        more = f" and {len(shown) - SHOW} more" if len(shown) > SHOW else ""
        parts.append(f"{where}:{','.join(str(n) for n in shown[:SHOW])}{more}")
    return "; ".join(parts)


def judged_items(
    sources: list[tuple[str, Judgments | None]], candidate: str | None, claim: str, champion: str | None
) -> ItemEvidence:
    """The items of every judgments file of the session (origin: the run dir's
    name when the session has several), one verdict each, keyed by item id."""
    out = ItemEvidence()
    items: dict[str, _Item] = {}
    kept: dict[str, tuple[Judgment, _Item]] = {}  # judgment identity -> the judgment counted
    duplicates = retried = 0
    for origin, found in sources:
        if found is None:
            continue
        label = f"{origin}/{found.source}" if origin else found.source
        if found.unread:
            out.verdicts.append(
                ItemVerdict(
                    found.source,
                    found.source,
                    origin,
                    category="judgments not read in full",
                    cause=FORMAT,
                    blocks=True,
                    detail=f"{found.unread}; the judgments it holds are not counted until it can be read whole",
                )
            )
            continue
        for b in (dataclasses.replace(b, where=label) for b in found.bad):
            if b.item is None:  # a line that does not say its item could be any item's loss: it blocks alone
                out.verdicts.append(
                    ItemVerdict(
                        f"{found.source}:{b.line}",
                        found.source,
                        origin,
                        category="a judgment line that cannot be read",
                        cause=FORMAT,
                        blocks=True,
                        detail=f"{label}:{b.line}: {b.why}: {b.text}",
                        lines=[b.line],
                    )
                )
            else:
                _item(items, b.item, origin, found.source).bad.append(b)
        for j in (dataclasses.replace(j, where=label) for j in found.judgments):
            it = _item(items, j.item, origin, found.source)
            if j.key is None:
                it.judgments.append(j)
                continue
            first = kept.get(j.key)
            if first is None:
                kept[j.key] = (j, it)
                it.judgments.append(j)
            elif (first[0].prefers, first[0].failed) == (j.prefers, j.failed):
                duplicates += 1
            elif first[0].failed is not None and j.failed is None:  # a retry that succeeded: it stands
                first[1].judgments.remove(first[0])
                kept[j.key] = (j, it)
                it.judgments.append(j)
                retried += 1
            elif j.failed is not None:
                retried += 1  # a failed retry of a judgment that stands: the earlier success counts
            else:
                it.conflicts.append(
                    f"{_at(first[0])} and {_at(j)} record the same judgment "
                    f"with different verdicts ({first[0].prefers} / {j.prefers})"
                )
    if duplicates:
        out.notes.append(
            f"duplicate-judgment: {duplicates} judgment line(s) repeat an earlier judgment of the same identity "
            "(id, or item, pair, judge, sample and order); each counted once"
        )
    if retried:
        out.notes.append(f"retried-judgment: {retried} failed judgment(s) stand beside a success of the same identity")
    out.verdicts += [_verdict(it, candidate, claim, champion) for it in items.values()]
    biased = [v.label for v in out.verdicts if v.order_decided]
    if biased:
        more = f" and {len(biased) - SHOW} more" if len(biased) > SHOW else ""
        out.notes.append(
            f"position-bias: on {len(biased)} item(s) the judge preferred the answer in the same position in each "
            f"order shown ({', '.join(biased[:SHOW])}{more}): tied, left out"
        )
    return out


def _item(items: dict[str, _Item], item: str, origin: str, source: str) -> _Item:
    if item not in items:
        items[item] = _Item(item, origin, source)
    return items[item]


def _verdict(it: _Item, candidate: str | None, claim: str, champion: str | None) -> ItemVerdict:
    v = ItemVerdict(it.id, it.source, it.origin, lines=sorted(j.line for j in it.judgments))
    if candidate is not None:
        mine = [j for j in it.judgments if candidate in j.pair and (champion is None or champion in j.pair)]
        bad = [
            b for b in it.bad if b.pair is None or (candidate in b.pair and (champion is None or champion in b.pair))
        ]
    else:
        mine, bad = list(it.judgments), list(it.bad)
    v.episodes = len(mine)
    if bad:
        v.category, v.cause, v.blocks = "a judgment line that cannot be read", FORMAT, True
        v.lines = sorted({*v.lines, *(b.line for b in bad)})
        v.detail = f"{_at(bad[0])}: {bad[0].why}" + (
            f" (and {len(bad) - 1} more line(s) of this item)" if len(bad) > 1 else ""
        )
        v.detail += "; fix the line (docs/llm-judge.md) or re-run the judge on this item"
        return v
    if it.conflicts:
        v.category, v.cause, v.blocks = "the same judgment recorded twice with different verdicts", CONFLICT, True
        v.detail = f"{it.conflicts[0]}; keep one of them (or give repeats their own sample)"
        return v
    failed = [j for j in mine if j.failed is not None]
    if failed:
        v.category = "the judge failed (infra: never a loss)"
        v.cause, v.blocks = JUDGE_FAILED, True
        f = failed[0]
        more = f" (and {len(failed) - 1} more of its {len(mine)} judgment(s))" if len(failed) > 1 else ""
        v.detail = f"{_at(f)}: {f.failed}{more}; re-run the judge on this item"
        return v
    if candidate is None:
        return v  # no claim: nothing to count it for
    if not mine:
        pairs = sorted({" vs ".join(sorted(j.pair)) for j in it.judgments})
        who = f"{candidate} against {champion}" if champion else candidate
        v.category = f"{who} not judged on this item"
        v.detail = f"judged: {', '.join(pairs[:3])}"
        return v
    opponents = sorted({n for j in mine for n in j.pair if n != candidate})
    if len(opponents) > 1:
        v.category = f"judged against several baselines ({', '.join(opponents[:4])})"
        v.blocks = True
        v.detail = "name the one the gate compares with: --runhealth-champion NAME (or gate.champion)"
        return v
    return _combine(v, mine, candidate, opponents[0], claim)


def _combine(v: ItemVerdict, mine: list[Judgment], candidate: str, opponent: str, claim: str) -> ItemVerdict:
    """Each judgment +1 / -1 / 0 for the candidate; the item is the sign of the sum."""
    won = sum(1 for j in mine if j.prefers == candidate)
    lost = sum(1 for j in mine if j.prefers == opponent)
    tied = sum(1 for j in mine if j.prefers == TIE)
    diff = (won > lost) - (won < lost)
    v.outcome = {1: "won", -1: "lost", 0: "tied"}[diff]
    v.sign = diff if claim == "wins" else -diff
    v.detail = (
        f"{candidate} preferred in {won}, {opponent} in {lost}, tie in {tied} of {len(mine)} judgment(s) "
        f"({_where(mine)})"
    )
    orders = {j.order for j in mine if j.order is not None}
    if diff == 0 and won and len(orders) > 1:
        v.order_decided = True
        v.detail += ": the verdict followed the order shown (position bias), not evidence either way"
    return v
