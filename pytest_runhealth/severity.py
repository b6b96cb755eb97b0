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

from .registry import SEVERITIES

WAIVED = pytest.StashKey[dict]()
WARNED = pytest.StashKey[bool]()
_POLICY = pytest.StashKey["Policy"]()


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
        from . import waivers

        self.levels: dict[str, str] = {str(k): level_name(v) for k, v in (settings.section("severity") or {}).items()}
        self.waivers = waivers.parse(settings.section("waivers"))

    def level(self, spec) -> str:
        return level_of(spec, self.levels)


def policy(config: pytest.Config) -> Policy:
    if _POLICY not in config.stash:
        from .plugin import STATE

        config.stash[_POLICY] = Policy(config.stash[STATE].settings)
    return config.stash[_POLICY]


def settle(item: pytest.Item, spec, target, finding) -> bool:
    """Decide what a failing finding does to the test. Raises xfail when a
    live waiver covers it; returns True when it is only a warning; returns
    False when it fails (an expired waiver adds why it no longer applies)."""
    from . import waivers

    pol = policy(item.config)
    names = tuple(dict.fromkeys((target.name, target.label)))
    waiver = waivers.waiver_for(pol.waivers, spec.id, names)
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


# -- severity off: not collected (this module is a sub-plugin) ---------------------------
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    from .plugin import STATE

    if STATE not in config.stash:
        return
    pol = policy(config)
    keep, off = [], []
    for item in items:
        spec = getattr(getattr(item, "function", None), "_runhealth_check", None)
        (off if spec is not None and pol.level(spec) == "off" else keep).append(item)
    if off:
        config.hook.pytest_deselected(items=off)
        items[:] = keep
