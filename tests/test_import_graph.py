"""The package's own import graph (issue 19): no cycle, and nothing imports
the entry plugin.

Built from the source with ``ast``: imports at the top of a module and inside
functions alike (a deferred import is still an edge), but not those under
``if TYPE_CHECKING:`` (annotations only, never executed). A package's
``__init__`` is not counted as imported by its submodules (Python runs it
first, but that is no dependency of the submodule's code)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_runhealth

PACKAGE = "pytest_runhealth"
ROOT = Path(pytest_runhealth.__file__).parent
ENTRY = f"{PACKAGE}.plugin"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports, anywhere in its body."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking_only(node):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                out.add(full if full in modules else source)  # ``from . import severity`` is the module
    return {m for m in out if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) for p in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_is_read():
    graph = import_graph()
    assert f"{PACKAGE}.session" in graph[ENTRY]
    assert f"{PACKAGE}.severity" in graph[f"{PACKAGE}.config"]


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_nothing_imports_the_entry_plugin():
    importers = sorted(name for name, deps in import_graph().items() if ENTRY in deps)
    assert importers == [], f"{ENTRY} is the top of the package; these import it: {importers}"


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# -- checks read through ctx (issue 24) ----------------------------------------------------------
# What a check may not reach, even through a module it imports: the sub-plugins (their state is offered
# on ``ctx``: ``ctx.facts``, ``ctx.live``, ``ctx.evaluation``), the engine and session hooks above them,
# and the session module (``ctx.session``, ``ctx.settings`` and ``ctx.config`` hand it down).
# ``printable`` is a sub-plugin only for its one hook; its function is a leaf every finding uses.
ABOVE_CHECKS = {
    f"{PACKAGE}.{name}" for name in ("plugin", "core", "collection", "judging", "evaluate", "batch", "session", "packs")
}
GATEWAY = f"{PACKAGE}.context"  # the one module that imports them for a check, when the check asks


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def _forbidden_for_checks() -> set[str]:
    from pytest_runhealth.plugin import SUBPLUGINS

    return (set(SUBPLUGINS) | ABOVE_CHECKS) - {f"{PACKAGE}.printable", f"{PACKAGE}.checks"}


def check_reaches(graph: dict[str, set[str]], forbidden: set[str]) -> list[str]:
    """Each (checks module -> imported module -> forbidden module it reaches) outside the gateway."""
    out = []
    for module in sorted(m for m in graph if m.startswith(f"{PACKAGE}.checks")):
        for dep in sorted(graph[module]):
            if dep == GATEWAY or dep.startswith(f"{PACKAGE}.checks"):
                continue
            reached = ({dep} | _closure(graph, dep)) & forbidden
            if reached:
                out.append(f"{module} -> {dep} (reaches {', '.join(sorted(reached))})")
    return out


def test_checks_import_only_leaves():
    bad = check_reaches(import_graph(), _forbidden_for_checks())
    assert bad == [], "a check reads the session and the sub-plugins through ctx, not by import:\n" + "\n".join(bad)


def test_the_checks_rule_finds_a_reach():
    graph = {
        f"{PACKAGE}.checks.x": {f"{PACKAGE}.helper", GATEWAY},
        f"{PACKAGE}.helper": {f"{PACKAGE}.status"},
        GATEWAY: {f"{PACKAGE}.status"},
    }
    assert check_reaches(graph, {f"{PACKAGE}.status"}) == [
        f"{PACKAGE}.checks.x -> {PACKAGE}.helper (reaches {PACKAGE}.status)"
    ]
