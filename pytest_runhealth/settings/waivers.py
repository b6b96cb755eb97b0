"""Waivers: a known failure, accepted for a while, by someone, for a reason.

A waived failure is reported as xfail with the reason, so it stays visible
without failing the session; a waiver past its date no longer waives (the
failure fails and says so), and a waiver that matched nothing is listed at
the end, so stale exclusions do not pile up and hide new problems::

    waivers:
      - check: RH101          # a check ID, or an ID prefix (RH1, ACME)
        runs: "cur-*"         # glob on run names; default every run
        reason: "judge VRAM leak, LM Studio ticket 1234"
        owner: alice
        expires: 2026-03-31   # the last day it applies
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import date
from typing import Any

from ..model.registry import ID_OR_PREFIX

WAIVER_KEYS = ("check", "runs", "reason", "owner", "expires")


@dataclass(frozen=True)
class Waiver:
    index: int
    check: str
    runs: str
    reason: str
    owner: str
    expires: date

    def covers(self, check_id: str, run_names: tuple[str, ...]) -> bool:
        return check_id.startswith(self.check) and any(fnmatch.fnmatchcase(n, self.runs) for n in run_names)

    def expired(self, today: date | None = None) -> bool:
        return (today or date.today()) > self.expires

    @property
    def label(self) -> str:
        runs = "" if self.runs == "*" else f" runs={self.runs}"
        return f"waivers[{self.index}] {self.check}{runs} (owner {self.owner}, until {self.expires.isoformat()})"

    def to_dict(self, today: date | None = None) -> dict[str, Any]:
        return {
            "index": self.index,
            "check": self.check,
            "runs": self.runs,
            "reason": self.reason,
            "owner": self.owner,
            "expires": self.expires.isoformat(),
            "expired": self.expired(today),
        }


def _as_date(value: Any) -> date | None:
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def problems(section: Any) -> list[str]:
    """Everything wrong with the ``waivers:`` section, each naming the waiver and field."""
    if section is None:
        return []
    if not isinstance(section, list):
        return [f"waivers: must be a list of waivers, not {type(section).__name__}"]
    out = []
    for i, raw in enumerate(section):
        who = f"waivers[{i}]"
        if not isinstance(raw, dict):
            out.append(f"{who}: must be a mapping with {', '.join(WAIVER_KEYS)}")
            continue
        out += [
            f"{who}: field '{k}': unknown key; known: {', '.join(WAIVER_KEYS)}" for k in raw if k not in WAIVER_KEYS
        ]
        out += [f"{who}: field '{k}': required" for k in ("check", "reason", "owner", "expires") if k not in raw]
        if "check" in raw and not (isinstance(raw["check"], str) and ID_OR_PREFIX.match(raw["check"])):
            out.append(f"{who}: field 'check': {raw['check']!r} must be a check ID or an ID prefix (RH101, RH1, ACME)")
        for key in ("reason", "owner", "runs"):
            if key in raw and not (isinstance(raw[key], str) and raw[key].strip()):
                out.append(f"{who}: field '{key}': must be a non-empty string")
        if "expires" in raw and _as_date(raw["expires"]) is None:
            out.append(f"{who}: field 'expires': {raw['expires']!r} is not a date (YYYY-MM-DD)")
    return out


def parse(section: Any) -> list[Waiver]:
    """The waivers of a section :func:`problems` found nothing wrong with."""
    return [
        Waiver(
            i,
            raw["check"],
            raw.get("runs", "*"),
            raw["reason"].strip(),
            str(raw["owner"]).strip(),
            _as_date(raw["expires"]),  # type: ignore[arg-type]  # problems() refused a bad date
        )
        for i, raw in enumerate(section or [])
    ]


def waiver_for(waivers: list[Waiver], check_id: str, run_names: tuple[str, ...]) -> Waiver | None:
    """The waiver that applies: a live one if any matches, else an expired
    one (so the failure can say its waiver ran out)."""
    matching = [w for w in waivers if w.covers(check_id, run_names)]
    live = [w for w in matching if not w.expired()]
    return (live or matching or [None])[0]  # type: ignore[list-item]
