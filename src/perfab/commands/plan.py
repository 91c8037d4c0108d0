"""Commands that read a spec and run nothing stored: ``perfab plan`` (and ``plan --try``) and ``perfab parse``."""

from __future__ import annotations

from perfab.commands.base import Command


class Plan(Command):
    name = "plan"
    help = "print the schedule a spec gives (builds, setups, services, runs, looks), without running"

    def add_arguments(self, p) -> None:
        p.add_argument("spec")
        p.add_argument("--side", help="plan only this external side")
        p.add_argument("--try", action="store_true", dest="trial",
                       help="run each workload once per side and sweep point (not stored) and show what each "
                            "metric reads; exit 1 when a run fails")
        p.add_argument("--all", action="store_true", dest="show_all",
                       help="with --try: also list the readings perfab takes itself (rusage, counters)")

    def run(self, args, stdout, stderr) -> int:
        from perfab.specfile import load_spec

        exp = load_spec(args.spec)
        if args.side:
            exp.variant(args.side)  # raises for an unknown name
        if args.trial:
            return _try(exp, args, stdout, stderr)
        return _plan(exp, [args.side] if args.side else None, stdout, stderr)


def _plan(exp, sides: list[str] | None, stdout, stderr) -> int:
    """Print the plan of ``exp`` for ``sides`` (None: all), then the verdicts it can never give."""
    from perfab.kexec.boots import plan_lines as kexec_lines
    from perfab.replication import with_builds
    from perfab.report.plan import schedule_lines
    from perfab.run.aligned import plan_lines as aligned_lines
    from perfab.run.backends import make_backend
    from perfab.run.build import resolve
    from perfab.run.preflight import preflight
    from perfab.run.schedule import new_schedule

    chosen = [v for v in exp.variants if sides is None or v.name in sides]
    sources = resolve(exp, chosen)
    backend = make_backend(exp.measure)
    groups = backend.groups()
    schedule = new_schedule(exp, sides, len(groups), sources)
    preflight(exp, schedule, _side_env(exp), sources=sources, built=False)  # built programs appear when built
    backend.preflight(exp, tuple(chosen))
    for line in backend.plan_lines(tuple(chosen)):
        print(line, file=stdout)
    replication = with_builds(backend.replication(exp, exp.perturb_seed or 0), exp.layout_builds,
                              exp.perturb_seed or 0)
    if replication.unit != "run" or replication.perturbed:  # a plain run on this machine: nothing to say
        seed = "drawn when the session begins" if exp.perturb_seed is None else None
        print(f"replication: {replication.describe(exp.runs, seed)}", file=stdout)
    if exp.layout_builds > 1:
        print(f"layout builds: each side's build below runs {exp.layout_builds} times, each time with "
              "{layout_cflags} = -Wl,PAD.o, a pad of seeded size linked before the program's code and data "
              "(perfab.run.layoutbuild)", file=stdout)
    if exp.sequential is not None:
        print(f"sequential: blocks after the first {exp.sequential.min_runs} runs per side run only while rows "
              f"are undecided (at most {exp.sequential.max_runs} per side)", file=stdout)
    for line in schedule_lines(exp, schedule.possible(), groups, sources, replication):
        print(line, file=stdout)
    for line in [*kexec_lines(exp, schedule.runs()), *aligned_lines(exp, sides)]:
        print(line, file=stdout)
    for line in _plan_warnings(exp, backend, replication):  # once the plan stands: a refusal prints alone
        print(f"perfab: warning: {line}", file=stderr)
    return 0


def _plan_warnings(exp, backend, replication) -> list[str]:
    """Verdicts the planned runs (or boots) per side can never give (``perfab.analyse.planning``)."""
    from perfab.analyse.planning import plan_warnings
    from perfab.methodtraits import declared

    runs = exp.sequential.max_runs if exp.sequential is not None else exp.runs
    chosen = {exp.method, *(m.method for w in exp.workloads for m in w.metrics if m.method)}
    exact = any(m.exact for m in backend.metric_info().values()) or any(declared(n).counted for n in chosen)
    if replication.unit != "run":
        return plan_warnings(min(runs, replication.units), exp.alpha, exact, replication.unit)
    return plan_warnings(runs, exp.alpha, exact)


def _try(exp, args, stdout, stderr) -> int:
    """``plan --try``: one run per side and point, what each metric read; 1 when a run failed."""
    from perfab.commands.progress import Progress
    from perfab.report.trial import trial_lines
    from perfab.run.trial import try_spec

    with Progress(stderr) as progress:
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


def _side_env(exp):
    """A side's environment as the runner builds it (for looking programs up on its PATH)."""
    import os

    return lambda variant: {**os.environ, **variant.env, "LC_ALL": "C"}


class Parse(Command):
    name = "parse"
    help = "read a saved workload output with the spec's parser, without running"

    def add_arguments(self, p) -> None:
        p.add_argument("spec", help="experiment TOML whose workload names the parser and its options")
        p.add_argument("output", metavar="OUTPUT-FILE", help="the workload's stdout, saved to a file")
        p.add_argument("--stderr", metavar="FILE", help="the workload's stderr, for parsers that read it")
        p.add_argument("--workload", metavar="NAME",
                       help="the workload whose parser to use (default: the only one)")

    def run(self, args, stdout, stderr) -> int:
        from perfab.report.trial import parsed_lines
        from perfab.run.trial import parse_output
        from perfab.specfile import load_spec

        workload, parsed = parse_output(load_spec(args.spec), args.workload, args.output, args.stderr)
        for line in parsed_lines(workload.name, parsed):
            print(line, file=stdout)
        return 0
