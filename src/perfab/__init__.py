"""perfab: A/B performance experiments whose verdicts can be defended.

An experiment travels one way, one subpackage per stage:

1. ``perfab.specfile``    reads the TOML spec into typed values and validates it
                      against one schema of every key (``spec.schema``).
2. ``perfab.plan``    orders the runs: warm-ups, interleaved seeded blocks
                      (ABBA / BAAB) over sides and sweep points, counter
                      groups spread across sides; block by block when
                      sequential.
3. ``perfab.run``     opens a session (``session``) as one schedule of events
                      (``schedule``: builds, setups, service starts, runs,
                      looks, teardowns) and executes it (``runner``; setup
                      and services per side in ``context``; a backend:
                      plain rusage, ``perf stat`` or valgrind's cachegrind)
                      and parses the workload's own output
                      (``perfab.parsers``).
4. ``perfab.store``   commits every run the moment it ends (SQLite, or
                      PostgreSQL for a fleet) and reads an experiment back as
                      a typed ``Dataset``.
5. ``perfab.analyse`` ``compare(dataset, spec)``: each variant against the
                      baseline, per metric and sweep point, with named
                      statistical methods, FDR control or a group-sequential
                      design; also change points over history.
6. ``perfab.report``  prints the comparison as text, markdown, JSON, CSV or
                      one self-contained HTML page.

Beside the pipeline, ``perfab.bisect`` finds the commit a regression came
in with, ``perfab.fleet`` runs experiments on lab machines from a shared
queue, ``perfab.size`` diffs two ELF files function by function and
explains the differences from DWARF, and ``perfab.machine`` snapshots the
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
