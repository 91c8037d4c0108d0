"""``perfab kexec ACTION``, and ``perfab run`` on a spec whose sides kexec: thin wrappers over ``perfab.kexec.driver``.

    perfab kexec start SPEC [--db PATH] [--then reboot|home|poweroff|stay] [--state-dir DIR] [--machine NAME]
    perfab kexec resume [--state-dir DIR]        # what the systemd unit runs after every boot
    perfab kexec status [--state-dir DIR]        # the session in progress and the kernels it ran, in order
    perfab kexec check SPEC                      # the checks `start` makes, nothing stored or switched
    perfab kexec unit [--install] [--watchdog SECONDS] [--state-dir DIR]
    perfab kexec abandon [--state-dir DIR]       # forget the session in progress (its runs stay stored)
"""

from __future__ import annotations

from perfab.commands.base import DEFAULT_DB, Command
from perfab.errors import UsageError

ACTIONS = ("start", "resume", "status", "check", "unit", "abandon")


class Kexec(Command):
    name = "kexec"
    help = "sides this machine kexecs into: start, resume after a boot, status, check, systemd unit"

    def add_arguments(self, p) -> None:
        from perfab.kexec.state import THEN

        p.add_argument("action", choices=ACTIONS,
                       help="start a session, resume it after a boot, show it, check a spec, "
                            "print or install the systemd unit, or abandon the session")
        p.add_argument("spec", nargs="?", help="experiment TOML (start, check)")
        p.add_argument("--db", default=DEFAULT_DB, help="results database (start)")
        p.add_argument("--then", choices=THEN, default="reboot",
                       help="after the last side: reboot into the default boot entry (default), kexec back into the "
                            "kernel the session began in (home), power off, or stay")
        p.add_argument("--state-dir", help="where the session's state survives reboots "
                                           "(default $PERFAB_KEXEC_STATE or /var/lib/perfab/kexec)")
        p.add_argument("--machine", help="this machine's name in the store (default: the host name)")
        p.add_argument("--resume", action="store_true", help="start: continue the unfinished session of the spec")
        p.add_argument("--new-session", action="store_true", help="start: a new session beside an unfinished one")
        p.add_argument("--install", action="store_true", help="unit: write and enable it (root)")
        p.add_argument("--watchdog", type=int, metavar="SECONDS",
                       help="unit --install: also arm the hardware watchdog for every kexec "
                            "(systemd KExecWatchdogSec)")
        p.add_argument("--perfab",
                       help="unit: the perfab command the unit runs (default: the perfab beside this Python)")

    def run(self, args, stdout, stderr) -> int:
        from perfab.kexec.state import StateFile, state_dir

        states = StateFile(state_dir(args.state_dir))
        if args.action in ("start", "check") and not args.spec:
            raise UsageError(f"perfab kexec {args.action} needs the spec: perfab kexec {args.action} SPEC")
        if args.action == "unit":
            return _unit(args, states, stdout)
        if args.action == "status":
            return _status(states, stdout)
        if args.action == "check":
            return _check(args, stdout)
        if args.action == "start":
            return start(args.spec, args.db, states, args.then, args.machine, args.resume, args.new_session, stdout,
                         stderr)
        return _resume(states, args.action == "abandon", stdout, stderr)


def start(spec: str, db: str, states, then: str, machine: str | None, resume: bool, new_session: bool,
          stdout, stderr) -> int:
    """Begin a kexec session of ``spec`` (``perfab run`` on such a spec comes here with the defaults)."""
    from pathlib import Path

    from perfab.kexec import driver
    from perfab.kexec.context import real_context
    from perfab.specfile import load_spec
    from perfab.store import open_store

    exp = load_spec(spec)
    db = db if "://" in db else str(Path(db).resolve())
    with open_store(db, machine=machine) as store, real_context(states, stderr) as ctx:
        step = driver.begin(exp, store, ctx, db, then, machine, resume, new_session)
    return _said(step, stdout)


def _resume(states, abandon: bool, stdout, stderr) -> int:
    """After a boot: continue the session in progress (or, ``abandon``, forget it)."""
    import os

    from perfab.kexec import driver
    from perfab.kexec.context import real_context
    from perfab.specfile import parse_spec
    from perfab.store import open_store

    state = states.read()
    if state is None:
        print("perfab: no kexec session in progress", file=stdout)
        return 0
    os.chdir(state.cwd)
    with open_store(state.db, machine=state.machine) as store, real_context(states, stderr) as ctx:
        if abandon:
            return _said(driver.abandon(state, store, ctx), stdout)
        return _said(driver.proceed(state, parse_spec(state.spec_text, state.spec), store, ctx), stdout)


def _said(step, stdout) -> int:
    from perfab.kexec.boots import order_line

    print(f"perfab: {step.text}", file=stdout, flush=True)
    if step.kind in ("finished", "failed") and step.order:
        print(f"perfab: kernels in the order they ran: {order_line(list(step.order))}", file=stdout)
    return 1 if step.kind == "failed" else 0


def _status(states, stdout) -> int:
    from perfab.kexec.boots import order_line

    state = states.read()
    if state is None:
        print("no kexec session in progress", file=stdout)
        return 0
    print(f"experiment {state.experiment}, session {state.session} in {state.db}; then {state.then}", file=stdout)
    for b in state.boots:
        print(f"  boot {b.number}: {b.side:<16} {b.outcome:<9} {b.runs} run(s), "
              f"{b.seconds or 0:.0f} s to confirm", file=stdout)
    if state.pending is not None:
        print(f"  boot {state.pending.number}: {state.pending.side:<16} {state.pending.outcome} "
              f"(token {state.pending.token})", file=stdout)
    print(f"order: {order_line(state.order())}", file=stdout)
    return 0


def _check(args, stdout) -> int:
    """The checks ``start`` makes, on this machine and every side's kernel; nothing is stored or switched."""
    from perfab.kexec.driver import Context, check
    from perfab.kexec.machine import RealMachine
    from perfab.specfile import load_spec

    ctx = Context(RealMachine(), None, None, lambda line: print(f"perfab: {line}", file=stdout))
    now, mode, sides = check(load_spec(args.spec), ctx)
    for side, kernel in sides.items():
        print(f"side {side}: {kernel.image} ({kernel.release}, build id {kernel.build_id}), cmdline "
              f"{kernel.cmdline!r}, initrd {kernel.initrd}", file=stdout)
    print(f"this machine can kexec (lockdown: {mode}); running {now.describe()}", file=stdout)
    return 0


def _unit(args, states, stdout) -> int:
    from perfab.kexec.unit import install, unit_text

    text = unit_text(states.directory.resolve(), args.perfab)
    if not args.install:
        stdout.write(text)
        return 0
    for path in install(text, args.watchdog):
        print(f"perfab: wrote {path}", file=stdout)
    return 0
