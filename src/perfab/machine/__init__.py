"""The machine snapshot: the settings of this machine that matter for measurement.

Per measurement session perfab stores ``snapshot()``, a flat ``dict[str, str]``
(kernel, CPU model and topology, cache geometry, frequency scaling, SMT,
ASLR, perf and NMI-watchdog settings, THP, CPU isolation, load, hypervisor,
tool versions).  The report prints ``describe()`` in its SETUP block and
warns about every ``differences()`` between the two sides' snapshots.

``checks()`` returns one small object per setting, after pyperf's system
command: ``show()`` reads it, ``advice()`` says what to change, and
``write()`` sets the tunable ones (governor, boost, ASLR, NMI watchdog,
THP), raising ``PerfabError`` with the fix when it cannot.

Values that could not be read are strings too, never exceptions:
``unavailable`` (this machine has no such file, e.g. cpufreq in a VM),
``unknown`` (the file is there but unreadable), ``absent`` (a tool that is
not installed).
"""

from __future__ import annotations

from perfab.machine.checks import Check
from perfab.machine.environment import VOLATILE, checks, describe, differences, snapshot
from perfab.machine.sysfs import ABSENT, UNAVAILABLE, UNKNOWN

__all__ = [
    "ABSENT",
    "UNAVAILABLE",
    "UNKNOWN",
    "VOLATILE",
    "Check",
    "checks",
    "describe",
    "differences",
    "snapshot",
]
