"""YAML loaded with its aliases bounded: a config or workspace file is small
data, never a bomb.

``yaml.safe_load`` shares an aliased node instead of copying it, so a
342-byte "billion laughs" file loads fast -- and then every walk over the
result (validation, lookups, reports) visits 10^9 nodes; a self-referencing
anchor (``a: &x [*x]``) gives a structure that contains itself, and every walk
recurses until RecursionError. Here, while the document is composed, each
node's expanded size is counted (an alias counts the whole node it repeats)
and an alias to a node still being composed is refused."""

from __future__ import annotations

from typing import Any

import yaml

MAX_EXPANDED_NODES = 100_000  # a real runhealth.yaml or workspace config has a few hundred


class YAMLBomb(yaml.YAMLError):
    """The document refers to itself, or its aliases expand past the bound."""


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded = 0
        self._weight: dict[int, int] = {}  # id(node) -> nodes it stands for, aliases expanded
        self._open: list[str] = []  # anchors of the collections being composed

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                raise YAMLBomb(f"the alias *{event.anchor} refers to a node that contains it")
            node = super().compose_node(parent, index)
            self._count(self._weight.get(id(node), 1))
            return node
        before = self._expanded
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open.append(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            if anchor is not None:
                self._open.pop()
        self._count(1)
        self._weight[id(node)] = self._expanded - before
        return node

    def _count(self, nodes: int) -> None:
        self._expanded += nodes
        if self._expanded > MAX_EXPANDED_NODES:
            raise YAMLBomb(f"its aliases expand past {MAX_EXPANDED_NODES:,} nodes (a YAML bomb?)")


MAX_INT_DIGITS = 40  # as reading.MAX_INT_DIGITS: a longer integer is read as a float, never int()'d


def _int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    """A YAML integer; one of more than 40 digits is a float (infinite when huge), as the reader contract
    reads JSON (``int()`` of more than 4,300 digits raises: a number in a file is data, never an exception)."""
    digits = str(node.value).replace("_", "")
    if len(digits.lstrip("+-")) > MAX_INT_DIGITS and digits.lstrip("+-").isdigit():
        return float(digits)
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:  # a sexagesimal or other form with a part too long for int()
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer too long to read ({len(digits):,} characters)", node.start_mark
        ) from None


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _int)


def load(text: str) -> Any:
    """``yaml.safe_load`` with aliases bounded; raises ``YAMLBomb`` (a
    ``yaml.YAMLError``) for a self-reference or an expansion past the bound."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
