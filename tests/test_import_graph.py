"""The package's own import graph (issues 19 and 37): no cycle, nothing
imports the entry plugin, and every import runs down the layer table of
docs/architecture.md.

Built from the source with ``ast``: every import counts, at the top of a
module, inside a function, or under ``if TYPE_CHECKING:`` (annotations only
at run time, but a reader follows them all the same). A package's
``__init__`` is not counted as imported by its submodules (Python runs it
first, but that is no dependency of the submodule's code)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest_runhealth

PACKAGE = "pytest_runhealth"
ROOT = Path(pytest_runhealth.__file__).parent
ENTRY = f"{PACKAGE}.plugin"
ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"
MAX_LAYERS = 13


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The package modules ``path`` imports, anywhere in its body."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
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


# -- the layer table ---------------------------------------------------------------------------
def _pattern(token: str) -> tuple[re.Pattern[str], bool]:
    """A module column's word as a regex over dotted names, and whether it names one module exactly.
    ``x.py`` is that module, ``x/`` a package and all below it, ``*`` one name (no dot)."""
    token = token.strip()
    if token == "__init__.py":
        return re.compile(re.escape(PACKAGE)), True
    if token.endswith("/"):
        dotted = re.escape(f"{PACKAGE}.{token[:-1].replace('/', '.')}")
        return re.compile(f"{dotted}(\\..+)?"), False
    dotted = token.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    exact = "*" not in dotted
    return re.compile(re.escape(f"{PACKAGE}.{dotted}").replace("\\*", "[^.]*")), exact


def layer_table(text: str) -> list[tuple[str, list[tuple[re.Pattern[str], bool]]]]:
    """(layer, module patterns) per row of the table under "## Layers", top row first."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        words = re.findall(r"`([^`]+)`", cells[1])
        rows.append((cells[0], [_pattern(w) for w in words if w.endswith((".py", "/"))]))
    return rows


def layers_of(graph: dict[str, set[str]], table) -> tuple[dict[str, int], list[str]]:
    """Each module's row (0 is the top), and the modules no row names. A module named exactly wins
    over a pattern; among patterns, the most specific (longest) wins."""
    out: dict[str, int] = {}
    unplaced = []
    for module in sorted(graph):
        best: tuple[int, int, int] | None = None  # (exact, specificity, row)
        for row, (_, patterns) in enumerate(table):
            for pattern, exact in patterns:
                if pattern.fullmatch(module):
                    key = (int(exact), len(pattern.pattern), row)
                    best = key if best is None or key[:2] > best[:2] else best
        if best is None:
            unplaced.append(module)
        else:
            out[module] = best[2]
    return out, unplaced


def upward_imports(graph: dict[str, set[str]], rows: dict[str, int], names: list[str]) -> list[str]:
    return [
        f"{a} ({names[rows[a]]}) -> {b} ({names[rows[b]]})"
        for a in sorted(graph)
        for b in sorted(graph[a])
        if a in rows and b in rows and rows[b] < rows[a]
    ]


def test_every_module_has_a_layer_and_imports_only_down():
    graph = import_graph()
    table = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    assert 5 <= len(table) <= MAX_LAYERS, [name for name, _ in table]
    rows, unplaced = layers_of(graph, table)
    assert unplaced == [], f"add these modules to the layer table of docs/architecture.md: {unplaced}"
    up = upward_imports(graph, rows, [name for name, _ in table])
    assert up == [], "imports that run up the layer table of docs/architecture.md:\n" + "\n".join(up)


def test_the_layer_rule_finds_an_upward_import():
    table = layer_table(
        "## Layers\n| layer | modules | job |\n|---|---|---|\n| top | `a.py` | x |\n| low | `b/` | y |\n"
    )
    graph = {f"{PACKAGE}.a": set(), f"{PACKAGE}.b.c": {f"{PACKAGE}.a"}, f"{PACKAGE}.d": set()}
    rows, unplaced = layers_of(graph, table)
    assert unplaced == [f"{PACKAGE}.d"]
    assert upward_imports(graph, rows, ["top", "low"]) == [f"{PACKAGE}.b.c (low) -> {PACKAGE}.a (top)"]


def test_type_only_and_deferred_imports_count(tmp_path):
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    mod = pkg / "m.py"
    mod.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\ndef f():\n    from . import b\n"
    )
    modules = {f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.m"}
    assert imports_of(mod, modules, pkg) == {f"{PACKAGE}.a", f"{PACKAGE}.b"}


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
    assert f"{PACKAGE}.settings.severity" in graph[f"{PACKAGE}.settings.config"]


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
ABOVE_CHECKS = {
    f"{PACKAGE}.{name}"
    for name in (
        "plugin",
        "plugins.core",
        "engine",
        "engine.collection",
        "engine.report_item",
        "engine.judge_run",
        "engine.call_check",
        "engine.judge_chunk",
        "engine.judge_checks",
        "engine.packs",
        "session",
    )
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

    return (set(SUBPLUGINS) | ABOVE_CHECKS) - {f"{PACKAGE}.checks"}


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


# -- module size -------------------------------------------------------------------------------
MAX_MODULE_LINES = 600  # past it, a module says why at its top ("Longer than 600 lines: ...")
HARD_LIMIT = 800  # past it, no reason will do
REASON = "Longer than 600 lines:"


def oversize_modules(root: Path = ROOT, limit: int = MAX_MODULE_LINES) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        reason = REASON in (ast.get_docstring(ast.parse(text)) or "")
        if n > HARD_LIMIT or (n > limit and not reason):
            out.append(f"{rel}: {n} lines")
    return out


def test_no_module_is_long_without_a_reason():
    """Small modules with one job each (issues 37, 43): a module over 600 lines is split along what it
    computes, or says at its top why it is not; none passes 800."""
    big = oversize_modules()
    assert big == [], f"split these along what they compute, or say why at the top ({REASON}):\n" + "\n".join(big)


def test_the_size_rule_finds_a_long_module(tmp_path):
    (tmp_path / "long.py").write_text("x = 1\n" * 601, encoding="utf-8")
    (tmp_path / "short.py").write_text("x = 1\n" * 600, encoding="utf-8")
    (tmp_path / "said.py").write_text(f'"""{REASON} one table."""\n' + "x = 1\n" * 700, encoding="utf-8")
    (tmp_path / "huge.py").write_text(f'"""{REASON} one table."""\n' + "x = 1\n" * 800, encoding="utf-8")
    assert oversize_modules(tmp_path) == ["huge.py: 801 lines", "long.py: 601 lines"]


# -- no private names across modules (issue 37) -----------------------------------------------
def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``from .x import _name`` of a package module: a name another module relies on is public."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(PACKAGE)):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {alias.name} from {node.module}")
    return out


def test_no_module_imports_another_modules_private_names():
    found = [hit for path in sorted(ROOT.rglob("*.py")) for hit in private_imports(path)]
    assert found == [], "give these a public name where they are defined:\n" + "\n".join(found)


def test_the_private_import_rule_finds_one(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("from .a import _hidden, shown\nfrom re import _parser\nfrom . import __version__\n")
    assert private_imports(mod, tmp_path) == ["m.py:1: _hidden from a"]


# -- no private reach-ins (issue 43) ----------------------------------------------------------
def private_reaches(path: Path, root: Path = ROOT) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self``/``cls``/``super()`` and the module does not itself define
    ``_name`` (as ``self._name = …``, a slot or a class attribute): another module's private state, which
    its public interface should offer instead."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    defined = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
    }
    defined |= {c.value for c in ast.walk(tree) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    defined |= {d.name for d in ast.walk(tree) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
            continue
        if node.attr not in defined:
            out.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_module_reaches_into_another_modules_private_state():
    bad = [hit for path in sorted(ROOT.rglob("*.py")) for hit in private_reaches(path)]
    assert bad == [], "use (or add) a public accessor instead:\n" + "\n".join(bad)


def test_the_private_reach_rule_finds_one(tmp_path):
    (tmp_path / "m.py").write_text("def f(rd):\n    return rd._store.get(1)\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text(
        "class A:\n    def __init__(self):\n        self._x = 1\n\ndef f(a):\n    return a._x\n", encoding="utf-8"
    )
    assert private_reaches(tmp_path / "m.py", tmp_path) == ["m.py:2: rd._store"]
    assert private_reaches(tmp_path / "ok.py", tmp_path) == []


# -- no module-level mutable state (issue 43) -------------------------------------------------
MUTABLE_CALLS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "bytearray"})
MUTATORS = frozenset(
    "append appendleft extend insert update setdefault pop popitem popleft clear add discard remove".split()
)
# Module-level containers a function may change, "path:NAME" -> why it is process state by design (none:
# state lives on the object that owns it, the session, a reader, a client, and is passed down). A value
# made late is a memoised function (``functools.cache``/``lru_cache``): a constant, whatever the session.
ALLOWED_STATE: dict[str, str] = {}


def _mutable_value(node: ast.expr | None) -> bool:
    if isinstance(node, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in MUTABLE_CALLS
    return False


def _module_containers(tree: ast.Module) -> set[str]:
    """Names the module binds to a mutable container at its top level (under ``if``/``try`` too)."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.If, ast.Try)):
            todo += (
                node.body
                + node.orelse
                + getattr(node, "finalbody", [])
                + [s for h in getattr(node, "handlers", []) for s in h.body]
            )
        elif isinstance(node, ast.Assign) and _mutable_value(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _mutable_value(node.value):
            names.add(node.target.id)
    return names


def _changed_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, int]]:
    """Module names ``func`` changes in place: ``NAME[k] = …``, ``del NAME[k]``, ``NAME.append(…)`` and the
    like, leaving out the names it binds itself (a local, a parameter)."""
    args = func.args
    local = {a.arg for a in args.args + args.posonlyargs + args.kwonlyargs}
    local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    local |= {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    out = []
    for node in ast.walk(func):
        target = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            target = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            target = node.func.value
        if isinstance(target, ast.Name) and target.id not in local:
            out.append((target.id, node.lineno))
    return out


def module_state(path: Path, root: Path = ROOT) -> list[str]:
    """A ``global`` statement, or a function that changes a module-level container: state that outlives a
    session and is shared by every session of the process (pytester's in-process ones, the watch's)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    where = path.relative_to(root).as_posix()
    containers = _module_containers(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            out.append(f"{where}:{node.lineno}: global {', '.join(node.names)}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for name, line in _changed_names(node):
                if name in containers and f"{where}:{name}" not in ALLOWED_STATE:
                    out.append(f"{where}:{line}: {name} changed in {node.name}()")
    return sorted(set(out))


def test_no_module_level_mutable_state():
    found = [hit for path in sorted(ROOT.rglob("*.py")) for hit in module_state(path)]
    assert found == [], (
        "keep this state on the object that owns it (the session, a reader, a client) and pass it down, "
        "or make it an immutable constant:\n" + "\n".join(found)
    )


def test_the_state_rule_finds_a_global_and_a_changed_cache(tmp_path):
    (tmp_path / "g.py").write_text("BUDGET = 1.0\n\ndef lower(x):\n    global BUDGET\n    BUDGET = x\n")
    (tmp_path / "c.py").write_text(
        "_CACHE: dict = {}\nSEEN = set()\n\ndef get(k):\n    _CACHE[k] = 1\n    SEEN.add(k)\n    return _CACHE[k]\n"
    )
    (tmp_path / "ok.py").write_text(
        "TABLE = {'a': 1}\nTABLE['b'] = 2\n\ndef read(TABLE=None):\n    TABLE = {} if TABLE is None else TABLE\n"
        "    TABLE['c'] = 3\n    return TABLE\n\nclass Scanner:\n    def __init__(self):\n        self.cache = {}\n"
        "    def get(self, k):\n        self.cache[k] = 1\n"
    )
    assert module_state(tmp_path / "g.py", tmp_path) == ["g.py:4: global BUDGET"]
    assert module_state(tmp_path / "c.py", tmp_path) == [
        "c.py:5: _CACHE changed in get()",
        "c.py:6: SEEN changed in get()",
    ]
    assert module_state(tmp_path / "ok.py", tmp_path) == []


# -- --run-dir read in one place (issue 43) ---------------------------------------------------
RUN_DIR_READER = "settings/run_dir_option.py"


def run_dir_reads(path: Path, root: Path = ROOT) -> list[str]:
    """``config.getoption("runhealth_run_dirs")``, ``getini(...)`` or ``getattr(ns, "runhealth_run_dirs")``
    outside the one reader (``run_dir_option.run_dirs_of``): a second reading of the option."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("getoption", "getini", "getattr") and any(
            isinstance(a, ast.Constant) and a.value == "runhealth_run_dirs" for a in node.args
        ):
            out.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_run_dir_option_is_read_in_one_place():
    found = [hit for path in sorted(ROOT.rglob("*.py")) for hit in run_dir_reads(path) if RUN_DIR_READER not in hit]
    assert found == [], "ask run_dir_option.run_dirs_of(config) instead:\n" + "\n".join(found)
    assert run_dir_reads(ROOT / RUN_DIR_READER)  # the near miss: the reader itself is found


def test_the_run_dir_rule_finds_a_second_reader(tmp_path):
    (tmp_path / "m.py").write_text(
        "def f(config):\n    return config.getoption('runhealth_run_dirs') or config.getini('runhealth_run_dirs')\n"
        "def g(config):\n    return config.getoption('runhealth_report')\n"
    )
    assert [hit.split(": ")[0] for hit in run_dir_reads(tmp_path / "m.py", tmp_path)] == ["m.py:2", "m.py:2"]


# -- the garbage collector switched in one place (issue 43) -----------------------------------
GC_SWITCHES = frozenset({"disable", "enable", "freeze", "unfreeze", "set_threshold"})
GC_PLACE = "safety/collector.py"


def gc_switches(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        f"{path.relative_to(root).as_posix()}:{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "gc"
        and node.func.attr in GC_SWITCHES
    ]


def test_the_garbage_collector_is_switched_in_one_place():
    found = [hit for path in sorted(ROOT.rglob("*.py")) for hit in gc_switches(path) if not hit.startswith(GC_PLACE)]
    assert found == [], f"ask {GC_PLACE} (building_kept_objects, keep_for_the_session) instead:\n" + "\n".join(found)
    assert gc_switches(ROOT / GC_PLACE)  # the near miss: the one place is found


def test_building_kept_objects_restores_the_collector():
    import gc

    from pytest_runhealth.safety.collector import building_kept_objects

    assert gc.isenabled()
    with building_kept_objects():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with building_kept_objects():
            pass
        assert not gc.isenabled()  # a caller's own pause is left as it was
    finally:
        gc.enable()
