"""runhealth.yaml: thresholds and settings, validated with jsonschema so a
mistyped key is reported with its path instead of being silently ignored."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .registry import Registry

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


def load_config(path: Path | None, registry: Registry) -> RunHealthConfig:
    if path is None:
        return RunHealthConfig()
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read runhealth config {path}: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"runhealth config {path} is not valid YAML: {exc}") from None
    if data is None:
        data = {}
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
    from . import severity, waivers  # each section's own validation, naming the entry and the field

    lines = waivers.problems(data.get("waivers")) + severity.problems(data.get("severity"), registry)
    if lines:
        raise ConfigError(f"runhealth config {path} is invalid:\n  " + "\n  ".join(lines))
    return RunHealthConfig(Path(path), data)
