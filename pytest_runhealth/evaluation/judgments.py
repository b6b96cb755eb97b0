"""An LLM judge's A/B evaluation on disk: ``judgments.jsonl``, one JSON object
per judgment, as a judge pipeline appends them (docs/llm-judge.md):

    {"item": "q-017", "candidate": "model-b", "baseline": "model-a",
     "winner": "model-b", "error": null, "judge": "qwen2.5-7b-instruct",
     "sample": 0, "order": ["model-a", "model-b"]}

``winner`` is one of the two names, ``"tie"``, or null; or, instead,
``scores`` ({name: number}, higher is better). A line with an ``error``, or an
explicit null ``winner`` without scores, is the judge failing: infra, never a
loss. A line that cannot be read as a judgment (not JSON, a field missing or
of the wrong type, a winner that names neither side, scores keyed by other
names, a winner the scores contradict) is kept with its line number and why:
its item is not evidence until the line is fixed.

This module only reads; :mod:`.items` combines the judgments of one item into
the gate's unit of evidence."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..readers.rundir import JUDGMENTS_FILE, RunDir
from ..safety import reading
from ..safety.safeio import FirstSizes
from .model import Evaluation

FILE = JUDGMENTS_FILE
TIE = "tie"
MAX_BYTES = reading.MAX_FILE_BYTES  # a judgments file is small; a longer one is not judged on half its lines
MAX_INT_CHARS = 4000  # a longer integer literal is refused, never int()'d
SHOWN = 200  # characters of a line quoted as evidence
NO_VERDICT = "no verdict: "  # how a failed judgment without an error starts (winner null, no scores)


@dataclass(frozen=True)
class Judgment:
    """One readable line: who the judge preferred, or why it gave no verdict."""

    line: int
    item: str
    candidate: str
    baseline: str
    prefers: str | None  # the name preferred, "tie", or None when the judge failed
    failed: str | None  # the judge's error, or "no verdict: ..." (infra); None when it judged
    judge: str | None = None
    sample: str | None = None
    order: str | None = None  # the names in the order shown, as JSON (or the one shown first)
    key: str | None = None  # the judgment's identity, when the line carries one (id, sample or order)
    text: str = ""  # the line, shortened: the evidence
    where: str = ""  # its file as the gate names it (the run dir's name first when the session has several)

    @property
    def pair(self) -> frozenset[str]:
        return frozenset((self.candidate, self.baseline))


@dataclass(frozen=True)
class BadLine:
    """A line that is not a judgment the gate can read (RH505 ``format-not-understood``)."""

    line: int
    why: str
    text: str
    item: str | None = None  # when the line still says which item (and pair) it is about
    pair: frozenset[str] | None = None
    where: str = ""  # as Judgment.where


@dataclass
class Judgments:
    """``judgments.jsonl`` as read: its judgments, its bad lines, and whether all of it was read."""

    source: str  # the file, relative to the run dir
    judgments: list[Judgment] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    unread: str | None = None  # why (part of) the file could not be read: then nothing in it decides
    sha256: str = ""

    def players(self) -> set[str]:
        """Every name a line compares (for the gate's check of --runhealth-candidate/--runhealth-champion)."""
        found: set[str] = set()
        for j in self.judgments:
            found.update(j.pair)
        for b in self.bad:
            found.update(b.pair or ())
        return found


@dataclass(frozen=True)
class _TooLong:
    """An integer literal longer than :data:`MAX_INT_CHARS`: refused, never converted."""

    digits: int


def _parse_int(text: str) -> int | _TooLong:
    return int(text) if len(text) <= MAX_INT_CHARS else _TooLong(len(text.lstrip("-")))


def read_judgments(path: Path, source: str, sizes: FirstSizes | None = None) -> Judgments:
    """Every line of ``path`` (``source`` is its name relative to the run dir). Never raises."""
    out = Judgments(source)
    got = reading.read_bytes(path, MAX_BYTES, sizes=sizes)
    if got.error:
        out.unread = f"{source} cannot be read: {got.error}"
        return out
    out.sha256 = hashlib.sha256(got.data).hexdigest()
    if got.capped:
        out.unread = f"{source}: {got.capped}; a gate does not decide on part of the judgments"
    data = got.data
    cut = bool(data) and not data.endswith(b"\n")
    raw_lines = data.split(b"\n")
    for number, raw in enumerate(raw_lines, start=1):
        text = reading.decode(raw).strip()
        if not text:
            continue
        last = cut and number == len(raw_lines)
        _read_line(out, number, text, last)
    return out


def _read_line(out: Judgments, number: int, text: str, last: bool) -> None:
    shown = text[:SHOWN]
    try:
        row = json.loads(text, parse_int=_parse_int)
    except RecursionError:
        out.bad.append(BadLine(number, "not JSON: nested too deeply to parse", shown))
        return
    except (ValueError, OverflowError, TypeError, MemoryError) as exc:
        why = f"not JSON ({str(exc)[:80]})"
        if last:
            why += "; the file's last line has no newline: a write cut short, or the judge is still writing"
        out.bad.append(BadLine(number, why, shown))
        return
    if not isinstance(row, dict):
        out.bad.append(BadLine(number, f"a JSON {type(row).__name__}, not an object", shown))
        return
    got = _judgment(row, number, shown)
    if isinstance(got, BadLine):
        out.bad.append(got)
    else:
        out.judgments.append(got)


def _name(row: dict, key: str) -> str | None:
    value = row.get(key)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _ident(value: Any) -> str | None:
    """An item, sample or judgment id: a string or an integer (never a boolean or a float)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def score_problem(value: Any) -> str | None:
    """Why a score is not a number the gate can compare exactly, or None."""
    if isinstance(value, _TooLong):
        return f"an integer literal of {value.digits} digits, too long to read as a score"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}, not a number"
    if isinstance(value, str):
        return f"the string {json.dumps(value, ensure_ascii=False)[:60]}, not a JSON number"
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r}, not a finite number"
    return f"a JSON {type(value).__name__}, not a number"


def _judgment(row: dict, number: int, shown: str) -> Judgment | BadLine:
    item = _ident(row.get("item"))
    cand, base = _name(row, "candidate"), _name(row, "baseline")
    pair = frozenset((cand, base)) if cand and base else None

    def bad(why: str) -> BadLine:
        return BadLine(number, why, shown, item, pair)

    if item is None or cand is None or base is None:
        missing = [k for k, v in (("item", item), ("candidate", cand), ("baseline", base)) if v is None]
        return bad(
            f"no {', '.join(missing)} (each line needs item, candidate and baseline: a string or an integer item)"
        )
    if cand == base:
        return bad(f"candidate and baseline are both {cand!r}")
    if TIE in (cand.lower(), base.lower()):
        return bad('a side named "tie" cannot be told from a tie')
    failed = _error_of(row.get("error"))
    prefers: str | None = None
    if failed is None:
        verdict = _verdict(row, cand, base)
        if isinstance(verdict, BadLine):
            return bad(verdict.why)
        prefers, failed = verdict
    judge = _name(row, "judge") or _name(row, "judge_model")
    sample = _ident(row.get("sample"))
    order = json.dumps(row["order"], sort_keys=True, default=str) if row.get("order") is not None else None
    jid = _ident(row.get("id"))
    key = None
    if jid is not None:
        key = json.dumps(["id", jid, item])  # an id reused for another item is not the same judgment
    elif sample is not None or order is not None:
        key = json.dumps([item, sorted((cand, base)), judge, sample, order])
    return Judgment(number, item, cand, base, prefers, failed, judge, sample, order, key, shown)


def _error_of(value: Any) -> str | None:
    if value is None or value == "" or value is False:
        return None
    if isinstance(value, str):
        return value.strip()[:SHOWN]
    return json.dumps(value, default=str, ensure_ascii=False)[:SHOWN]


def _verdict(row: dict, cand: str, base: str) -> tuple[str | None, str | None] | BadLine:
    """(the name preferred or "tie", None), or (None, why the judge gave no verdict), or a BadLine."""
    has_winner, has_scores = "winner" in row, row.get("scores") is not None
    winner = row.get("winner")
    by_winner: str | None = None
    if winner is not None:
        if not isinstance(winner, str):
            return BadLine(0, f"winner is a JSON {type(winner).__name__}, not a name", "")
        if winner.strip().lower() == TIE:
            by_winner = TIE
        elif winner.strip() in (cand, base):
            by_winner = winner.strip()
        else:
            return BadLine(0, f'winner {winner[:60]!r} is neither {cand!r}, {base!r} nor "tie"', "")
    by_scores: str | None = None
    if has_scores:
        scores = row["scores"]
        if not isinstance(scores, dict):
            return BadLine(0, f"scores is a JSON {type(scores).__name__}, not an object {{name: number}}", "")
        absent = [n for n in (cand, base) if n not in scores]
        if absent:
            keys = ", ".join(str(k) for k in list(scores)[:6]) or "none"
            return BadLine(
                0,
                f"scores has no {' or '.join(repr(n) for n in absent)} (its keys: {keys}): scores are keyed by the "
                "names in candidate and baseline, never by position",
                "",
            )
        for n in (cand, base):
            why = score_problem(scores[n]) if scores[n] is not None else None
            if why:
                return BadLine(0, f"the score of {n!r} is {why}", "")
        nulls = [n for n in (cand, base) if scores[n] is None]
        if nulls and by_winner is None:
            return None, f"{NO_VERDICT}the judge gave no score for {', '.join(nulls)}"
        if not nulls:
            a, b = scores[cand], scores[base]
            by_scores = cand if a > b else base if b > a else TIE
    if by_winner is not None and by_scores is not None and by_winner != by_scores:
        return BadLine(0, f"winner says {by_winner!r} but the scores say {by_scores!r}: a contradictory record", "")
    if by_winner is not None or by_scores is not None:
        return by_winner or by_scores, None
    if has_winner:
        return None, f"{NO_VERDICT}winner is null and there are no scores"
    return BadLine(0, 'neither winner nor scores (write winner: a name, "tie" or null; or scores: {name: number})', "")


def with_judgments(ev: Evaluation, run_dir: RunDir) -> Evaluation:
    """The run dir's evaluation with its ``judgments.jsonl`` read (none: unchanged); its sha256 joins the
    evidence files of the verdict record."""
    path = run_dir.path / FILE
    if not path.is_file() and not path.is_symlink():
        return ev
    found = read_judgments(path, run_dir.rel(path), run_dir.sizes)
    if found.sha256:
        ev.read[found.source] = found.sha256
    ev.judgments = found
    return ev


NO_JSON = re.compile(
    r"no json|json ?decode|not (?:valid )?json|invalid json|could not parse|failed to parse|unparseable|expecting value",
    re.IGNORECASE,
)


@dataclass
class NoVerdict:
    """The judgments whose judge answered without a verdict the pipeline could read (RH104's evidence)."""

    total: int
    no_json: list[Judgment]  # an error saying the answer was not JSON
    null: list[Judgment]  # winner null and no scores, without an error
    models: set[str]

    @property
    def count(self) -> int:
        return len(self.no_json) + len(self.null)


def no_verdict(found: Judgments) -> NoVerdict:
    failed = [(j, j.failed) for j in found.judgments if j.failed]
    null = [j for j, why in failed if why.startswith(NO_VERDICT)]
    no_json = [j for j, why in failed if not why.startswith(NO_VERDICT) and NO_JSON.search(why)]
    models = {j.judge for j in no_json + null if j.judge}
    return NoVerdict(len(found.judgments), no_json, null, models)
