"""``pytest-runhealth watch RUN_DIR...``: the loop.

Each tick asks every watched unit (a trainer run, a sweep, a harvest, an
evaluation request) what changed, prints only that, and runs the checks
(``verdicts.VerdictRunner``) only when there is new evidence, to confirm a
failure or an end, or after a whole quiet verdict interval. Exit codes:

* 0 -- every unit ended with evidence of completion and no check failed
* 1 -- a check failed and stayed failed (seen again by the next session, or
  the run ended with it); ``--until first-failure``: the first failure; also
  a run that ended with no evidence of completion
* 3 -- wedged: a stall or budget rule (RH204, RH502) failed (not RH204's
  ``run-disqualified``, a sweep's record of a kill: exit 1), or the run dir
  never appeared within ``--timeout``
* 4 -- a usage mistake (one line on stderr)
* 130 -- Ctrl-C: the watch stops cleanly (it writes nothing to keep)"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ..readers.layouts.mlflow_db import DB_NAME, is_store_file
from ..readers.rundir import RunDir
from ..safety.shown import one_line
from .evaluation import HarvestWatch, ServerRequestWatch
from .notify import Notifier
from .store import SqliteSource, StoreError, StoreWatch
from .sweep import SweepWatch
from .trainer import Tick, TrainerWatch, label_of
from .verdicts import VerdictRunner, Verdicts, describe, transitions

DEFAULT_EVERY_S = 60.0  # trainer runs and sweeps (the trainer runbook's status interval)
DEFAULT_EVERY_EVAL_S = 10.0  # evaluation requests (the triage runbook's poll cadence)
QUIET_VERDICT_TICKS = 10  # quiet for this many ticks: run the checks anyway (stall and budget rules need time)
REQUEUE_GRACE_S = (
    60.0  # a run ended by SIGTERM (a scheduler's requeue or preemption): how long a new attempt is awaited
)
# A failure that is a SIGTERM end: Lightning's `Received SIGTERM: 15`, torchrun's `Signal 15 (SIGTERM)`, exit -15/143
SIGTERM_END = re.compile(r"SIGTERM|\bsignal:? 15\b|exit(?: code|code)?\s*:?\s*(?:-15|143)\b", re.IGNORECASE)
DEFAULT_WAIT_S = 3600.0  # without --timeout: how long a run dir that vanished after the start is waited for
EXIT_OK, EXIT_FAILED, EXIT_WEDGED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 3, 4, 130

# pytest options the watch forwards to the verdict sessions, with a value each.
PASS_VALUE = (
    "--lmstudio-url",
    "--lmstudio-log",
    "--lmstudio-judge-model",
    "--orchestrator-url",
    "--runhealth-probe-timeout",
    "--runhealth-config",
    "--eval-body",
    "-m",
    "-k",
)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """An argument parser that remembers the long options it was given (to name a mistyped one)."""

    def __init__(self, *args, **kwargs) -> None:
        self.long_options: list[str] = []  # before argparse adds --help
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        self.long_options += [a for a in args if isinstance(a, str) and a.startswith("--")]
        return super().add_argument(*args, **kwargs)


def build_parser() -> _Parser:
    p = _Parser(
        prog="pytest-runhealth watch",
        description="watch runs while they train; print only on change",
        epilog="Other pytest options go to the checks: --lmstudio-url URL, --orchestrator-url URL, "
        "--runhealth-config FILE, -m live, -k EXPR, any --opt=value, and everything after --. "
        "Exit codes: 0 completed healthy, 1 a check failed and stayed failed, 3 wedged, 4 usage, 130 Ctrl-C. "
        "See docs/watching.md.",
    )
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR")
    p.add_argument(
        "--every",
        type=float,
        metavar="SECONDS",
        help="seconds between ticks (default 60; 10 when only evaluation requests are watched)",
    )
    p.add_argument(
        "--until",
        choices=("end", "first-failure"),
        default="end",
        help="stop at the run's end (default) or at the first failing check",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="wait up to S seconds for a run dir that does not exist yet (a launch pending); without it, a "
        "RUN_DIR that does not exist is a usage error",
    )
    p.add_argument(
        "--verdict-every",
        type=int,
        default=QUIET_VERDICT_TICKS,
        metavar="TICKS",
        help="run the checks after this many quiet ticks even without new evidence (default 10)",
    )
    p.add_argument(
        "--requeue-grace",
        type=float,
        default=REQUEUE_GRACE_S,
        metavar="S",
        help="a run that ended on SIGTERM (what Slurm sends before a requeue or preemption) is awaited this "
        "many seconds for a new attempt in the same log before the watch ends on it (default 60)",
    )
    p.add_argument(
        "--notify",
        action="append",
        default=[],
        metavar="URL",
        help='POST each change as JSON {"text": ...} to this webhook (repeatable)',
    )
    p.add_argument(
        "--notify-command",
        action="append",
        default=[],
        metavar="CMD",
        help="run CMD with each change on stdin (repeatable)",
    )
    p.add_argument(
        "--mlflow-tracking-uri",
        metavar="URI",
        help="follow runs in this MLflow store: sqlite:///mlflow.db, a path to an mlflow.db, or a tracking server "
        "http(s)://host:port (default: MLFLOW_TRACKING_URI, with --mlflow-experiment or --mlflow-run)",
    )
    p.add_argument(
        "--mlflow-experiment",
        action="append",
        default=[],
        metavar="NAME",
        help="follow every run of this MLflow experiment (repeatable)",
    )
    p.add_argument("--mlflow-run", action="append", default=[], metavar="RUN_ID", help="follow this run (repeatable)")
    p.add_argument("--eval-server", metavar="URL", help="the evaluation server to poll (with --eval-request)")
    p.add_argument(
        "--eval-request",
        action="append",
        default=[],
        metavar="ID",
        help="an experience request (xr-1) or league round (round:42) to poll to a terminal status",
    )
    for opt in PASS_VALUE:
        p.add_argument(
            opt, dest="pass_" + opt.lstrip("-").replace("-", "_"), action="append", default=[], help=argparse.SUPPRESS
        )
    return p


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        argv, tail = argv[:cut], argv[cut + 1 :]
    else:
        tail = []
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    own = [o for o in parser.long_options if o not in PASS_VALUE]
    _refuse_unknown(unknown, own)
    passthrough = list(unknown)
    for opt in PASS_VALUE:
        for value in getattr(args, "pass_" + opt.lstrip("-").replace("-", "_")):
            passthrough += [opt, value]
    if args.eval_server:
        passthrough += ["--eval-server", args.eval_server]
    for rid in args.eval_request:
        passthrough += ["--eval-request", rid]
    if args.eval_request and not args.eval_server:
        raise UsageError("--eval-request needs --eval-server URL")
    from .store import StoreError, store_of_args

    named_store = not args.run_dirs or args.mlflow_tracking_uri
    try:  # a store named by URI (or MLFLOW_TRACKING_URI): its unit; its first poll says whether it can be read
        args.store = (
            store_of_args(args.mlflow_tracking_uri, args.mlflow_experiment, args.mlflow_run) if named_store else None
        )
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if not args.run_dirs and not args.eval_request and args.store is None:
        raise UsageError(
            "nothing to watch: give RUN_DIR, --mlflow-tracking-uri URI (with --mlflow-run or --mlflow-experiment), "
            "or --eval-server URL --eval-request ID"
        )
    if args.every is not None and args.every <= 0:
        raise UsageError("--every must be a positive number of seconds")
    if args.timeout is None:  # no launch pending: a path that is not there is a typo, not a run to wait for
        for given in args.run_dirs:
            path = Path(given)
            if not path.is_dir():
                what = "is not a folder" if path.exists() else "does not exist"
                raise UsageError(
                    f"{given} {what} (to wait for a run about to be launched there, give --timeout SECONDS)"
                )
        args.timeout = DEFAULT_WAIT_S
    return args, passthrough + tail


def _refuse_unknown(unknown: list[str], own: list[str]) -> None:
    """Options the watch does not know go to the checks' pytest sessions; a mistyped option of the watch's own
    (``--evrey 5``, ``--evrey=5``) is named as such, not as an "unexpected argument '5'", and so is a mistyped
    plugin option followed by a value. A plugin option the watch passes on is never refused."""
    import difflib

    from ..settings.trust_boundary import plugin_options

    known = plugin_options()
    for i, word in enumerate(unknown):
        name = word.split("=", 1)[0]
        if word.startswith("--") and name not in known:
            close = difflib.get_close_matches(name, own, n=1, cutoff=0.8)
            if close:
                raise UsageError(f"unknown option {name!r} (did you mean {close[0]}?)")
        elif not word.startswith("-"):
            before = unknown[i - 1] if i else ""
            if before.startswith("-") and "=" not in before:
                close = [] if before in known else difflib.get_close_matches(before, [*own, *known], n=1, cutoff=0.8)
                if close:
                    raise UsageError(f"unknown option {before!r} (did you mean {close[0]}?)")
                raise UsageError(
                    f"unknown option {before!r} (pytest options the checks take with a value: write {before}=VALUE)"
                )
            raise UsageError(f"unexpected argument {word!r} (pytest options with a value: write --opt=value)")


class Watch:
    """The state of one watch: its units, the last verdicts, what to say."""

    def __init__(self, args: argparse.Namespace, passthrough: list[str], out=None, clock=time.monotonic) -> None:
        self.args = args
        self.out = out or sys.stdout
        self.clock = clock
        self.paths = [Path(p) for p in args.run_dirs]
        self.units: dict[str, Any] = {}  # trainer, sweep, harvest and eval watches: tick(), label
        if args.eval_server and args.eval_request:
            self.units["eval"] = ServerRequestWatch(args.eval_server, args.eval_request)
        store = getattr(args, "store", None)
        if store is not None:
            self.units["mlflow-store"] = store
        evals_only = not self.paths and store is None
        self.every = args.every or (DEFAULT_EVERY_EVAL_S if evals_only else DEFAULT_EVERY_S)
        self.passthrough = list(passthrough)
        self.runner = VerdictRunner(self.paths, passthrough)
        self.notifier = Notifier(args.notify, args.notify_command)
        self.verdicts: Verdicts | None = None
        self.failing: set[str] = set()  # nodeids failing in the last session
        self.quiet_ticks = 0
        self.awaiting = False  # a restarted run that has not stepped yet: its old error is not confirmed
        self.confirm = False
        self.ended_ticks = 0
        self.waiting_since: float | None = None
        self.withheld: dict[str, str | None] = {}  # failures not said while a requeued run had not stepped
        self.requeue_wait_since: float | None = None  # a SIGTERM end seen: a requeue may follow (REQUEUE_GRACE_S)
        self.said_waiting: set[Path] = set()
        self.unsent: list[str] = []

    def interval(self) -> float:
        """Seconds between ticks: --every when given; else the cadence, shortened to a trainer run's own pace
        (TrainerWatch.pace_tick_s) so that its stall alert comes within a few of its step times."""
        paces = [u.pace_tick_s for u in self.units.values() if getattr(u, "pace_tick_s", None)]
        if self.args.every is not None or not paces:
            return self.every
        return min(self.every, *paces)

    # -- output ---------------------------------------------------------------------
    def say(self, text: str) -> None:
        """Print one line now; it goes to the notifiers with the rest of its
        tick, as one message (a status block is one post, not five)."""
        stamp = datetime.now().strftime("%H:%M:%S")
        text = one_line(text)  # redacted; ESC, BEL, C1 and newlines in names made visible
        self.out.write(f"[{stamp}] {text}\n")
        self.out.flush()
        self.unsent.append(text)

    def flush_notes(self) -> None:
        if self.unsent:
            self.notifier.send("\n".join(self.unsent))
            self.unsent = []
        self.notifier.report()  # a sending thread's warning, printed here: no session is capturing now

    # -- units ----------------------------------------------------------------------
    def _attach(self) -> bool:
        """Make a unit for each run dir that exists now; False while any is missing."""
        ready = True
        for path in self.paths:
            key = str(path)
            if key in self.units:
                continue
            if not path.is_dir():
                ready = False
                if path not in self.said_waiting:
                    self.said_waiting.add(path)
                    self.say(f"waiting for {path} (launch pending; up to {self.args.timeout:g} s)")
                continue
            rd = RunDir(path)
            if is_store_file(path / DB_NAME):  # MLflow 3's default store in its launch folder: its runs
                self.units[key] = StoreWatch(
                    SqliteSource(path / DB_NAME, f"{label_of(path)}/{DB_NAME}"),
                    self.args.mlflow_experiment,
                    self.args.mlflow_run,
                    label=label_of(path),
                    run_dir=path,
                )
            elif rd.is_sweep:
                orch = self.args.pass_orchestrator_url
                self.units[key] = SweepWatch(path, orchestrator_url=orch[-1] if orch else None)
            elif "harvest" in rd.layouts:
                self.units[key] = HarvestWatch(path)
            else:
                self.units[key] = TrainerWatch(path)
            if self.args.every is None:  # the runbooks' cadence: 10 s when only evaluations are watched
                evals_only = all(isinstance(u, (ServerRequestWatch, HarvestWatch)) for u in self.units.values())
                self.every = DEFAULT_EVERY_EVAL_S if evals_only and ready else DEFAULT_EVERY_S
        return ready

    # -- one tick ---------------------------------------------------------------------
    def tick(self) -> int | None:
        """One round; an exit code when the watch is over."""
        budget = max(1.0, self.every)  # a server's Retry-After never holds a tick longer: passed down, not global
        self.runner.retry_budget_s = budget
        for unit in self.units.values():
            if isinstance(unit, ServerRequestWatch):
                unit.retry_budget_s = budget
        try:
            return self._tick()
        finally:
            self.flush_notes()

    def _tick(self) -> int | None:
        ready = self._attach()
        if not ready:
            if self.waiting_since is None:
                self.waiting_since = self.clock()
            if self.clock() - self.waiting_since > self.args.timeout:
                missing = [str(p) for p in self.paths if str(p) not in self.units]
                self.say(
                    f"gave up: {', '.join(missing)} did not appear within {self.args.timeout:g} s "
                    "(the launch never happened)"
                )
                return EXIT_WEDGED
            if not self.units:
                return None
        ticks: dict[str, Tick] = {}
        for key, unit in self.units.items():
            t = unit.tick()
            ticks[key] = t
            prefix = f"{unit.label}: " if len(self.units) > 1 else ""
            for line in t.lines:
                self.say(prefix + line)
        empty = [u.label for u in self.units.values() if isinstance(u, StoreWatch) and not u.followed]
        if empty and self.args.timeout is not None:  # an experiment with no run yet: waited for up to --timeout
            if self.waiting_since is None:
                self.waiting_since = self.clock()
            if self.clock() - self.waiting_since > self.args.timeout:
                self.say(f"gave up: no run to follow in {', '.join(empty)} within {self.args.timeout:g} s")
                return EXIT_WEDGED
        evidence = any(t.evidence for t in ticks.values())
        grew = any(t.grew for t in ticks.values())
        if any(t.restarted for t in ticks.values()):
            # a requeue into the same log (issue 46): the failure seen before belongs to the first attempt
            self.failing, self.confirm, self.ended_ticks = set(), False, 0
            self.requeue_wait_since = None
        self.awaiting = any(t.awaiting for t in ticks.values())
        self.quiet_ticks = 0 if grew else self.quiet_ticks + 1
        all_ended = ready and bool(ticks) and all(t.ended for t in ticks.values())
        self.ended_ticks = self.ended_ticks + 1 if all_ended else 0
        run_checks = (
            evidence
            or self.confirm
            or self.ended_ticks == 1
            or self.verdicts is None
            or self.quiet_ticks >= self.args.verdict_every
        )
        if run_checks:
            code = self._verdicts()
            if code is not None:
                return code
        if self.ended_ticks >= 2 and not self._awaiting_requeue():  # the end seen twice: not a restart
            return self._finish(ticks)
        return None

    def _verdicts(self) -> int | None:
        self.quiet_ticks = 0
        stores = [u for u in self.units.values() if isinstance(u, StoreWatch)]
        # A store's followed runs, named to the checks: the session judges exactly what the watch follows.
        self.runner.extra_args = [*self.passthrough, *(a for u in stores for a in u.session_args())]
        self.runner.guarded = [p for u in stores for p in u.guarded()]
        v = self.runner.run()
        if v.error:
            self.say(f"checks could not run: {v.error}")
            if self.verdicts is None:
                return EXIT_USAGE
            return None
        for res, prev in transitions(self.verdicts, v):
            if res.nodeid in self.withheld and not res.bad:
                del self.withheld[res.nodeid]  # never said to fail: no news
            elif self.awaiting and res.bad:
                # a relaunched run that has not stepped yet (a requeue): its log still ends on the old attempt's
                # error, which a new run folder's checks read as theirs; said only if it still fails once it steps
                self.withheld.setdefault(res.nodeid, prev)
            else:
                self.say(describe(res, prev))
        if not self.awaiting:
            for nodeid, prev in self.withheld.items():
                if nodeid in v.results and v.results[nodeid].bad:
                    self.say(describe(v.results[nodeid], prev))
            self.withheld.clear()
        for unit in self.units.values():
            hook = getattr(unit, "after_verdicts", None)
            if hook is not None:
                hook(v)  # a unit whose end only the checks can tell (a harvest): said on its next tick
        # "Not evidence yet" (a round still running, RH501; a server that did not
        # answer this time) is the normal state of a live run; it counts at the end.
        failing = {r.nodeid for r in v.failed_now()}
        stayed = failing & self.failing if not self.awaiting else set()
        self.verdicts, self.failing = v, failing
        wedged = v.wedged()
        if wedged:
            self._eval_verdict()
            self.say(f"wedged ({wedged[0].check} {wedged[0].slug}, {wedged[0].cause}): exit 3")
            return EXIT_WEDGED
        if failing and self.args.until == "first-failure":
            self.say(f"stopping at the first failure ({len(failing)} failing)")
            return EXIT_FAILED
        if stayed and self._sigterm_end([v.results[n] for n in sorted(stayed)]) and self._awaiting_requeue():
            self.confirm = False  # checked again on new evidence (a new attempt's lines) or at the wait's end
            return None
        if stayed:
            self._eval_verdict()
            first = v.results[min(stayed)]
            self.say(f"stopping: {first.check} {first.slug} failed again on the next check ({len(stayed)} failing)")
            return EXIT_FAILED
        self.confirm = bool(failing)  # a new failure is checked once more before the watch ends on it
        return None

    def _sigterm_end(self, failures: list) -> bool:
        """Whether the run ended on SIGTERM and nothing else (issue 46): Slurm sends it before a requeue or a
        preemption, and the requeued job appends to the same log seconds to minutes later. The watch then waits
        --requeue-grace seconds for the new attempt (TrainerWatch._requeue follows it) before ending on it."""
        roots = [r for r in failures if not r.consequence_of]  # RH203's process-gone follows from it
        if not roots or not all(r.cause in ("killed-by-signal", "slurm-preempted") for r in roots):
            return False
        if not all(r.cause == "slurm-preempted" or SIGTERM_END.search(r.summary) for r in roots):
            return False
        if self.requeue_wait_since is None:
            self.requeue_wait_since = self.clock()
            self.say(
                f"the run ended on SIGTERM ({roots[0].check} {roots[0].cause}), what a scheduler sends before "
                f"a requeue or a preemption: waiting up to {self.args.requeue_grace:g} s for a new attempt in the "
                "same log"
            )
        return True

    def _awaiting_requeue(self) -> bool:
        """Within --requeue-grace of a SIGTERM end (said once when it runs out)."""
        if self.requeue_wait_since is None:
            return False
        if self.clock() - self.requeue_wait_since < self.args.requeue_grace:
            return True
        if self.requeue_wait_since != -math.inf:
            self.say(f"no new attempt within {self.args.requeue_grace:g} s of the SIGTERM: the run has ended")
            self.requeue_wait_since = -math.inf  # said; the wait is over
        return False

    def _finish(self, ticks: dict[str, Tick]) -> int:
        self._eval_verdict()
        for res in self.verdicts.after_run() if self.verdicts else []:
            self.say(f"after the run: {describe(res, None)}")
        failing = self.verdicts.failed() if self.verdicts else []
        if failing:
            self.say(f"ended with {len(failing)} failing check(s): exit 1")
            return EXIT_FAILED
        missing = [k for k, t in ticks.items() if not t.completed]
        if missing:
            names = ", ".join(getattr(self.units[k], "label", k) for k in missing)
            self.say(f"ended without evidence of completion: {names}: exit 1")
            return EXIT_FAILED
        evidence = "; ".join(t.completed for t in ticks.values() if t.completed)
        self.say(f"completed healthy ({evidence}): exit 0")
        return EXIT_OK

    def _eval_verdict(self) -> None:
        """The triage runbook's last word for evaluation requests: infra or policy."""
        if self.verdicts is None or not any(
            isinstance(u, (ServerRequestWatch, HarvestWatch)) for u in self.units.values()
        ):
            return
        rh5 = [r for r in self.verdicts.results.values() if r.check.startswith("RH5")]
        infra = [r for r in rh5 if r.bad and r.verdict == "infra"]
        if infra:
            self.say(f"verdict: INFRA ({infra[0].cause}): not policy evidence; do not revert the policy")
        elif any(r.bad for r in rh5):
            bad = next(r for r in rh5 if r.bad)
            self.say(f"verdict: {(bad.verdict or 'not-evaluable').upper()} ({bad.check} {bad.cause})")
        elif rh5:
            self.say("verdict: terminal, completed, real per-player scores: policy evidence")

    def close(self) -> None:
        self.notifier.close()


def _remember_ctrl_c():
    """SIGINT raises KeyboardInterrupt as before, and is remembered: a Ctrl-C that lands inside a
    verdict session (in-process pytest) could be taken for that session's and lost, and the watch went on
    (issue 33's test_ctrl_c_exits_130_cleanly, under load). Returns a function: was there one?"""
    import signal

    seen: list[int] = []

    def on_sigint(signum: int, frame: Any) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread (an embedding caller): leave SIGINT as it is
        pass
    return lambda: bool(seen)


def main(argv: list[str] | None = None) -> int:
    try:
        args, passthrough = parse(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        print(f"pytest-runhealth watch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # argparse's own usage errors
        return EXIT_USAGE if exc.code else 0
    watch = Watch(args, passthrough)
    interrupted = _remember_ctrl_c()
    try:
        while True:
            started = time.monotonic()
            try:
                code = watch.tick()
            except StoreError as exc:  # the first poll of a store that cannot be read: a usage error, one line
                print(f"pytest-runhealth watch: {exc}", file=sys.stderr)
                return EXIT_USAGE
            if interrupted():  # a Ctrl-C that landed where the tick's pytest session swallowed it still counts
                raise KeyboardInterrupt
            if code is not None:
                return code
            time.sleep(max(0.0, watch.interval() - (time.monotonic() - started)))
    except KeyboardInterrupt:
        sys.stdout.write("\npytest-runhealth watch: interrupted (Ctrl-C); nothing was written\n")
        sys.stdout.flush()
        watch.notifier.close(wait_s=1.0)  # what was already said goes out; a hung endpoint is not waited for
        return EXIT_INTERRUPTED
    finally:
        watch.close()
