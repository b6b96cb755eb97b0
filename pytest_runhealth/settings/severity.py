"""Severity: how much a failing check counts, per check, ID prefix or family.

``error`` (the default) fails the test; ``warn`` is observe mode: the finding
becomes a pytest warning in the summary and a ``warned`` outcome in the JSON
report, and the exit code is unaffected, so a new rule can be watched before
it gates; ``off`` deselects the check::

    severity:
      RH108: warn        # one check
      ACME: warn         # every check of a pack (its ID prefix)
      trainer: off       # a family

The most specific key wins: check ID, then the longest ID prefix, then the
family, then the severity the check declares, then ``error``. This module also
settles a failure before it is reported: waived (xfail), warned, or failed.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from ..model.registry import SEVERITIES, spec_of
from . import waivers

WAIVED = pytest.StashKey[dict]()
WARNED = pytest.StashKey[bool]()


class RunHealthWarning(pytest.PytestWarning):
    """A failing check whose severity is ``warn`` (observe mode)."""


def level_name(value: Any) -> Any:
    """YAML 1.1 reads a bare ``off`` as False; that is what the user meant."""
    return "off" if value is False else value


def problems(section: Any, registry) -> list[str]:
    """Everything wrong with the ``severity:`` section: values outside
    error/warn/off, and keys that name no check, ID prefix or family."""
    if section is None:
        return []
    if not isinstance(section, dict):
        return [f"severity: must be a mapping of check ID, ID prefix or family to {'/'.join(SEVERITIES)}"]
    specs = list(registry)
    families = sorted({s.family for s in specs})
    out = []
    for key, level in section.items():
        key, level = str(key), level_name(level)
        if level not in SEVERITIES:
            out.append(f"severity.{key}: {level!r} is not one of {', '.join(SEVERITIES)}")
        if not (key in families or any(s.id.startswith(key) for s in specs)):
            out.append(f"severity.{key}: names no check, ID prefix or family (families: {', '.join(families)})")
    return out


def level_of(spec, section: dict[str, str]) -> str:
    if spec.id in section:
        return section[spec.id]
    prefixes = [k for k in section if spec.id.startswith(k)]
    if prefixes:
        return section[max(prefixes, key=len)]
    if spec.family in section:
        return section[spec.family]
    return spec.severity or "error"


class Policy:
    """The session's severity and waivers, parsed once from runhealth.yaml."""

    def __init__(self, settings) -> None:
        self.levels: dict[str, str] = {str(k): level_name(v) for k, v in (settings.section("severity") or {}).items()}
        self.waivers = waivers.parse(settings.section("waivers"))

    def level(self, spec) -> str:
        return level_of(spec, self.levels)


def waiver_of(pol: Policy, spec, target) -> waivers.Waiver | None:
    """The waiver (live, else expired) that names this check on this target."""
    return waivers.waiver_for(pol.waivers, spec.id, tuple(dict.fromkeys((target.name, target.label))))


def settle(item: pytest.Item, spec, target, finding, pol: Policy) -> bool:
    """Decide what a failing finding does to the test. Raises xfail when a
    live waiver covers it; returns True when it is only a warning; returns
    False when it fails (an expired waiver adds why it no longer applies)."""
    waiver = waiver_of(pol, spec, target)
    if waiver is not None:
        item.stash[WAIVED] = waiver.to_dict()
        if not waiver.expired():
            pytest.xfail(f"waived by {waiver.owner} until {waiver.expires.isoformat()}: {waiver.reason}")
        finding.summary += (
            f"\nThe waiver for this failure expired on {waiver.expires.isoformat()} ({waiver.label}: "
            f"{waiver.reason}); fix the cause, or renew the waiver with a new date and a reason."
        )
        return False
    if pol.level(spec) != "warn":
        return False
    item.stash[WARNED] = True
    try:
        # Attributed to the check, not to this line: the summary shows "<ACME102>:0: RunHealthWarning: ...".
        warnings.warn_explicit(RunHealthWarning(finding.render()), RunHealthWarning, f"<{spec.id}>", 0)
    except RunHealthWarning:  # -W error: the warning is an error, reported as the failure itself
        return False
    return True


def disposition(item: pytest.Item) -> dict[str, Any]:
    """What the JSON report adds for a settled failure."""
    out: dict[str, Any] = {}
    if WAIVED in item.stash:
        out["waived"] = item.stash[WAIVED]
    if item.stash.get(WARNED, False):
        out["warned"] = True
    return out


def deselect_off(policy: Policy, items: list[pytest.Item]) -> list[pytest.Item]:
    """The items of checks whose severity is ``off``: not run at all."""
    return [item for item in items if (spec := spec_of(item)) is not None and policy.level(spec) == "off"]
