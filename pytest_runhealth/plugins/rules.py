"""Declarative checks: a rule in ``runhealth.yaml`` becomes a check like any
built-in, for the failure patterns a team knows from its own trainers.

A rule names files in the run (a glob), a pattern (literal or regex), where to
look (the tail, where errors live, or the whole file), when it fires (the
pattern is present at least ``count`` times, is absent, or a number it captures
crosses a threshold) and what to say (verdict, cause, fix)::

    rules:
      - id: ACME101
        slug: nccl-watchdog-timeout
        files: "logs/*.log"
        literal: "Watchdog caught collective operation timeout"
        verdict: infra
        cause: nccl-timeout
        fix: "set NCCL_ASYNC_ERROR_HANDLING=1 and find the rank that stalled"

Whole-file rules stream the file in bounded chunks through :mod:`safeio`, so a
rule on a 1 GB log never holds it in memory; tail rules share the session's
cached tail of the file (:meth:`RunDir.log_tail`)."""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from ..model.finding import VERDICTS
from ..model.registry import ID_PATTERN, PHASES, SCOPES, SEVERITIES, RegistryError, check
from ..readers.logscan import CHUNK, MAX_PENDING
from ..safety.regexsafe import backtracking_risk
from ..safety.safeio import FirstSizes, describe_error, open_readonly
from ..session import config_path
from ..settings.config import ConfigError, read_config_data
from ..settings.severity import level_name

SLUG_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
OVERLAP = 4096  # bytes kept between reads of a line with no newline: longer matches are not found there
MAX_EVIDENCE = 5
QUOTE_AROUND = 200  # bytes quoted either side of a match

RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "slug", "verdict"],
    "properties": {
        "id": {"type": "string", "pattern": ID_PATTERN},
        "slug": {"type": "string", "pattern": SLUG_PATTERN},
        "files": {"type": "string", "minLength": 1},
        "literal": {"type": "string", "minLength": 1},
        "regex": {"type": "string", "minLength": 1},
        "ignore_case": {"type": "boolean"},
        "search": {"enum": ["tail", "file"]},
        "fail_when": {"enum": ["present", "absent"]},
        "count": {"type": "integer", "minimum": 1},
        "above": {"type": "number"},
        "below": {"type": "number"},
        "verdict": {"enum": [v for v in VERDICTS if v != "healthy"]},
        "cause": {"type": "string", "pattern": SLUG_PATTERN},
        "summary": {"type": "string"},
        "detects": {"type": "string"},
        "why": {"type": "string"},
        "example": {"type": "string"},
        "fix": {"type": "string"},
        "scope": {"enum": list(SCOPES)},
        "phases": {"type": "array", "items": {"enum": list(PHASES)}, "minItems": 1},
        "severity": {"enum": list(SEVERITIES)},
        "examples": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "fails": {"type": "array", "items": {"type": "string"}},
                "passes": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}


class RuleError(RegistryError):
    """A rule that cannot become a check; the message names the rule and the field."""


@dataclass
class Rule:
    """One validated rule, its pattern compiled for bytes (whole-file
    streaming) and for text (the decoded tail)."""

    id: str
    slug: str
    verdict: str
    files: str | None
    pattern: re.Pattern[bytes]
    text_pattern: re.Pattern[str]
    described: str  # the pattern as the user wrote it, for messages
    search: str = "tail"
    fail_when: str = "present"
    count: int = 1
    above: float | None = None
    below: float | None = None
    cause: str | None = None
    summary: str = ""
    detects: str = ""
    why: str = ""
    example: str = ""
    fix: str = ""
    scope: str = "run"
    phases: tuple[str, ...] = ("postmortem",)
    severity: str = "error"
    examples: dict[str, list[str]] = field(default_factory=dict)
    source: str = ""

    @property
    def threshold(self) -> bool:
        return self.above is not None or self.below is not None


# -- loading and validation ----------------------------------------------------
def _name(raw: Any, index: int) -> str:
    rid = raw.get("id") if isinstance(raw, dict) else None
    return f"rule {rid} (rules[{index}])" if isinstance(rid, str) and rid else f"rules[{index}]"


def _schema_problems(raw: Any, index: int) -> list[str]:
    import jsonschema

    who = _name(raw, index)
    validator = jsonschema.Draft202012Validator(RULE_SCHEMA)
    out = []
    for err in sorted(validator.iter_errors(raw), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in err.absolute_path)
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(RULE_SCHEMA["properties"]))
            for key in extra:
                close = difflib.get_close_matches(str(key), list(RULE_SCHEMA["properties"]), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                out.append(f"{who}: field '{key}': unknown key{hint}; known: {', '.join(RULE_SCHEMA['properties'])}")
        elif err.validator == "required":
            missing = [k for k in err.validator_value if k not in err.instance]
            out += [f"{who}: field '{k}': required" for k in missing]
        elif err.validator == "pattern" and where in ("id", "cause", "slug"):
            shape = "a prefix of capital letters and 3-4 digits" if where == "id" else "lower-case words joined by '-'"
            out.append(f"{who}: field '{where}': {err.instance!r} must be {shape}")
        else:
            out.append(f"{who}: field '{where or '(rule)'}': {err.message}")
    return out


def _compile(raw: dict, who: str) -> tuple[re.Pattern[bytes], re.Pattern[str], str]:
    flags = re.MULTILINE | (re.IGNORECASE if raw.get("ignore_case") else 0)
    if "regex" in raw:
        text = raw["regex"]
        try:
            compiled = re.compile(text.encode("utf-8"), flags), re.compile(text, flags)
        except re.error as exc:
            where = f" at position {exc.pos}" if exc.pos is not None else ""
            raise RuleError(
                f"{who}: field 'regex': {text!r} is not a valid regular expression: {exc.msg}{where}"
            ) from None
        risk = backtracking_risk(text)
        if risk is not None:  # Python's re has no linear-time mode: what could hang a session is refused here
            raise RuleError(
                f"{who}: field 'regex': {text!r} is refused: {risk}, which can take exponential time on one "
                "line of a log; write it without the nesting ('a+' for '(a+)+'), or make the inner part atomic "
                "('(?>a+)+') or possessive ('a++') if it must stay"
            )
        return compiled[0], compiled[1], f"/{text}/"
    text = raw["literal"]
    return re.compile(re.escape(text.encode("utf-8")), flags), re.compile(re.escape(text), flags), repr(text)


def parse_rules(raw_rules: Any, source: str = "runhealth.yaml") -> list[Rule]:
    """Validate the ``rules:`` section and compile it; every problem found is
    reported at once, each naming the rule and the field."""
    if raw_rules is None:
        return []
    if not isinstance(raw_rules, list):
        raise RuleError(f"{source}: 'rules' must be a list of rules, not {type(raw_rules).__name__}")
    problems: list[str] = []
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_rules):
        who = _name(raw, index)
        if isinstance(raw, dict) and raw.get("severity") is False:
            raw = {**raw, "severity": level_name(False)}
        found = _schema_problems(raw, index)
        if not found:
            both = "literal" in raw and "regex" in raw
            if both or ("literal" not in raw and "regex" not in raw):
                found.append(f"{who}: field 'literal'/'regex': give exactly one of the two")
            if raw.get("fail_when") == "absent" and ("above" in raw or "below" in raw):
                found.append(f"{who}: field 'fail_when': 'absent' cannot be combined with 'above'/'below'")
            if raw["id"] in seen:
                found.append(f"{who}: field 'id': {raw['id']} is also the id of rules[{seen[raw['id']]}]")
            seen.setdefault(raw["id"], index)
        if found:
            problems += found
            continue
        try:
            pattern, text_pattern, described = _compile(raw, who)
        except RuleError as exc:
            problems.append(str(exc))
            continue
        if ("above" in raw or "below" in raw) and pattern.groups < 1:
            problems.append(
                f"{who}: field 'regex': a threshold ('above'/'below') needs a regex with a capture "
                "group around the number, e.g. 'grad_norm=([0-9.eE+-]+)'"
            )
            continue
        rules.append(
            Rule(
                id=raw["id"],
                slug=raw["slug"],
                verdict=raw["verdict"],
                files=raw.get("files"),
                pattern=pattern,
                text_pattern=text_pattern,
                described=described,
                search=raw.get("search", "tail"),
                fail_when=raw.get("fail_when", "present"),
                count=raw.get("count", 1),
                above=raw.get("above"),
                below=raw.get("below"),
                cause=raw.get("cause"),
                summary=raw.get("summary", ""),
                detects=raw.get("detects", ""),
                why=raw.get("why", ""),
                example=raw.get("example", ""),
                fix=raw.get("fix", ""),
                scope=raw.get("scope", "run"),
                phases=tuple(raw.get("phases", ("postmortem",))),
                severity=raw.get("severity", "error"),
                examples=dict(raw.get("examples") or {}),
                source=source,
            )
        )
    if problems:
        raise RuleError(f"{source} has {len(problems)} problem(s) in its rules:\n  " + "\n  ".join(problems))
    return rules


def read_rules(path: Path) -> list[Rule]:
    """The rules of one runhealth.yaml; a file that does not parse is left to
    the config loader, which reports it with the rest of the file."""

    try:
        data = read_config_data(path)
    except ConfigError:
        return []
    if not isinstance(data, dict):
        return []
    return parse_rules(data.get("rules"), str(path))


# -- matching --------------------------------------------------------------------
@dataclass
class Hit:
    line: int
    text: bytes
    value: float | None = None


@dataclass
class Scan:
    """What one rule found in one file: matches that count, and the first
    few of them as evidence (the last few, for a tail)."""

    path: Path
    hits: int = 0
    evidence: list[Hit] = field(default_factory=list)
    last_line: Hit | None = None
    error: str | None = None
    stopped_early: bool = False


def _around(buf: bytes, start: int, end: int) -> bytes:
    """The line (or ``\\r`` redraw) a match sits in, cut to a quotable size."""
    lo = max(buf.rfind(b"\n", 0, start), buf.rfind(b"\r", 0, start)) + 1
    hi_n, hi_r = buf.find(b"\n", end), buf.find(b"\r", end)
    hi = min(h for h in (hi_n, hi_r, len(buf)) if h >= 0)
    return buf[max(lo, start - QUOTE_AROUND) : min(hi, end + QUOTE_AROUND)]


def iter_hits(path: Path, pattern: re.Pattern[bytes], sizes: FirstSizes | None = None) -> Iterator[Hit]:
    """Every match in a file, streamed: at most one chunk plus one pending
    partial line is in memory, whatever the file's size or line length."""
    with open_readonly(path, sizes=sizes) as fh:
        pending = b""
        lineno = 1
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                break
            buf = pending + chunk if pending else chunk
            cut = buf.rfind(b"\n")
            if cut < 0:
                if len(buf) <= MAX_PENDING:
                    pending = buf
                    continue
                # A line with no newline for megabytes: search it now, keep an
                # overlap so a match across the read boundary is still found.
                keep = len(buf) - OVERLAP
                for m in pattern.finditer(buf):
                    if m.start() >= keep:
                        break
                    yield Hit(lineno, _around(buf, m.start(), m.end()), _value(m))
                pending = buf[keep:]
                continue
            body, pending = buf[: cut + 1], buf[cut + 1 :]
            pos = 0
            for m in pattern.finditer(body):
                lineno += body.count(b"\n", pos, m.start())
                pos = m.start()
                yield Hit(lineno, _around(body, m.start(), m.end()), _value(m))
            lineno += body.count(b"\n", pos)
        if pending:
            for m in pattern.finditer(pending):
                yield Hit(lineno + pending.count(b"\n", 0, m.start()), _around(pending, m.start(), m.end()), _value(m))


def _value(m: re.Match) -> float | None:
    if not m.re.groups:
        return None
    raw = m.group(1)
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def _crosses(rule: Rule, value: float | None) -> bool:
    if value is None:
        return False
    return (rule.above is not None and value > rule.above) or (rule.below is not None and value < rule.below)


def scan_file(rule: Rule, path: Path, thresholds: dict[str, Any], run_dir) -> Scan:
    count = thresholds.get("count") or rule.count
    scan = Scan(path)
    if rule.search == "tail":
        try:
            tail = run_dir.log_tail(path)
        except OSError as exc:
            scan.error = describe_error(exc)
            return scan
        if tail.lines:
            last = tail.lines[-1]
            scan.last_line = Hit(last.line, last.text.encode("utf-8", "replace"))
        for line in tail.lines:
            for m in rule.text_pattern.finditer(line.text):
                value = _value(m)
                if rule.threshold and not _crosses(_with(rule, thresholds), value):
                    continue
                scan.hits += 1
                scan.evidence.append(Hit(line.line, line.text.encode("utf-8", "replace"), value))
        scan.evidence = scan.evidence[-MAX_EVIDENCE:]  # in a tail, the latest lines matter most
        return scan
    limited = _with(rule, thresholds)
    try:
        for hit in iter_hits(path, rule.pattern, run_dir.sizes):
            if rule.threshold and not _crosses(limited, hit.value):
                continue
            scan.hits += 1
            if len(scan.evidence) < MAX_EVIDENCE:
                scan.evidence.append(hit)
            if rule.fail_when == "present" and scan.hits >= count and len(scan.evidence) >= min(count, MAX_EVIDENCE):
                scan.stopped_early = True  # the verdict is settled; the rest of a huge file need not be read
                break
    except OSError as exc:
        scan.error = describe_error(exc)
    return scan


def _with(rule: Rule, thresholds: dict[str, Any]) -> Rule:
    """The rule with ``above``/``below`` as configured under ``thresholds:``."""
    above, below = thresholds.get("above", rule.above), thresholds.get("below", rule.below)
    if above == rule.above and below == rule.below:
        return rule
    from dataclasses import replace

    return replace(rule, above=above, below=below)


# -- files --------------------------------------------------------------------------
def glob_match(rel: str, pattern: str) -> bool:
    """``logs/*.log`` against a path relative to the run; ``*`` stays within
    one folder, ``**`` spans any number of them."""
    return _match_parts(PurePosixPath(rel).parts, PurePosixPath(pattern).parts)


def _match_parts(parts: tuple[str, ...], pats: tuple[str, ...]) -> bool:
    if not pats:
        return not parts
    if pats[0] == "**":
        return any(_match_parts(parts[i:], pats[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pats[0]) and _match_parts(parts[1:], pats[1:])


def files_for(rule: Rule, ctx) -> tuple[list[Path], str]:
    """The files a rule reads for this target, and where they were looked for."""
    target = ctx.target
    if target.run is not None:
        root, files, logs = target.run.path, target.run.files, target.run.logs
    else:
        root, files = ctx.run_dir.path, ctx.run_dir.walk.files
        logs = ctx.run_dir.runs[0].logs if not ctx.run_dir.is_sweep and ctx.run_dir.runs else []
    if rule.files is None:
        return list(logs), f"logs in {root} (logs/*.log and *.log)"
    # The base is the run (``logs/*.log``); a glob written from the run dir
    # (``runs/*/logs/stdout.log`` in a sweep) matches the same run's files too.
    base = ctx.run_dir.path
    found = []
    for path in files:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        if glob_match(rel, rule.files) or (root != base and glob_match(ctx.run_dir.rel(path), rule.files)):
            found.append(path)
    also = f" or in {base}" if root != base else ""
    return sorted(found), f"'{rule.files}' in {root}{also}"


# -- the check ----------------------------------------------------------------------
def evaluate(rule: Rule, ctx) -> Any:
    files, where = files_for(rule, ctx)
    if not files:
        pytest.skip(f"{rule.id}: {NO_MATCH} {where}")
    thresholds = ctx.thresholds
    count = thresholds.get("count") or rule.count
    scans = [
        ctx.run_dir.cached(
            ("rule", rule.id, path, tuple(sorted(thresholds.items()))),
            lambda p=path: scan_file(rule, p, thresholds, ctx.run_dir),
        )
        for path in files
    ]
    unreadable = [s for s in scans if s.error]
    if unreadable and len(unreadable) == len(scans):
        return ctx.fail(
            "not-evaluable",
            None,
            "; ".join(f"cannot read {ctx.run_dir.rel(s.path)}: {s.error}" for s in unreadable),
            fix=f"make the files {rule.id} reads readable by this user.",
        )
    hits = sum(s.hits for s in scans)
    named = ", ".join(ctx.run_dir.rel(s.path) for s in scans)
    if rule.search == "tail":
        named = f"the last lines of {named}"
    if rule.fail_when == "absent":
        if hits >= count:
            return f"{hits} line(s) match {rule.described}"
        evidence = [ctx.evidence(s.path, s.last_line.line, s.last_line.text) for s in scans if s.last_line]
        summary = rule.summary or f"{rule.described} appears {hits} time(s) in {named}; at least {count} expected."
        return ctx.fail(rule.verdict, rule.cause, summary, evidence[:MAX_EVIDENCE])
    if hits < count:
        if hits:
            return f"{hits} match(es) of {rule.described}, under the {count} that fail"
        return None
    evidence = [ctx.evidence(s.path, h.line, h.text) for s in scans for h in s.evidence][:MAX_EVIDENCE]
    some = "at least " if any(s.stopped_early for s in scans) else ""
    if rule.threshold:
        limited = _with(rule, thresholds)
        bound = _limits(limited.above, limited.below, "and")
        default = f"{some}{hits} value(s) captured by {rule.described} in {named} are {bound}."
    else:
        default = f"{some}{hits} line(s) in {named} match {rule.described}."
    summary = rule.summary or default
    return ctx.fail(rule.verdict, rule.cause, summary, evidence)


def _limits(above: float | None, below: float | None, joiner: str, lead: str = "") -> str:
    """``"above 5 and below 9"``: a threshold rule's bounds, those it has, in words."""
    return f" {joiner} ".join(
        f"{lead}{word} {v:g}" for word, v in (("above", above), ("below", below)) if v is not None
    )


def as_check(rule: Rule):
    """The rule as a decorated check function, documented from the rule."""

    def rule_check(ctx):
        return evaluate(rule, ctx)

    where = "the whole of" if rule.search == "file" else "the tail of"
    files = rule.files or "the run's logs"
    if rule.threshold:
        when = _limits(rule.above, rule.below, "or", "a value ")
        detects = f"{rule.described} captures {when} in {where} {files}"
    elif rule.fail_when == "absent":
        detects = f"{rule.described} appears fewer than {rule.count} time(s) in {where} {files}"
    else:
        detects = f"{rule.described} appears {rule.count} or more time(s) in {where} {files}"
    thresholds: dict[str, Any] = {"count": rule.count}
    if rule.above is not None:
        thresholds["above"] = rule.above
    if rule.below is not None:
        thresholds["below"] = rule.below
    rule_check.__name__ = rule_check.__qualname__ = f"rule_{rule.id}"
    return check(
        rule.id,
        rule.slug,
        scope=rule.scope,
        phases=rule.phases,
        verdicts=[rule.verdict],
        thresholds=thresholds,
        severity=rule.severity,
        detects=rule.detects or f"{detects} (declarative rule from {rule.source}).",
        why=rule.why,
        example=rule.example or rule.described,
        fix=rule.fix,
    )(rule_check)


# -- registration (this module is a sub-plugin) -----------------------------------------
RULES = pytest.StashKey[list[Rule]]()


def pytest_runhealth_register_checks(registry, config) -> None:
    path = config_path(config)
    rules = read_rules(path) if path is not None and Path(path).is_file() else []
    config.stash[RULES] = rules
    for rule in rules:
        registry.add(as_check(rule), owner=f"rules in {path}")


NO_MATCH = "no file matches"


@pytest.hookimpl(trylast=True)
def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    """A rule whose files matched nothing in any run says so once, not only
    as one skip per target (a glob with the wrong base looks like a pass)."""
    rules = config.stash.get(RULES, [])
    if not rules:
        return
    results = list(session.collector.results.values())
    for rule in rules:
        mine = [r for r in results if r.check == rule.id]
        if mine and all(r.outcome == "skipped" and NO_MATCH in (r.note or "") for r in mine):
            terminalreporter.write_line(
                f"rule {rule.id}: files '{rule.files or 'the run logs'}' matched nothing in any of {len(mine)} "
                "target(s); a glob is relative to each run (logs/*.log) or to its run dir (runs/*/logs/stdout.log)"
            )
