"""``perfab bisect SPEC --good A --bad B``: the commit that made a metric regress, one session per step."""

from __future__ import annotations

from perfab.commands.base import Command, add_db
from perfab.errors import PerfabError, UsageError


class Bisect(Command):
    name = "bisect"
    help = "find the commit that made a metric regress (sides built from git)"

    def add_arguments(self, p) -> None:
        p.add_argument("spec", help="experiment TOML whose first variant builds a commit ({src}, {build})")
        p.add_argument("--good", required=True, help="a commit (ref) without the regression")
        p.add_argument("--bad", required=True, help="a later commit with it")
        p.add_argument("--metric", help="the metric to bisect (default: the spec's primary metric)")
        p.add_argument("--retries", type=int, default=2,
                       help="extra sessions for an undecided commit (default 2; none for deterministic counts)")
        p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="for a sweep spec: the point to bisect at, one --param per swept parameter")
        add_db(p)

    def run(self, args, stdout, stderr) -> int:
        from perfab.bisect import bisect
        from perfab.commands.progress import Progress
        from perfab.machine import snapshot
        from perfab.run.backends import make_backend
        from perfab.run.executor import RealExecutor
        from perfab.run.runner import Runner
        from perfab.store import open_store

        if args.retries < 0:
            raise UsageError(f"--retries {args.retries}: must be >= 0")
        env = snapshot()
        with open_store(args.db) as store, Progress(stderr) as progress, RealExecutor() as executor:
            def run_step(exp):
                runner = Runner(exp, store, make_backend(exp.measure), executor, env, progress, say=progress.log)
                result = runner.run(new_session=True)
                if result.status != "finished":
                    raise PerfabError(f"bisect step {exp.name} was {result.status}; its runs are stored")

            result = bisect(args.spec, args.good, args.bad, store, run_step, args.metric, args.retries,
                            progress.log, params(args.param))
        _print(result, stdout)
        return 0


def _print(result, stdout) -> None:
    """The commit found, the path the search took, and the report of the last step."""
    from perfab.bisect import max_steps
    from perfab.report import render

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


def params(given: list[str]) -> dict[str, str]:
    """``--param NAME=VALUE`` options as a mapping; a malformed one is a usage error."""
    out = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--param {item}: write NAME=VALUE, e.g. --param threads=4")
        out[name.strip()] = value.strip()
    return out
