"""The fleet's commands: ``perfab submit`` queues experiments, ``perfab worker`` runs them on a lab machine."""

from __future__ import annotations

from perfab.commands.base import Command

FLEET_DB = "the fleet's database: postgresql://user@host/dbname"  # the help of their --db


class Submit(Command):
    name = "submit"
    help = "queue experiment specs for a class of lab machines (PostgreSQL --db)"

    def add_arguments(self, p) -> None:
        p.add_argument("specs", nargs="+", metavar="SPEC", help="experiment TOML; each runs whole on one machine")
        p.add_argument("--db", required=True, help=FLEET_DB)
        p.add_argument("--machines", required=True, metavar="CLASS", help="the class of machines to run them on")

    def run(self, args, stdout, stderr) -> int:
        from perfab.fleet.app import submit

        queued = submit(args.db, args.specs, args.machines, lambda line: print(f"perfab: {line}", file=stdout))
        return 0 if all(q.job is not None for q in queued) else 1


class Worker(Command):
    name = "worker"
    help = "on a lab machine: take queued experiments of its class and run them"

    def add_arguments(self, p) -> None:
        p.add_argument("--db", required=True, help=FLEET_DB)
        p.add_argument("--machine-class", required=True, metavar="CLASS",
                       help="the class of machines this one is in")
        p.add_argument("--machine", metavar="NAME",
                       help="this machine's name in the store and the queue (default: the host name)")
        p.add_argument("--stall-after", type=float, default=60.0, metavar="SECONDS",
                       help="a worker silent this long is gone: its job goes back to the queue (default 60)")
        p.add_argument("--until-idle", action="store_true", help="exit when no job is waiting")

    def run(self, args, stdout, stderr) -> int:
        import socket

        from perfab.fleet.worker import serve

        machine = args.machine or socket.gethostname()

        def say(line: str) -> None:
            print(f"perfab worker {machine}: {line}", file=stderr, flush=True)

        serve(args.db, args.machine_class, machine, args.stall_after, args.until_idle, say)
        return 0
