"""Names in the work queue: one queue per machine class, one per machine, one lock per experiment.

``perfab/CLASS`` holds the experiments any machine of the class may take;
``perfab/CLASS/MACHINE`` holds those only MACHINE may take (an experiment
it began and must finish: its runs are that machine's).  Jobs of one
experiment carry the lock ``perfab/experiment/NAME``, so they never run
at the same time, and the same string as queueing lock, so an experiment
waits in the queue at most once.  A job that belongs to another machine's
queue says so by raising ``BelongsElsewhere``.
"""

from __future__ import annotations

import re

from perfab.errors import UsageError

TASK = "perfab.run_experiment"  # the task every job runs (perfab.fleet.job)
PREFIX = "perfab"
RESUME_PRIORITY = 10  # a machine finishes what it began before it takes new work (default priority 0)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class BelongsElsewhere(Exception):
    """The experiment's unfinished session is another machine's: the job moves to that machine's queue."""

    def __init__(self, machine: str):
        super().__init__(f"its unfinished session belongs to machine {machine}")
        self.machine = machine


def check_name(what: str, name: str) -> str:
    """``name`` when it can name a machine or class (letters, digits, ``.``, ``_``, ``-``); UsageError if not."""
    if not _NAME.match(name or ""):
        raise UsageError(f"{what} {name!r}: use letters, digits, '.', '_' and '-' (at most 63, starting with a "
                         "letter or digit)")
    return name


def class_queue(machine_class: str) -> str:
    return f"{PREFIX}/{machine_class}"


def machine_queue(machine_class: str, machine: str) -> str:
    return f"{PREFIX}/{machine_class}/{machine}"


def class_of(queue: str) -> str | None:
    """The machine class of one of perfab's queues; None for another program's queue."""
    parts = queue.split("/")
    return parts[1] if len(parts) in (2, 3) and parts[0] == PREFIX else None


def experiment_lock(name: str) -> str:
    return f"{PREFIX}/experiment/{name}"
