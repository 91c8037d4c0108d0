"""perfab: A/B performance experiments whose verdicts can be defended.

An experiment travels one way, one subpackage per stage:

1. ``perfab.spec``    reads the TOML spec into typed values and validates it.
2. ``perfab.plan``    orders the runs: warm-ups, interleaved seeded blocks
                      (ABBA / BAAB), counter groups spread across sides.
3. ``perfab.run``     executes each planned run (through a backend: plain
                      rusage, ``perf stat``, or valgrind's cachegrind), parses
                      the workload's own output (``perfab.parsers``).
4. ``perfab.store``   commits every run to SQLite the moment it ends.
5. ``perfab.analyse`` compares each variant with the baseline, per metric,
                      with named statistical methods and FDR control.
6. ``perfab.report``  prints the comparison as text, markdown, JSON or CSV.

Beside the pipeline, ``perfab.size`` diffs two ELF files function by function
and explains the differences from DWARF; ``perfab.machine`` snapshots the
settings of the machine that matter for measurement.

As a library::

    import perfab
    results = perfab.load(".perfab/results.db")
    df = results.to_pandas()        # when pandas is installed
"""

from __future__ import annotations

__version__ = "0.1.0"


def load(db: str = ".perfab/results.db", experiment: str | None = None):
    """Open a results database and return its runs and samples (``perfab.store.Results``)."""
    from perfab.store import open_results

    return open_results(db, experiment)
