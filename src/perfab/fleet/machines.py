"""Which machine ran a session, and an experiment's runs split by machine.

A session records its machine: the name it ran under (``Session.host``:
the host name, or a fleet worker's ``--machine``) and, in its environment
snapshot, the CPU model and the kernel it ran on, and for fleet work the
machine class and the submission (``fleet.*`` keys).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfab.store.dataset import Dataset, Session

CLASS_KEY = "fleet.class"  # environment key: the machine class a fleet worker served
MACHINE_KEY = "fleet.machine"  # environment key: the machine name a fleet worker ran under
SUBMISSION_KEY = "fleet.submission"  # environment key: the submission (perfab submit) the session ran


@dataclass(frozen=True)
class Machine:
    """A machine, as its sessions describe it."""

    name: str  # the name it ran under (host name or --machine)
    cpu_model: str  # environment cpu.model
    kernel: str  # environment kernel.release
    machine_class: str | None  # the fleet class it served, None outside a fleet


def machine_of(session: Session) -> Machine:
    env = session.environment
    return Machine(session.host or env.get("host.name", "unknown"), env.get("cpu.model", "unknown"),
                   env.get("kernel.release", "unknown"), env.get(CLASS_KEY))


def by_machine(data: Dataset) -> dict[Machine, Dataset]:
    """The dataset of each machine that ran part of ``data`` (its sessions and their runs), in order of first run."""
    machines: dict[Machine, set[int]] = {}
    for s in data.sessions:
        machines.setdefault(machine_of(s), set()).add(s.id)
    out = {}
    for machine, ids in machines.items():
        out[machine] = data.of_sessions(ids)
    return out
