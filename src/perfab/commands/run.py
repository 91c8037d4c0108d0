"""``perfab run SPEC``: the whole pipeline, from the spec to the report.

::

    exp = load_spec(path)                        # 1. spec
    backend = make_backend(exp.measure)          #    how runs are measured
    runner = Runner(exp, store, backend, ...)    # 2-4. plan, run, store
    runner.run(side, resume)
    analysis = analyse(store, exp.name)          # 5. analyse
    print(render(analysis, fmt))                 # 6. report
"""

from __future__ import annotations

from perfab.commands.base import DEFAULT_DB, Command, add_db, add_report_options
from perfab.commands.report import no_comparison, refuse_experiment_inputs, refuse_inputs, write_output


class Run(Command):
    name = "run"
    help = "run an experiment spec, store every run, print the report"

    def add_arguments(self, p) -> None:
        p.add_argument("spec", help="experiment TOML (see examples/default.toml)")
        add_db(p)
        p.add_argument("--resume", action="store_true", help="continue the unfinished session of this experiment")
        p.add_argument("--new-session", action="store_true", help="start a new session even if one is unfinished")
        p.add_argument("--takeover", action="store_true",
                       help="with --resume: take over a session claimed by a runner that cannot be checked from here")
        p.add_argument("--side", help="for external sides: which side this machine/boot is")
        p.add_argument("--no-report", action="store_true", help="store the runs, print no report")
        p.add_argument("--html", metavar="FILE", help="also write the report as one self-contained HTML page to FILE")
        add_report_options(p)

    def run(self, args, stdout, stderr) -> int:
        from perfab.specfile import load_spec

        if args.html:
            refuse_inputs(args.html, [args.db], args.spec)
        exp = load_spec(args.spec)
        if args.html:
            refuse_experiment_inputs(args.html, exp)
        if any(v.kernel is not None and v.kernel.boot == "kexec" for v in exp.variants):
            from perfab.commands.kexec import start
            from perfab.kexec.state import StateFile, state_dir

            return start(args.spec, args.db, StateFile(state_dir()), "reboot", None, args.resume, args.new_session,
                         stdout, stderr)
        return _run(exp, args, stdout, stderr)

    def interrupted_line(self, args) -> str:
        if args is None:
            return super().interrupted_line(args)
        return f"perfab: interrupted; stored runs are kept (continue with {resume_command(args)})"


def _run(exp, args, stdout, stderr) -> int:
    """Run the sessions of ``exp`` (and its aligned pair), then report unless told not to."""
    from perfab.commands.progress import Progress
    from perfab.machine import snapshot
    from perfab.run.aligned import openings, pair  # with layout_check, the aligned pair runs after the main one
    from perfab.run.backends import make_backend
    from perfab.run.executor import RealExecutor
    from perfab.run.runner import Runner
    from perfab.store import open_store

    with open_store(args.db) as store, Progress(stderr) as progress, RealExecutor() as executor:
        for one, resume in openings(store, pair(exp), args.resume):
            runner = Runner(one, store, make_backend(one.measure), executor, snapshot(), progress,
                            say=lambda line: progress.log(line))
            result = runner.run(side=args.side, resume=resume, new_session=args.new_session, takeover=args.takeover)
            if result.status != "finished":
                break
        if result.status == "interrupted":
            print(f"perfab: interrupted after {result.runs_done} runs; stored. Continue with "
                  f"`{resume_command(args)}`", file=stderr)
        if args.no_report and not args.html:
            return 0 if result.status == "finished" else 130
        from perfab.analyse.compare import analyse  # the runs need no statistics: imported for the report
        from perfab.report import render

        analysis = analyse(store, exp.name, args.alpha, args.confidence, args.method, args.show_all)
    if args.html:
        write_output(args.html, render(analysis, "html"))
    if not args.no_report:
        stdout.write(render(analysis, args.format, args.absolute, args.verbose))
    if result.status != "finished":
        return 130
    return no_comparison(analysis, stderr)


def resume_command(args) -> str:
    """The command that continues this session, with every option that locates it."""
    import shlex

    parts = ["perfab", "run", args.spec, "--resume"]
    if args.db != DEFAULT_DB:
        parts += ["--db", args.db]
    return shlex.join(parts)
