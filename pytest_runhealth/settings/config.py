"""runhealth.yaml: thresholds and settings, validated with jsonschema so a
mistyped key is reported with its path instead of being silently ignored."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.registry import Registry
from ..safety.safeio import FirstSizes, open_readonly
from . import severity, waivers

# Sections other features own; each validates its own content.
SECTIONS: dict[str, dict] = {
    "thresholds": {"type": "object"},
    "rules": {"type": "array"},
    "waivers": {"type": "array"},
    "severity": {"type": "object"},
    "eval": {"type": "object"},
    "lmstudio": {"type": "object"},
    "gate": {"type": "object"},
}


MAX_CONFIG_BYTES = 1 << 20


def _non_finite(value: Any, where: str = "(top level)") -> tuple[str, float] | None:
    """Where the first NaN or infinity (.nan, .inf, 1e400) is, and which: a
    threshold that compares False with everything switches a check off."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        found = _non_finite(inner, str(key) if where == "(top level)" else f"{where}.{key}")
        if found:
            return found
    return None


class ConfigError(Exception):
    pass


@dataclass
class RunHealthConfig:
    path: Path | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def thresholds_for(self, spec) -> dict[str, Any]:
        merged = dict(spec.thresholds)
        merged.update((self.data.get("thresholds") or {}).get(spec.id) or {})
        return merged

    def section(self, name: str) -> dict | list:
        return self.data.get(name) or ({} if SECTIONS.get(name, {}).get("type") == "object" else [])


def _type_of(value: Any) -> list[str]:
    if isinstance(value, bool):
        return ["boolean"]
    if isinstance(value, (int, float)):
        return ["number"]
    if isinstance(value, str):
        return ["string"]
    if isinstance(value, list):
        return ["array"]
    if isinstance(value, dict):
        return ["object"]
    return ["string", "number", "boolean", "array", "object", "null"]


def schema_for(registry: Registry) -> dict:
    per_check = {
        spec.id: {
            "type": "object",
            "additionalProperties": False,
            "properties": {key: {"type": _type_of(default) + ["null"]} for key, default in spec.thresholds.items()},
        }
        for spec in registry
    }
    sections = dict(SECTIONS)
    sections["thresholds"] = {"type": "object", "additionalProperties": False, "properties": per_check}
    return {"type": "object", "additionalProperties": False, "properties": sections}


def read_config_data(path: Path) -> Any:
    """The parsed YAML of a runhealth.yaml, read capped through safeio, or a
    ConfigError saying why there is none (the rules reader shares it)."""
    import yaml

    from ..safety import yamlsafe  # imports yaml: only when a runhealth.yaml is read

    try:
        with open_readonly(path) as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"runhealth config {path} is over {MAX_CONFIG_BYTES >> 10} KiB: not a config file")
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read runhealth config {path}: {exc}") from None
    try:
        data = yamlsafe.load(text)  # aliases bounded: a bomb or a self-reference is refused while loading
    except yamlsafe.YAMLBomb as exc:
        raise ConfigError(f"runhealth config {path} is refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"runhealth config {path} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"runhealth config {path} is nested too deeply to be a config file") from None
    return data


def described(path: Path | None, sizes: FirstSizes | None = None) -> str:
    """The config a session uses, as its header names it: the path and the
    first 12 hex digits of the file's sha256 (what was read, so a config
    planted in the folder one stands in is seen, and two sessions can be
    told apart), or that there is none."""
    if path is None:
        return "config: none (no runhealth.yaml given or found)"
    import hashlib

    try:
        with open_readonly(path, sizes=sizes) as fh:
            digest = hashlib.sha256(fh.read(MAX_CONFIG_BYTES + 1)).hexdigest()[:12]
    except OSError as exc:
        return f"config: {path} (unreadable: {exc.strerror or exc})"
    return f"config: {Path(path).absolute()} (sha256 {digest})"


def load_config(path: Path | None, registry: Registry) -> RunHealthConfig:
    if path is None:
        return RunHealthConfig()
    data = read_config_data(path)
    if data is None:
        data = {}
    bad = _non_finite(data)
    if bad:
        raise ConfigError(f"runhealth config {path} is invalid:\n  {bad[0]}: {bad[1]} is not a finite number")
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema_for(registry))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors[:10]:
            where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
            if err.validator == "additionalProperties":
                extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
                known = ", ".join(sorted(err.schema.get("properties", {}))) or "none"
                lines.append(f"{where}: unknown key(s) {', '.join(map(str, extra))} (known: {known})")
            else:
                lines.append(f"{where}: {err.message}")
        raise ConfigError(f"runhealth config {path} is invalid:\n  " + "\n  ".join(lines))
    # each section's own validation, naming the entry and the field
    lines = waivers.problems(data.get("waivers")) + severity.problems(data.get("severity"), registry)
    if lines:
        raise ConfigError(f"runhealth config {path} is invalid:\n  " + "\n  ".join(lines))
    return RunHealthConfig(Path(path), data)
