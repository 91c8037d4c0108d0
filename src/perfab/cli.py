"""The ``perfab`` command: thin wrappers over the library, one per subcommand.

``perfab run SPEC`` is the whole pipeline::

    exp = load_spec(path)                        # 1. spec
    backend = make_backend(exp.measure)          #    how runs are measured
    runner = Runner(exp, store, backend, ...)    # 2-4. plan, run, store
    runner.run(side, resume)
    analysis = analyse(store, exp.name)          # 5. analyse
    print(render(analysis, fmt))                 # 6. report

Every library error becomes one line on stderr and a non-zero exit
(2 for usage errors); ``main`` takes argv and streams so tests call it
directly.
"""

from __future__ import annotations

import argparse
import sys

from perfab.errors import PerfabError, UsageError
from perfab.report.kinds import FORMATS
from perfab.terminal import help_formatter

TYPE_CHECKING = False  # typing costs milliseconds of start-up; annotations are never evaluated
if TYPE_CHECKING:
    from typing import Callable, TextIO

DEFAULT_DB = ".perfab/results.db"


class _Parser(argparse.ArgumentParser):
    """argparse that reports through ``main``: a usage error raises, ``--help`` returns instead of exiting."""

    def error(self, message: str):
        raise UsageError(f"{message}; see `{self.prog} --help`")

    def exit(self, status: int = 0, message: str | None = None):
        raise _HelpShown(status)


class _HelpShown(Exception):
    """``--help`` was printed: ``main`` returns the status instead of the process exiting."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status  # the exit status argparse asked for (0 after help)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``command``, only that subcommand's arguments are filled in.

    Every subcommand is listed (name and help) unless ``command`` names one,
    so ``perfab --help`` and an unknown command's error read the same; a
    named command gets its own parser alone, filled: each parser costs
    start-up (``report``'s options import the spec schema; 13 empty ones
    took a quarter of ``perfab list``'s own time).
    """
    p = _Parser(prog="perfab", description="A/B performance experiments with verdicts you can defend.",
                formatter_class=help_formatter())
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (help_text, fill) in _SUBCOMMANDS.items():
        if command in _SUBCOMMANDS and name != command:
            continue
        sp = sub.add_parser(name, help=help_text, formatter_class=p.formatter_class,
                            **({"add_help": False} if name == "size" else {}))
        if command is None or command == name:
            fill(sp)
    return p


def _run_args(run: argparse.ArgumentParser) -> None:
    run.add_argument("spec", help="experiment TOML (see examples/default.toml)")
    _db(run)
    run.add_argument("--resume", action="store_true", help="continue the unfinished session of this experiment")
    run.add_argument("--new-session", action="store_true", help="start a new session even if one is unfinished")
    run.add_argument("--takeover", action="store_true",
                     help="with --resume: take over a session claimed by a runner that cannot be checked from here")
    run.add_argument("--side", help="for external sides: which side this machine/boot is")
    run.add_argument("--no-report", action="store_true", help="store the runs, print no report")
    run.add_argument("--html", metavar="FILE", help="also write the report as one self-contained HTML page to FILE")
    _report_opts(run)


def _report_args(rep: argparse.ArgumentParser) -> None:
    rep.add_argument("experiment", nargs="?", help="experiment name (default: the newest)")
    rep.add_argument("--db", action="append", default=None,
                     help=f"results database: a file (default {DEFAULT_DB}) or a postgresql:// URL; "
                          "give it twice or more to put several side by side")
    _report_opts(rep)
    rep.add_argument("--fail-on-regression", action="store_true",
                     help="exit 1 when a primary metric regressed beyond noise (**)")
    rep.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")


def _plan_args(plan: argparse.ArgumentParser) -> None:
    plan.add_argument("spec")
    plan.add_argument("--side", help="plan only this external side")
    plan.add_argument("--try", action="store_true", dest="trial",
                      help="run each workload once per side and sweep point (not stored) and show what each "
                           "metric reads; exit 1 when a run fails")
    plan.add_argument("--all", action="store_true", dest="show_all",
                      help="with --try: also list the readings perfab takes itself (rusage, counters)")


def _parse_args(prs: argparse.ArgumentParser) -> None:
    prs.add_argument("spec", help="experiment TOML whose workload names the parser and its options")
    prs.add_argument("output", metavar="OUTPUT-FILE", help="the workload's stdout, saved to a file")
    prs.add_argument("--stderr", metavar="FILE", help="the workload's stderr, for parsers that read it")
    prs.add_argument("--workload", metavar="NAME", help="the workload whose parser to use (default: the only one)")


def _bisect_args(bis: argparse.ArgumentParser) -> None:
    bis.add_argument("spec", help="experiment TOML whose first variant builds a commit ({src}, {build})")
    bis.add_argument("--good", required=True, help="a commit (ref) without the regression")
    bis.add_argument("--bad", required=True, help="a later commit with it")
    bis.add_argument("--metric", help="the metric to bisect (default: the spec's primary metric)")
    bis.add_argument("--retries", type=int, default=2,
                     help="extra sessions for an undecided commit (default 2; none for deterministic counts)")
    bis.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="for a sweep spec: the point to bisect at, one --param per swept parameter")
    _db(bis)


def _history_args(hist: argparse.ArgumentParser) -> None:
    hist.add_argument("experiment", nargs="?", help="experiment name (default: the newest)")
    hist.add_argument("--metric", action="extend", nargs="+", metavar="NAME",
                      help="metric names or labels (default: the declared metrics, else those with a direction)")
    hist.add_argument("--side", help="only this side (default: every side with runs)")
    _db(hist)
    hist.add_argument("--format", default="text", choices=["text", "json"])
    hist.add_argument("--alpha", type=float, default=0.05,
                      help="significance level of each change point's permutation test (default 0.05)")
    hist.add_argument("--repo", help="git repository that orders the commits (default: the spec's)")


def _no_args(p: argparse.ArgumentParser) -> None:
    """``env`` and ``counters`` take no arguments."""


def _screen_args(scr: argparse.ArgumentParser) -> None:
    scr.add_argument("commands", nargs="+", help="each a shell command string, e.g. 'perf bench sched pipe'")
    scr.add_argument("--runs", type=int, default=3, help="perf stat -r: repetitions per command (default 3)")


def _submit_args(sbm: argparse.ArgumentParser) -> None:
    sbm.add_argument("specs", nargs="+", metavar="SPEC", help="experiment TOML; each runs whole on one machine")
    sbm.add_argument("--db", required=True, help="the fleet's database: postgresql://user@host/dbname")
    sbm.add_argument("--machines", required=True, metavar="CLASS", help="the class of machines to run them on")


def _worker_args(wrk: argparse.ArgumentParser) -> None:
    wrk.add_argument("--db", required=True, help="the fleet's database: postgresql://user@host/dbname")
    wrk.add_argument("--machine-class", required=True, metavar="CLASS", help="the class of machines this one is in")
    wrk.add_argument("--machine", metavar="NAME",
                     help="this machine's name in the store and the queue (default: the host name)")
    wrk.add_argument("--stall-after", type=float, default=60.0, metavar="SECONDS",
                     help="a worker silent this long is gone: its job goes back to the queue (default 60)")
    wrk.add_argument("--until-idle", action="store_true", help="exit when no job is waiting")


def _kexec_args(p: argparse.ArgumentParser) -> None:
    from perfab.kexec.cli import add_args

    add_args(p)


def _size_args(size: argparse.ArgumentParser) -> None:
    size.add_argument("args", nargs=argparse.REMAINDER)


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB,
                   help=f"results database: a file (default {DEFAULT_DB}) or a postgresql://user@host/dbname URL")


def _report_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default="text", choices=list(FORMATS))
    p.add_argument("--alpha", type=float, help="significance level after FDR control (default: the spec's, 0.05)")
    p.add_argument("--confidence", type=float, help="confidence level of intervals (default: the spec's, 0.95)")
    from perfab.specfile.schema import METHODS  # imported when a command that reports is chosen

    p.add_argument("--method", choices=list(METHODS), help="override every row's method")
    p.add_argument("--all", action="store_true", dest="show_all",
                   help="also show parser metrics that have no declared direction")
    p.add_argument("--absolute", action="store_true",
                   help="with three or more sides, show each side's median instead of %% of the baseline")
    p.add_argument("--verbose", action="store_true",
                   help="text: print every note under a table and every warning, none folded or counted")


_SUBCOMMANDS = {  # name: (help line, what fills in its arguments), in `perfab --help` order
    "run": ("run an experiment spec, store every run, print the report", _run_args),
    "report": ("analyse stored runs and print the comparison", _report_args),
    "plan": ("print the schedule a spec gives (builds, setups, services, runs, looks), without running",
             _plan_args),
    "parse": ("read a saved workload output with the spec's parser, without running", _parse_args),
    "bisect": ("find the commit that made a metric regress (sides built from git)", _bisect_args),
    "list": ("list the experiments in a results database", _db),
    "history": ("each session's median in commit (or date) order, with change points", _history_args),
    "env": ("show the machine settings that matter for measurement, with advice", _no_args),
    "counters": ("show what this machine can count: PMU, counter budget, paranoid level", _no_args),
    "screen": ("rank commands by kernel share and front-end boundness", _screen_args),
    "submit": ("queue experiment specs for a class of lab machines (PostgreSQL --db)", _submit_args),
    "worker": ("on a lab machine: take queued experiments of its class and run them", _worker_args),
    "size": ("code-size diff of two ELF files, explained", _size_args),
    "kexec": ("sides this machine kexecs into: start, resume after a boot, status, check, systemd unit",
              _kexec_args),
}


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["size"]:
        from perfab.size.cli import main as size_main

        return size_main(argv[1:], stdout, stderr)
    args = None
    try:
        args = _parse(argv, stdout)
        if not args.command:
            build_parser("").print_help(stdout)
            return 2
        return COMMANDS[args.command](args, stdout, stderr)
    except _HelpShown as shown:
        return shown.status
    except PerfabError as e:
        print(f"perfab: {e}", file=stderr)
        return e.exit_code
    except KeyboardInterrupt:
        hint = _resume_command(args) if args is not None and args.command == "run" else "perfab run SPEC --resume"
        print(f"perfab: interrupted; stored runs are kept (continue with {hint})", file=stderr)
        return 130


def _parse(argv: list[str], stdout: TextIO) -> argparse.Namespace:
    """Parse ``argv``; --help prints to ``stdout`` (contextlib.redirect_stdout, without importing contextlib)."""
    saved, sys.stdout = sys.stdout, stdout
    try:
        return build_parser(_command_in(argv)).parse_args(argv)
    finally:
        sys.stdout = saved


def _command_in(argv: list[str]) -> str:
    """The subcommand ``argv`` names: its first word that is not an option ('' when none)."""
    return next((a for a in argv if not a.startswith("-")), "")


def main_entry() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `perfab report | head`
        code = 0
    sys.exit(code)


def cmd_run(args, stdout, stderr) -> int:
    from perfab.machine import snapshot
    from perfab.run.backends import make_backend
    from perfab.run.executor import RealExecutor
    from perfab.run.runner import Runner
    from perfab.specfile import load_spec
    from perfab.store import open_store

    if args.html:
        _refuse_inputs(args.html, [args.db], args.spec)
    exp = load_spec(args.spec)
    if args.html:
        _refuse_experiment_inputs(args.html, exp)
    if any(v.kernel is not None and v.kernel.boot == "kexec" for v in exp.variants):
        from perfab.kexec.cli import start
        from perfab.kexec.state import StateFile, state_dir

        return start(args.spec, args.db, StateFile(state_dir()), "reboot", None, args.resume, args.new_session,
                     stdout, stderr)
    from perfab.run.aligned import openings, pair  # with layout_check, the aligned pair runs after the main one

    with open_store(args.db) as store, _progress(stderr) as progress, RealExecutor() as executor:
        for one, resume in openings(store, pair(exp), args.resume):
            runner = Runner(one, store, make_backend(one.measure), executor, snapshot(), progress,
                            say=lambda line: progress.log(line))
            result = runner.run(side=args.side, resume=resume, new_session=args.new_session, takeover=args.takeover)
            if result.status != "finished":
                break
        if result.status == "interrupted":
            print(f"perfab: interrupted after {result.runs_done} runs; stored. Continue with "
                  f"`{_resume_command(args)}`", file=stderr)
        if args.no_report and not args.html:
            return 0 if result.status == "finished" else 130
        from perfab.analyse.compare import analyse  # the runs need no statistics: imported for the report
        from perfab.report import render

        analysis = analyse(store, exp.name, args.alpha, args.confidence, args.method, args.show_all)
    if args.html:
        _write_output(args.html, render(analysis, "html"))
    if not args.no_report:
        stdout.write(render(analysis, args.format, args.absolute, args.verbose))
    if result.status != "finished":
        return 130
    return _no_comparison(analysis, stderr)


def _no_comparison(analysis, stderr) -> int:
    """1, with one line, when a workload has no row at all: every run of a side failed or was excluded."""
    from perfab.analyse.model import compared

    empty = [w.name for w in analysis.workloads if not compared(analysis, w.name)]
    if not empty:
        return 0
    print(f"perfab: no comparison for workload {', '.join(map(repr, empty))}: a side has no usable runs to compare "
          "(the reasons are under the table); fix the workload and run again", file=stderr)
    return 1


def _resume_command(args) -> str:
    """The command that continues this session, with every option that locates it."""
    import shlex

    parts = ["perfab", "run", args.spec, "--resume"]
    if args.db != DEFAULT_DB:
        parts += ["--db", args.db]
    return shlex.join(parts)


def cmd_report(args, stdout, stderr) -> int:
    from perfab.analyse.compare import analyse
    from perfab.report import regressions, render
    from perfab.store import open_store

    databases = args.db or [DEFAULT_DB]
    if args.output:
        _refuse_inputs(args.output, databases)
    named = []
    for db in databases:
        with open_store(db, readonly=True) as store:
            named.append((db, analyse(store, args.experiment, args.alpha, args.confidence, args.method,
                                      args.show_all)))
    if len(named) == 1:
        text = render(named[0][1], args.format, args.absolute, args.verbose)
    else:
        from perfab.report.across import render_across

        text = render_across(named, args.format, lambda a, fmt: render(a, fmt, verbose=args.verbose))
    if args.output:
        for _, analysis in named:
            _refuse_experiment_inputs(args.output, analysis.spec, analysis.sources)
        _write_output(args.output, text)
    else:
        stdout.write(text)
    if args.fail_on_regression:
        bad = [f"{db}: {b}" if len(named) > 1 else b for db, analysis in named for b in regressions(analysis)]
        if bad:
            print(f"perfab: regression beyond noise in primary metric(s): {'; '.join(bad)}", file=stderr)
            return 1
    return max(_no_comparison(analysis, stderr) for _, analysis in named)


def _write_output(path: str, text: str) -> None:
    """Write a report to ``path`` atomically; a file that cannot be written is a usage error, not a traceback."""
    from perfab.outputs import write_atomic

    write_atomic(path, text)


def _refuse_inputs(output: str, databases: list[str], spec: str | None = None) -> None:
    """Refuse an output path that is a results database (or one of its files) or the spec, before any work."""
    from perfab.outputs import database_inputs, refuse_input

    inputs = {f: "results database" for db in databases for f in database_inputs(db)}
    if spec is not None:
        inputs[spec] = "experiment spec"
    refuse_input(output, inputs)


def _refuse_experiment_inputs(output: str, exp, sources: dict | None = None) -> None:
    """Refuse an output path that is a file the experiment reads (``perfab.inputs.refuse_inputs``)."""
    if exp is not None:
        from perfab.inputs import refuse_inputs

        refuse_inputs(output, exp, sources)


def cmd_plan(args, stdout, stderr) -> int:
    from perfab.report.plan import schedule_lines
    from perfab.run.backends import make_backend
    from perfab.run.build import resolve
    from perfab.run.preflight import preflight
    from perfab.run.schedule import new_schedule
    from perfab.specfile import load_spec

    exp = load_spec(args.spec)
    sides = [args.side] if args.side else None
    if args.side:
        exp.variant(args.side)  # raises for an unknown name
    if args.trial:
        return _try(exp, args, stdout, stderr)
    chosen = [v for v in exp.variants if sides is None or v.name in sides]
    sources = resolve(exp, chosen)
    backend = make_backend(exp.measure)
    groups = backend.groups()
    schedule = new_schedule(exp, sides, len(groups), sources)
    preflight(exp, schedule, _side_env(exp), sources=sources, built=False)  # built programs appear when built
    backend.preflight(exp, tuple(chosen))
    for line in backend.plan_lines(tuple(chosen)):
        print(line, file=stdout)
    if exp.sequential is not None:
        print(f"sequential: blocks after the first {exp.sequential.min_runs} runs per side run only while rows "
              f"are undecided (at most {exp.sequential.max_runs} per side)", file=stdout)
    for line in schedule_lines(exp, schedule.possible(), groups, sources):
        print(line, file=stdout)
    from perfab.kexec.boots import plan_lines as kexec_lines
    from perfab.run.aligned import plan_lines as aligned_lines

    for line in [*kexec_lines(exp, schedule.runs()), *aligned_lines(exp, sides)]:
        print(line, file=stdout)
    for line in _plan_warnings(exp, backend):  # once the plan stands: a refused spec prints only its refusal
        print(f"perfab: warning: {line}", file=stderr)
    return 0


def _plan_warnings(exp, backend) -> list[str]:
    """Verdicts the planned runs per side can never give (``perfab.analyse.planning``)."""
    from perfab.analyse.planning import plan_warnings
    from perfab.methodtraits import declared

    runs = exp.sequential.max_runs if exp.sequential is not None else exp.runs
    chosen = {exp.method, *(m.method for w in exp.workloads for m in w.metrics if m.method)}
    exact = any(m.exact for m in backend.metric_info().values()) or any(declared(n).counted for n in chosen)
    return plan_warnings(runs, exp.alpha, exact)


def _try(exp, args, stdout, stderr) -> int:
    """``plan --try``: one run per side and point, what each metric read; 1 when a run failed."""
    from perfab.report.trial import trial_lines
    from perfab.run.trial import try_spec

    with _progress(stderr) as progress:
        trials = try_spec(exp, args.side, say=progress.log)
    declared = {w.name: {m.name for m in w.metrics} for w in exp.workloads}
    for line in trial_lines(trials, declared, args.show_all):
        print(line, file=stdout)
    failed = [t for t in trials if t.status != "ok"]
    if failed:
        print(f"perfab: {len(failed)} of {len(trials)} trial runs failed (first: {failed[0].reason}); fix the "
              "workload or its parser before `perfab run`", file=stderr)
        return 1
    return 0


def cmd_parse(args, stdout, stderr) -> int:
    from perfab.report.trial import parsed_lines
    from perfab.run.trial import parse_output
    from perfab.specfile import load_spec

    workload, parsed = parse_output(load_spec(args.spec), args.workload, args.output, args.stderr)
    for line in parsed_lines(workload.name, parsed):
        print(line, file=stdout)
    return 0


def _side_env(exp):
    """A side's environment as the runner builds it (for looking programs up on its PATH)."""
    import os

    return lambda variant: {**os.environ, **variant.env, "LC_ALL": "C"}


def cmd_bisect(args, stdout, stderr) -> int:
    from perfab.bisect import bisect, max_steps
    from perfab.machine import snapshot
    from perfab.report import render
    from perfab.run.backends import make_backend
    from perfab.run.executor import RealExecutor
    from perfab.run.runner import Runner
    from perfab.store import open_store

    if args.retries < 0:
        raise UsageError(f"--retries {args.retries}: must be >= 0")
    env = snapshot()
    with open_store(args.db) as store, _progress(stderr) as progress, RealExecutor() as executor:
        def run_step(exp):
            runner = Runner(exp, store, make_backend(exp.measure), executor, env, progress, say=progress.log)
            result = runner.run(new_session=True)
            if result.status != "finished":
                raise PerfabError(f"bisect step {exp.name} was {result.status}; its runs are stored")

        result = bisect(args.spec, args.good, args.bad, store, run_step, args.metric, args.retries, progress.log,
                        _params(args.param))
    print(result.regression, file=stdout)
    if result.further:
        print(result.further, file=stdout)
    print("", file=stdout)
    print(f"path ({len(result.steps)} of at most {max_steps(result.candidates) - 2} steps over "
          f"{result.candidates} commits; searched: {result.walk}):", file=stdout)
    for step in result.steps:
        print(f"  {step.commit[:12]}  {step.decision:<5}  vs good {step.vs_good:<14} to bad {step.vs_bad:<14} "
              f"{step.subject[:30]}", file=stdout)
    print("", file=stdout)
    stdout.write(render(result.analysis, "text"))
    return 0


def _params(given: list[str]) -> dict[str, str]:
    """``--param NAME=VALUE`` options as a mapping; a malformed one is a usage error."""
    out = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--param {item}: write NAME=VALUE, e.g. --param threads=4")
        out[name.strip()] = value.strip()
    return out


def cmd_list(args, stdout, stderr) -> int:
    from perfab.store.listing import overview  # the SQL counts alone: no typed values, no pathlib

    for name, sessions, runs, status in overview(args.db):
        last = f", last {status}" if sessions else ""  # an experiment row without a session
        print(f"{name:<32} {sessions} session(s), {runs} run(s){last}", file=stdout)
    return 0


def cmd_history(args, stdout, stderr) -> int:
    from perfab.analyse.history import history
    from perfab.report.history import render_history
    from perfab.store import open_store

    with open_store(args.db, readonly=True) as store:
        found = history(store, args.experiment, args.metric, args.side, args.alpha, repo=args.repo)
    stdout.write(render_history(found, args.format))
    return 0


def cmd_env(args, stdout, stderr) -> int:
    from perfab.machine import checks

    for check in checks():
        advice = check.advice()
        print(f"{check.name:<28} {check.show()}", file=stdout)
        if advice:
            print(f"{'':<28} -> {advice}", file=stdout)
    return cmd_counters(args, stdout, stderr)


def cmd_counters(args, stdout, stderr) -> int:
    from perfab.run.backends.perfprobe import describe_counters, probe_counter_budget

    stdout.write(describe_counters(probe_counter_budget()).rstrip() + "\n")
    return 0


def cmd_screen(args, stdout, stderr) -> int:
    from perfab.report.screen import format_screen
    from perfab.run.backends.perfscreen import rank, screen_command

    results = [screen_command(["/bin/sh", "-c", c], runs=args.runs) for c in args.commands]
    stdout.write(format_screen(rank(results)))
    return 0


def cmd_kexec(args, stdout, stderr) -> int:
    from perfab.kexec.cli import cmd_kexec as kexec

    return kexec(args, stdout, stderr)


def cmd_submit(args, stdout, stderr) -> int:
    from perfab.fleet.app import submit

    queued = submit(args.db, args.specs, args.machines, lambda line: print(f"perfab: {line}", file=stdout))
    return 0 if all(q.job is not None for q in queued) else 1


def cmd_worker(args, stdout, stderr) -> int:
    import socket

    from perfab.fleet.worker import serve

    machine = args.machine or socket.gethostname()

    def say(line: str) -> None:
        print(f"perfab worker {machine}: {line}", file=stderr, flush=True)

    serve(args.db, args.machine_class, machine, args.stall_after, args.until_idle, say)
    return 0


COMMANDS: dict[str, Callable] = {
    "run": cmd_run, "report": cmd_report, "plan": cmd_plan, "bisect": cmd_bisect, "list": cmd_list, "env": cmd_env,
    "counters": cmd_counters, "screen": cmd_screen, "submit": cmd_submit, "worker": cmd_worker,
}
COMMANDS["history"] = cmd_history
COMMANDS["kexec"] = cmd_kexec
COMMANDS["parse"] = cmd_parse


class _progress:
    """A rich progress bar with ETA on a terminal; otherwise, in a long session, one line a minute."""

    LINE_EVERY_S = 60.0  # off a terminal: seconds between progress lines (none in a session shorter than this)

    def __init__(self, stream: TextIO):
        import time

        self.stream = stream
        self.bar = None
        self.clock = time.monotonic
        self.started = self.last = self.stretch = self.clock()  # the session's, the last line's, the stretch's start

    def __enter__(self):
        if getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), console=Console(file=self.stream), transient=True)
            self.bar.__enter__()
            self.task = None
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.bar is None:
            self._line(done, total, label)
            return
        if self.task is None:
            self.task = self.bar.add_task(label, total=total)
        self.bar.update(self.task, completed=done, total=total, description=label)
        if done >= total:
            self.bar.remove_task(self.task)
            self.task = None

    def log(self, line: str) -> None:
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            print(f"perfab: {line}", file=self.stream)

    def _line(self, done: int, total: int, label: str) -> None:
        """``run 12 of 40 (locksys inlined), 3m elapsed, about 7m left``, at most once a minute."""
        now = self.clock()
        if done == 0:
            self.stretch = now  # a workload's runs begin: the estimate is theirs
        if now - self.last < self.LINE_EVERY_S or not 0 < done < total:
            return
        self.last = now
        left = (now - self.stretch) / done * (total - done)
        self.log(f"run {done} of {total} ({label}), {_minutes(now - self.started)} elapsed, "
                 f"about {_minutes(left)} left")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}m" if seconds >= 90 else f"{seconds:.0f}s"


if __name__ == "__main__":
    main_entry()
