"""Commands about this machine: ``perfab env``, ``perfab counters`` and ``perfab screen``."""

from __future__ import annotations

from perfab.commands.base import Command


class Env(Command):
    name = "env"
    help = "show the machine settings that matter for measurement, with advice"

    def run(self, args, stdout, stderr) -> int:
        from perfab.machine import checks

        for check in checks():
            advice = check.advice()
            print(f"{check.name:<28} {check.show()}", file=stdout)
            if advice:
                print(f"{'':<28} -> {advice}", file=stdout)
        return Counters().run(args, stdout, stderr)


class Counters(Command):
    name = "counters"
    help = "show what this machine can count: PMU, counter budget, paranoid level"

    def run(self, args, stdout, stderr) -> int:
        from perfab.run.backends.perfprobe import describe_counters, probe_counter_budget

        stdout.write(describe_counters(probe_counter_budget()).rstrip() + "\n")
        return 0


class Screen(Command):
    name = "screen"
    help = "rank commands by kernel share and front-end boundness"

    def add_arguments(self, p) -> None:
        p.add_argument("commands", nargs="+", help="each a shell command string, e.g. 'perf bench sched pipe'")
        p.add_argument("--runs", type=int, default=3, help="perf stat -r: repetitions per command (default 3)")

    def run(self, args, stdout, stderr) -> int:
        from perfab.report.screen import format_screen
        from perfab.run.backends.perfscreen import rank, screen_command

        results = [screen_command(["/bin/sh", "-c", c], runs=args.runs) for c in args.commands]
        stdout.write(format_screen(rank(results)))
        return 0
