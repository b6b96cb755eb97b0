"""The session's one gate decision, computed once at the session's end and
read by everything that reports it: the exit code (0 exactly when it is
``promote``), the terminal's gate section, ``<report>.verdict.json``, JUnit,
and the HTML and Markdown reports.

``promote`` needs the statistic to promote (:class:`~.gate.GateDecision`)
and no failed check in the session; any failed check makes it ``block``
with that check named. ``usage-error`` and ``internal-error`` are written
too, so a verdict file is never left over from an earlier session."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.results import write_text
from ..safety.redact import redact
from .gate import RECORD_SCHEMA, SHOW, GateDecision
from .model import Evaluation

USAGE_EXIT = 4


@dataclass
class GateVerdict:
    decision: str  # promote, block, usage-error, internal-error
    reasons: list[dict[str, Any]] = field(default_factory=list)  # what blocks: a check, or the statistic
    statistic: GateDecision | None = None
    message: str = ""  # a usage or internal error, in one line
    evaluations: dict[str, Evaluation] = field(default_factory=dict)
    plugin_version: str = ""
    checks: list[dict[str, str]] = field(default_factory=list)
    invocation: dict[str, Any] = field(default_factory=dict)  # argv, start time: which session wrote the record

    @classmethod
    def of(
        cls,
        statistic: GateDecision | None,
        blockers: list[dict[str, Any]],
        evaluations: dict[str, Evaluation],
        plugin_version: str,
        checks: list[dict[str, str]],
    ) -> GateVerdict:
        reasons = list(blockers)
        if statistic is not None and not statistic.passed and not any(b.get("check") == "RH508" for b in reasons):
            reasons.append(
                {
                    "check": "RH508",
                    "run": None,
                    "verdict": statistic.verdict,
                    "cause": statistic.outcome,
                    "summary": f"the statistic says {statistic.outcome}",
                }
            )
        if statistic is None and not reasons:
            reasons.append(
                {
                    "check": "RH508",
                    "run": None,
                    "verdict": "not-evaluable",
                    "cause": "insufficient-evidence",
                    "summary": "no harvest to judge",
                }
            )
        promote = not reasons and statistic is not None and statistic.passed
        return cls("promote" if promote else "block", reasons, statistic, "", evaluations, plugin_version, checks)

    @classmethod
    def failed(cls, decision: str, message: str, plugin_version: str) -> GateVerdict:
        """A session that could not judge at all: ``usage-error`` or ``internal-error``."""
        if message.lstrip().startswith("usage:") and "error: " in message:  # argparse's usage text, then the error
            message = message.rsplit("error: ", 1)[1]
        return cls(decision, [], None, " ".join(message.split())[:1000], {}, plugin_version)

    @property
    def promote(self) -> bool:
        return self.decision == "promote"

    def exit_code(self, current: int) -> int:
        """0 exactly when the decision is promote."""
        if self.promote:
            return 0
        if self.decision == "usage-error":
            return USAGE_EXIT
        return current if current else 1

    def harvest_sha256(self) -> str | None:
        """One hash over every evidence file read (path and sha256, sorted): two
        records with the same value judged the same bytes."""
        if not self.evaluations:
            return None
        digest = hashlib.sha256()
        for name, ev in sorted(self.evaluations.items()):
            for path, sha in sorted(ev.read.items()):
                digest.update(f"{name}\0{path}\0{sha}\n".encode("utf-8", "surrogateescape"))
        return digest.hexdigest()

    def to_record(self) -> dict[str, Any]:
        stat = self.statistic
        several = len(self.evaluations) > 1
        record = {
            "schema": RECORD_SCHEMA,
            "decision": self.decision,
            "plugin_version": self.plugin_version,
            "message": self.message or None,
            "argv": self.invocation.get("argv"),
            "started_at": self.invocation.get("started_at"),
            "pid": self.invocation.get("pid"),
            "harvest_sha256": self.harvest_sha256(),
            "counts": stat.counts() if stat is not None else None,
            "statistic": stat.gate_record() if stat is not None else None,
            "checks": self.checks,
            "session": stat.to_record() if stat is not None else None,
            "targets": {
                name: {
                    "origin": ev.origin,
                    **(stat.to_record(name if several else None) if stat is not None else {}),
                    "evidence_files": [{"path": p, "sha256": h} for p, h in sorted(ev.read.items())],
                }
                for name, ev in self.evaluations.items()
            },
            "blockers": self.reasons,
        }
        return _redacted(record)

    def lines(self) -> list[str]:
        """The decision block, as the terminal and the reports print it (redacted, one line each)."""
        return [" ".join(redact(line).replace("`", "'").split()) for line in self._lines()]

    def _lines(self) -> list[str]:
        if self.decision in ("usage-error", "internal-error"):
            return [f"{self.decision.upper()}: {self.message}", "no promotion: the gate did not judge"]
        out = []
        stat = self.statistic
        if stat is not None and not stat.no_claim:
            versus = f"against {stat.champion}" if stat.champion else "against the field"
            out.append(f"{stat.candidate} {stat.claim} ({versus}): {stat.rounds_line()}")
            out.append(f"{stat.test.describe()} -> {stat.outcome}")
            against = [r.label for r in stat.contradicting]
            if against:
                more = f" and {len(against) - SHOW} more" if len(against) > SHOW else ""
                out.append(f"{stat.units} contradicting the claim ({len(against)}): {', '.join(against[:SHOW])}{more}")
            out += stat.excluded_lines()
            if stat.outcome in ("claim-not-significant", "claim-unlikely"):
                out.append(stat.more_needed())
            out += stat.notes[:SHOW]
        if self.promote:
            out.append("PROMOTE: the statistic promotes and no check failed")
        else:
            out.append(f"BLOCK: {len(self.reasons)} reason(s):")
            out += [f"- {b['check']} [{b['run']}] {b['verdict']} {b['cause']}: {b['summary']}" for b in self.reasons]
        return out

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_record(), indent=2, default=str, allow_nan=False) + "\n"

    def write(self, path: Path) -> None:
        write_text(path, self.to_json())


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value
