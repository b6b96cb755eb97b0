"""A trainer workspace's config.yaml (LTX-2 style: Lightricks/LTX-2
packages/ltx-trainer/src/ltx_trainer/config.py), read once
and addressed by dotted keys (``model.load_checkpoint``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..safety import yamlsafe
from ..safety.safeio import FirstSizes, open_readonly

MAX_CONFIG_BYTES = 4 << 20
_MISSING = object()


class WorkspaceConfig:
    def __init__(self, path: Path, data: dict[str, Any] | None, error: str | None = None, text: str = "") -> None:
        self.path = path
        self.data = data or {}
        self.error = error
        self.text = text
        self._lines: dict[str, int] | None = None

    def line_of(self, dotted: str) -> int | None:
        """1-based line of a key (``model.text_encoder_path``, list items as
        ``validation.samples.0``), so evidence can point at config.yaml:N."""
        if self._lines is None:
            self._lines = _key_lines(self.text)
        return self._lines.get(dotted)

    def source_line(self, line: int | None) -> str:
        if not line:
            return ""
        lines = self.text.splitlines()
        return lines[line - 1] if 0 < line <= len(lines) else ""

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


def read_workspace_config(path: Path, sizes: FirstSizes | None = None) -> WorkspaceConfig:
    import yaml

    try:
        with open_readonly(path, sizes=sizes) as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        return WorkspaceConfig(path, None, f"cannot read {path.name}: {exc.strerror or exc}")
    if len(raw) > MAX_CONFIG_BYTES:
        return WorkspaceConfig(path, None, f"{path.name} is over {MAX_CONFIG_BYTES >> 20} MiB; not a config file")
    try:
        text = raw.decode("utf-8", "replace")
        data = yamlsafe.load(text)  # a bomb or a self-reference becomes this finding, not a hang
    except (yaml.YAMLError, RecursionError) as exc:
        return WorkspaceConfig(path, None, f"{path.name} is not valid YAML: {str(exc)[:200]}")
    if data is not None and not isinstance(data, dict):
        return WorkspaceConfig(path, None, f"{path.name} holds a {type(data).__name__}, not a mapping")
    return WorkspaceConfig(path, data, text=text)


def _key_lines(text: str) -> dict[str, int]:
    import yaml

    try:
        root = yaml.compose(text)
    except (yaml.YAMLError, RecursionError):
        return {}
    out: dict[str, int] = {}
    seen: set[int] = set()  # aliases may make the node graph cyclic
    stack = [("", root)]
    while stack:
        prefix, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            children = [(str(k.value), k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
        elif isinstance(node, yaml.SequenceNode):
            children = [(str(i), v, v) for i, v in enumerate(node.value)]
        else:
            continue
        for name, key_node, value in children:
            dotted = f"{prefix}.{name}" if prefix else name
            out.setdefault(dotted, key_node.start_mark.line + 1)
            stack.append((dotted, value))
    return out
