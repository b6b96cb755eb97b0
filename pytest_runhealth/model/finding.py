"""The diagnosis a check hands back: typed, so the terminal, the JSON report and
other tools all read the same fields instead of parsing a message."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..safety.redact import redact
from ..safety.shown import name as shown_name
from ..safety.shown import one_line, printable

VERDICTS = ("infra", "config", "policy", "healthy", "not-evaluable")

# Evidence lines are quotes, not dumps: a 50 MB line must not reach a terminal.
MAX_QUOTE = 240


@dataclass(frozen=True)
class Evidence:
    """One pointer into an artefact: where, which line (1-based, None for a
    whole file or an API answer), and the quoted text, already redacted."""

    path: str
    line: int | None = None
    text: str = ""

    def __post_init__(self) -> None:
        # However it was built, a quote is redacted and bounded before anyone sees it.
        text = self.text.decode("utf-8", "replace") if isinstance(self.text, bytes) else str(self.text)
        # One line: a newline inside a quoted key ('"loss\\nall checks passed": NaN') starts no line of its own.
        text = printable(redact(text.replace("\r", " ").strip())).replace("\n", "\\n")
        if len(text) > MAX_QUOTE:
            text = text[: MAX_QUOTE - 1] + "…"
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "path", one_line(str(self.path)))  # a name: a newline in it forges no line

    @classmethod
    def quote(cls, path: str | Path, line: int | None, text: str | bytes) -> Evidence:
        return cls(str(path), line, text)  # type: ignore[arg-type]

    def render(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where} {self.text}".rstrip()

    def to_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "text": self.text}


@dataclass
class Finding:
    """What a check concluded about one target.

    ``verdict == "healthy"`` is a pass; ``note`` then says what was worth
    saying (RH106: "one stop event at 14:02, not 9 failures")."""

    check: str
    run: str
    verdict: str
    cause: str | None = None
    summary: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    fix: str = ""
    note: str = ""
    slug: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        self.summary = printable(redact(self.summary))
        self.note = printable(redact(self.note))
        self.fix = _clean_fix(self.fix)
        self.run = shown_name(self.run)

    @property
    def passed(self) -> bool:
        return self.verdict == "healthy"

    def render(self) -> str:
        head = f"{self.check} {self.slug} [{self.run}]   verdict: {self.verdict}"
        if self.cause:
            head += f"   cause: {self.cause}"
        lines = [head]
        lines += ["  " + line for line in self.summary.splitlines() if line.strip()]
        if self.evidence:
            lines.append("  evidence:")
            lines += ["    " + ev.render() for ev in self.evidence]
        if self.fix:
            lines.append(f"  fix: {self.fix}")
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "check": self.check,
            "slug": self.slug,
            "run": self.run,
            "verdict": self.verdict,
            "cause": self.cause,
            "summary": self.summary,
            "evidence": [ev.to_dict() for ev in self.evidence],
            "fix": self.fix,
            "note": self.note,
        }


@lru_cache(maxsize=512)
def _clean_fix(text: str) -> str:
    """Fix texts repeat (most are a check's own): redacted once each, not once per failing run."""
    return printable(redact(text))
