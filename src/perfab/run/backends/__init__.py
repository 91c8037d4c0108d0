"""Measurement backends: how a run is measured (see ``base``), and the registry of their classes.

``BACKENDS`` maps each ``[measure] backend`` name to the class that measures
with it; what each backend declares (its keys, its rusage policy, what the
report says it counted) is in ``perfab.specfile.backends``, which the spec,
the analysis and the report ask by name instead of testing it.  Adding a
backend is its declaration there, one module here whose class is made with
``declaration=``, one line in ``_CLASSES``, and its tests.
"""

from __future__ import annotations

from perfab.run.backends.base import Backend, Measurement, Required, SameForEverySide
from perfab.run.backends.cachegrind import CachegrindBackend
from perfab.run.backends.guest import GuestBackend
from perfab.run.backends.perfstat import PerfStatBackend
from perfab.run.backends.timing import TimeBackend
from perfab.specfile.backends import DECLARATIONS, DEFAULT, declared

_CLASSES = (TimeBackend, PerfStatBackend, CachegrindBackend, GuestBackend)
BACKENDS: dict[str, type] = {cls.name: cls for cls in _CLASSES}  # name -> backend class, the default first


def make_backend(measure) -> Backend:
    """The backend a spec's ``[measure]`` table asks for."""
    return BACKENDS[declared(measure.backend).name].from_measure(measure)


__all__ = ["BACKENDS", "DECLARATIONS", "DEFAULT", "Backend", "Measurement", "Required", "SameForEverySide",
           "TimeBackend", "make_backend"]
