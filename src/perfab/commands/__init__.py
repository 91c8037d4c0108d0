"""The subcommands of ``perfab``, one object each: name, help, arguments and action (``base.Command``).

``perfab.cli`` builds one argument parser from ``COMMANDS`` and calls the
chosen command's ``run``.  This package is the top layer: a command imports
the library it drives (spec, run, store, analyse, report, size, kexec,
fleet) inside ``run``, so choosing one costs only its own imports, and
nothing below imports a command.

- ``run``      ``perfab run``: the whole pipeline;
- ``report``   ``perfab report``, ``history`` and ``list``: stored runs read back;
- ``plan``     ``perfab plan`` (``--try``) and ``parse``: a spec, nothing stored;
- ``bisect``   ``perfab bisect``;
- ``machine``  ``perfab env``, ``counters`` and ``screen``;
- ``fleet``    ``perfab submit`` and ``worker``;
- ``size``     ``perfab size``;
- ``kexec``    ``perfab kexec`` (and ``perfab run`` on a spec whose sides kexec).

Adding a command is one class and one line below.
"""

from __future__ import annotations

from perfab.commands.base import Command
from perfab.commands.bisect import Bisect
from perfab.commands.fleet import Submit, Worker
from perfab.commands.kexec import Kexec
from perfab.commands.machine import Counters, Env, Screen
from perfab.commands.plan import Parse, Plan
from perfab.commands.report import History, List, Report
from perfab.commands.run import Run
from perfab.commands.size import Size

COMMANDS: tuple[Command, ...] = (  # in `perfab --help` order
    Run(), Report(), Plan(), Parse(), Bisect(), List(), History(), Env(), Counters(), Screen(), Submit(), Worker(),
    Size(), Kexec(),
)

__all__ = ["COMMANDS", "Command"]
