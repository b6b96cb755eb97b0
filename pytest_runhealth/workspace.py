"""A trainer workspace's config.yaml (LTX-2 style, FORMATS.md §2), read once
and addressed by dotted keys (``model.load_checkpoint``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .safeio import open_readonly

MAX_CONFIG_BYTES = 4 << 20
_MISSING = object()


class WorkspaceConfig:
    def __init__(self, path: Path, data: dict[str, Any] | None, error: str | None = None) -> None:
        self.path = path
        self.data = data or {}
        self.error = error

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def has(self, dotted: str) -> bool:
        return self.get(dotted, _MISSING) is not _MISSING

    def resolve_path(self, value: str) -> Path:
        """A path from the config; relative ones resolve against the config's folder."""
        p = Path(str(value)).expanduser()
        return p if p.is_absolute() else (self.path.parent / p)


def read_workspace_config(path: Path) -> WorkspaceConfig:
    import yaml

    try:
        with open_readonly(path) as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        return WorkspaceConfig(path, None, f"cannot read {path.name}: {exc.strerror or exc}")
    if len(raw) > MAX_CONFIG_BYTES:
        return WorkspaceConfig(path, None, f"{path.name} is over {MAX_CONFIG_BYTES >> 20} MiB; not a config file")
    try:
        data = yaml.safe_load(raw.decode("utf-8", "replace"))
    except (yaml.YAMLError, RecursionError) as exc:
        return WorkspaceConfig(path, None, f"{path.name} is not valid YAML: {str(exc)[:200]}")
    if data is not None and not isinstance(data, dict):
        return WorkspaceConfig(path, None, f"{path.name} holds a {type(data).__name__}, not a mapping")
    return WorkspaceConfig(path, data)
