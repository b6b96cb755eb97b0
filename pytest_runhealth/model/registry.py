"""Checks are declared with a decorator and collected into one registry per
pytest session, so built-ins, conftest checks and installed packs share the
same IDs, documentation and test generation."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .needs import NEEDS

if TYPE_CHECKING:  # annotations only: a conftest that declares a check does not import the kinds' module
    from .runkinds import RunKind

BUILTIN_PREFIX = "RH"
BUILTIN_OWNER = "pytest-runhealth"
# The one grammar of check IDs: an ID prefix (a capital letter, then at most 9
# capitals or digits) and 3-4 digits (RH101, ACME0042). A prefix a pack
# registers is letters only. rules.py validates a rule's ``id`` with
# ID_PATTERN, waivers.py a waiver's ``check`` (an ID or an ID prefix) with
# ID_OR_PREFIX.
ID_PATTERN = r"^(?P<prefix>[A-Z][A-Z0-9]{0,9}?)(?P<num>\d{3,4})$"
CHECK_ID = re.compile(ID_PATTERN)
PREFIX = re.compile(r"^[A-Z][A-Z]{0,9}$")
ID_OR_PREFIX = re.compile(r"^[A-Z][A-Z0-9]{0,9}\d{0,4}$")
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

FAMILIES = {
    "0": "evidence",
    "1": "sweep",
    "2": "trainer",
    "3": "gpu",
    "4": "lmstudio",
    "5": "eval",
}
PHASES = ("prelaunch", "live", "postmortem", "gate")
SCOPES = ("session", "run")
SEVERITIES = ("error", "warn", "off")
SPEC_ATTR = "_runhealth_spec"


class RegistryError(Exception):
    """A check that cannot be registered; the message names the owners."""


@dataclass
class CheckSpec:
    """Everything known about one check before it runs.

    ``needs`` names artefacts (``ledger``, ``logs``, ``tfevents``,
    ``checkpoints``, ``config``, ``harvest``, ``pidfile``); a target lacking
    one is skipped with the reason. ``scope`` is ``session`` for one test per
    run dir, ``run`` for one test per run inside it."""

    id: str
    slug: str
    func: Callable[..., Any]
    family: str = ""
    needs: tuple[str, ...] = ()
    scope: str = "run"
    phases: tuple[str, ...] = ("postmortem",)
    verdicts: tuple[str, ...] = ()
    layouts: tuple[str, ...] = ()
    thresholds: dict[str, Any] = field(default_factory=dict)
    detects: str = ""
    why: str = ""
    example: str = ""
    fix: str = ""
    owner: str = ""
    severity: str = "error"  # error | warn (observe mode) | off; runhealth.yaml's severity: overrides
    # Optional, for a run-scope check that reads only its run's ledger row: ``quiet_row(row, thresholds)`` is
    # True only where the check would return None (a plain pass) for that row, and raises nothing the check
    # would not. A chunk of a big sweep (engine/judge_chunk.py) then calls the check only on the other rows.
    quiet_row: Callable[[Any, dict[str, Any]], bool] | None = None
    # With ``quiet_row``, optional: ``loud_rows(run_dir)``, the indices (ascending) of the ledger rows that
    # ``quiet_row`` may not pass, read from a pass over the ledger shared by the checks (sweepfacts.LedgerFacts);
    # ``quiet_row`` holds on every other row, so a chunk asks it of these rows only.
    loud_rows: Callable[[Any], Sequence[int]] | None = None
    # Its examples, declared where it is defined: the example run dirs (names under examples/) it must fail
    # on, each with the cause it must name (None: any), and those it must pass on (its near misses).
    # tests/test_examples.py and tests/test_catalogue.py read them here.
    fails_on: dict[str, str | None] = field(default_factory=dict)
    passes_on: tuple[str, ...] = ()
    # The kind of run the check is about (runkinds.py): discovery finds folders holding its files as runs, and
    # the check is skipped, with the reason, on a run dir of another kind.
    run_kind: RunKind | None = None

    @property
    def name(self) -> str:
        return f"{self.id}-{self.slug}"

    @property
    def fixtures(self) -> tuple[str, ...]:
        """pytest fixtures the check asks for after its ``ctx`` argument."""
        params = list(inspect.signature(self.func).parameters.values())[1:]
        return tuple(
            p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
        )

    def doc_sections(self) -> dict[str, str]:
        return {
            "What it detects": self.detects,
            "Why it matters": self.why,
            "Example evidence": self.example,
            "Fix": self.fix,
        }


def check(
    id: str,
    slug: str,
    *,
    family: str = "",
    needs: Iterable[str] = (),
    scope: str = "run",
    phases: Iterable[str] = ("postmortem",),
    verdicts: Iterable[str] = (),
    layouts: Iterable[str] = (),
    thresholds: dict[str, Any] | None = None,
    detects: str = "",
    why: str = "",
    example: str = "",
    fix: str = "",
    severity: str = "error",
    quiet_row: Callable[[Any, dict[str, Any]], bool] | None = None,
    loud_rows: Callable[[Any], Sequence[int]] | None = None,
    fails_on: str | Iterable[str] | dict[str, str | None] = (),
    passes_on: str | Iterable[str] = (),
    run_kind: RunKind | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a health check.

    The function takes a :class:`~pytest_runhealth.context.CheckContext` first,
    then any pytest fixtures by name, and returns ``None`` (pass), a note
    string (pass, with something worth saying), or a failing finding made with
    ``ctx.fail(...)``::

        @runhealth.check("ACME001", "no-warmup", family="acme", needs=["logs"],
                         detects="...", why="...", fix="...")
        def no_warmup(ctx):
            tail = ctx.log_tail()  # the main log's last lines, with line numbers
            if not any("warmup done" in line.text for line in tail.lines):
                return ctx.fail("config", "unknown", "warm-up never finished")

    ``fails_on`` and ``passes_on`` name the example run dirs (``examples/<name>``) it must fail on (a
    mapping gives the cause it must name there) and pass on: a built-in check's failing example and near
    miss, tested by tests/test_examples.py from here.

    ``run_kind`` (``runhealth.run_kind("evals", files=["evals.jsonl"])``): the kind of run the check is
    about; a folder holding those files is a run to ``--run-dir``, and the check is skipped on other run dirs.
    """

    needs = tuple(needs)

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        if scope not in SCOPES:
            raise RegistryError(f"{id}: scope must be one of {SCOPES}, not {scope!r}")
        if severity not in SEVERITIES:
            raise RegistryError(f"{id}: severity must be one of {SEVERITIES}, not {severity!r}")
        bad = [p for p in phases if p not in PHASES]
        if bad:
            raise RegistryError(f"{id}: unknown phase(s) {bad}; phases are {PHASES}")
        unknown = [n for n in needs if n not in NEEDS]
        if unknown:  # a typo would otherwise never skip, silently
            raise RegistryError(f"{id}: unknown need(s) {unknown}; needs are {tuple(NEEDS)}")
        if run_kind is not None and type(run_kind).__name__ != "RunKind":
            raise RegistryError(f"{id}: run_kind= takes runhealth.run_kind(name, files=[...]), not {run_kind!r}")
        spec = CheckSpec(
            id=id,
            slug=slug,
            func=func,
            family=family,
            needs=tuple(needs),
            scope=scope,
            phases=tuple(phases),
            verdicts=tuple(verdicts),
            layouts=tuple(layouts),
            thresholds=dict(thresholds or {}),
            detects=detects or (inspect.getdoc(func) or ""),
            why=why,
            example=example,
            fix=fix,
            owner=getattr(func, "__module__", "") or "",
            severity=severity,
            quiet_row=quiet_row,
            loud_rows=loud_rows,
            fails_on=_examples(fails_on),
            passes_on=tuple(_examples(passes_on)),
            run_kind=run_kind,
        )
        setattr(func, SPEC_ATTR, spec)
        return func

    return mark


def _examples(given: str | Iterable[str] | dict[str, str | None]) -> dict[str, str | None]:
    """``"x"``, ``"examples/x"``, several of them, or ``{name: cause}`` -> ``{name: cause or None}``."""
    if isinstance(given, str):
        given = [given]
    pairs = given.items() if isinstance(given, dict) else ((name, None) for name in given)
    return {name.removeprefix("examples/").rstrip("/"): cause for name, cause in pairs}


class Registry:
    """The session's checks, keyed by ID, plus the ID prefixes that packs own."""

    def __init__(self) -> None:
        self._checks: dict[str, CheckSpec] = {}
        self._prefixes: dict[str, str] = {BUILTIN_PREFIX: BUILTIN_OWNER}
        self._kinds: dict[str, tuple[RunKind, str]] = {}  # run kinds packs declare: name -> (kind, owner)

    def add_run_kind(self, kind: RunKind, owner: str = "") -> RunKind:
        """A kind of run (``runhealth.run_kind(name, files=[...])``) that discovery finds below ``--run-dir``;
        the same kind declared twice is one, a name declared with other files is refused naming both owners."""
        if type(kind).__name__ != "RunKind":
            raise RegistryError(f"{kind!r} is not a run kind: make one with runhealth.run_kind(name, files=[...])")
        held = self._kinds.get(kind.name)
        if held is not None and held[0] != kind:
            raise RegistryError(
                f"run kind {kind.name!r} is declared twice with different files: {held[0].files} by {held[1]}, "
                f"{kind.files} by {owner or 'unknown'}"
            )
        self._kinds.setdefault(kind.name, (kind, owner or "unknown"))
        return kind

    def run_kinds(self) -> tuple[RunKind, ...]:
        """The kinds declared this session, in the order they were declared."""
        return tuple(kind for kind, _ in self._kinds.values())

    def register_prefix(self, prefix: str, owner: str) -> None:
        if not PREFIX.match(prefix):
            raise RegistryError(f"ID prefix {prefix!r} must be 1-10 capital letters")
        held = self._prefixes.get(prefix)
        if held and held != owner:
            raise RegistryError(f"ID prefix {prefix!r} is already registered by {held}; {owner} cannot take it")
        self._prefixes[prefix] = owner

    def add(self, obj: Callable[..., Any] | CheckSpec, owner: str | None = None) -> CheckSpec:
        spec = obj if isinstance(obj, CheckSpec) else getattr(obj, SPEC_ATTR, None)
        if spec is None:
            raise RegistryError(f"{obj!r} is not decorated with @runhealth.check")
        owner = owner or spec.owner or "unknown"
        spec.owner = owner
        self._validate(spec, owner)
        if spec.run_kind is not None:
            self.add_run_kind(spec.run_kind, owner)
        self._checks[spec.id] = spec
        return spec

    def add_module(self, module: Any, owner: str | None = None) -> list[CheckSpec]:
        found = [v for v in vars(module).values() if callable(v) and hasattr(v, SPEC_ATTR)]
        return [self.add(f, owner or getattr(module, "__name__", None)) for f in found]

    def _validate(self, spec: CheckSpec, owner: str) -> None:
        m = CHECK_ID.match(spec.id)
        if not m:
            raise RegistryError(f"check ID {spec.id!r} ({owner}) must be a prefix of capital letters and 3-4 digits")
        if not _SLUG.match(spec.slug):
            raise RegistryError(f"{spec.id}: slug {spec.slug!r} must be lower-case words joined by '-'")
        prefix = m["prefix"]
        holder = self._prefixes.get(prefix)
        if prefix == BUILTIN_PREFIX and owner != BUILTIN_OWNER and not owner.startswith("pytest_runhealth"):
            raise RegistryError(
                f"{spec.id} ({owner}): the prefix RH is reserved for pytest-runhealth's built-in checks; "
                "register a prefix of your own with registry.register_prefix()"
            )
        if holder is None:
            # A conftest check may use any unclaimed prefix; claim it for its owner.
            self._prefixes[prefix] = owner
        elif holder != owner and prefix != BUILTIN_PREFIX and not owner.startswith(holder):
            raise RegistryError(f"{spec.id} ({owner}): the prefix {prefix} is registered by {holder}")
        if spec.id in self._checks:
            other = self._checks[spec.id]
            if other.func is spec.func:
                return
            raise RegistryError(f"duplicate check ID {spec.id}: {other.owner} ({other.slug}) and {owner} ({spec.slug})")
        if not spec.family:
            spec.family = FAMILIES.get(m["num"][0], "custom") if prefix == BUILTIN_PREFIX else prefix.lower()

    def __iter__(self):
        return iter(sorted(self._checks.values(), key=lambda s: s.id))

    def __len__(self) -> int:
        return len(self._checks)

    def __contains__(self, check_id: str) -> bool:
        return check_id in self._checks

    def get(self, check_id: str) -> CheckSpec | None:
        return self._checks.get(check_id)


def spec_of(item: Any) -> CheckSpec | None:
    """The check an item runs, or None for the user's own tests."""
    return getattr(getattr(item, "function", None), SPEC_ATTR, None)
