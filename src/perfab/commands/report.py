"""Commands that read stored runs: ``perfab report``, ``perfab history`` and ``perfab list``.

Also the steps a report's output shares with ``perfab run``: refusing an
output path that is one of the inputs, writing it atomically, and the exit
status of a comparison that has no row.
"""

from __future__ import annotations

from perfab.commands.base import DEFAULT_DB, Command, add_db, add_report_options


class Report(Command):
    name = "report"
    help = "analyse stored runs and print the comparison"

    def add_arguments(self, p) -> None:
        p.add_argument("experiment", nargs="?", help="experiment name (default: the newest)")
        p.add_argument("--db", action="append", default=None,
                       help=f"results database: a file (default {DEFAULT_DB}) or a postgresql:// URL; "
                            "give it twice or more to put several side by side")
        add_report_options(p)
        p.add_argument("--fail-on-regression", action="store_true",
                       help="exit 1 when a primary metric regressed beyond noise (**)")
        p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")

    def run(self, args, stdout, stderr) -> int:
        from perfab.analyse.compare import analyse
        from perfab.report import regressions, render
        from perfab.store import open_store

        databases = args.db or [DEFAULT_DB]
        if args.output:
            refuse_inputs(args.output, databases)
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
                refuse_experiment_inputs(args.output, analysis.spec, analysis.sources)
            write_output(args.output, text)
        else:
            stdout.write(text)
        if args.fail_on_regression:
            bad = [f"{db}: {b}" if len(named) > 1 else b for db, analysis in named for b in regressions(analysis)]
            if bad:
                print(f"perfab: regression beyond noise in primary metric(s): {'; '.join(bad)}", file=stderr)
                return 1
        return max(no_comparison(analysis, stderr) for _, analysis in named)


class History(Command):
    name = "history"
    help = "each session's median in commit (or date) order, with change points"

    def add_arguments(self, p) -> None:
        p.add_argument("experiment", nargs="?", help="experiment name (default: the newest)")
        p.add_argument("--metric", action="extend", nargs="+", metavar="NAME",
                       help="metric names or labels (default: the declared metrics, else those with a direction)")
        p.add_argument("--side", help="only this side (default: every side with runs)")
        add_db(p)
        p.add_argument("--format", default="text", choices=["text", "json"])
        p.add_argument("--alpha", type=float, default=0.05,
                       help="significance level of each change point's permutation test (default 0.05)")
        p.add_argument("--repo", help="git repository that orders the commits (default: the spec's)")

    def run(self, args, stdout, stderr) -> int:
        from perfab.analyse.history import history
        from perfab.report.history import render_history
        from perfab.store import open_store

        with open_store(args.db, readonly=True) as store:
            found = history(store, args.experiment, args.metric, args.side, args.alpha, repo=args.repo)
        stdout.write(render_history(found, args.format))
        return 0


class List(Command):
    name = "list"
    help = "list the experiments in a results database"

    def add_arguments(self, p) -> None:
        add_db(p)

    def run(self, args, stdout, stderr) -> int:
        from perfab.store.listing import overview  # the SQL counts alone: no typed values, no pathlib

        for name, sessions, runs, status in overview(args.db):
            last = f", last {status}" if sessions else ""  # an experiment row without a session
            print(f"{name:<32} {sessions} session(s), {runs} run(s){last}", file=stdout)
        return 0


def no_comparison(analysis, stderr) -> int:
    """1, with one line, when a workload has no row at all: every run of a side failed or was excluded."""
    from perfab.analyse.model import compared

    empty = [w.name for w in analysis.workloads if not compared(analysis, w.name)]
    if not empty:
        return 0
    print(f"perfab: no comparison for workload {', '.join(map(repr, empty))}: a side has no usable runs to compare "
          "(the reasons are under the table); fix the workload and run again", file=stderr)
    return 1


def write_output(path: str, text: str) -> None:
    """Write a report to ``path`` atomically; a file that cannot be written is a usage error, not a traceback."""
    from perfab.outputs import write_atomic

    write_atomic(path, text)


def refuse_inputs(output: str, databases: list[str], spec: str | None = None) -> None:
    """Refuse an output path that is a results database (or one of its files) or the spec, before any work."""
    from perfab.outputs import database_inputs, refuse_input

    inputs = {f: "results database" for db in databases for f in database_inputs(db)}
    if spec is not None:
        inputs[spec] = "experiment spec"
    refuse_input(output, inputs)


def refuse_experiment_inputs(output: str, exp, sources: dict | None = None) -> None:
    """Refuse an output path that is a file the experiment reads (``perfab.inputs.refuse_inputs``)."""
    if exp is not None:
        from perfab.inputs import refuse_inputs as refuse

        refuse(output, exp, sources)
