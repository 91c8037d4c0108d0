"""Measurement backends: how a run is measured (see ``base``), and the registry of them.

``BACKENDS`` maps each ``[measure] backend`` name to its class; everything
else in perfab asks a backend (or this registry) instead of testing its name.
Adding a backend is one module here (its class declares its own
``[measure]`` keys, ``measure_keys``), one line in ``_CLASSES``, and its tests.
"""

from __future__ import annotations

from perfab.errors import UsageError
from perfab.run.backends.base import Backend, Measurement, Required, SameForEverySide
from perfab.run.backends.cachegrind import CachegrindBackend
from perfab.run.backends.guest import GuestBackend
from perfab.run.backends.perfstat import PerfStatBackend
from perfab.run.backends.timing import TimeBackend

_CLASSES = (TimeBackend, PerfStatBackend, CachegrindBackend, GuestBackend)
BACKENDS: dict[str, type] = {cls.name: cls for cls in _CLASSES}  # name -> backend class, the default first
DEFAULT = _CLASSES[0].name  # the backend of a spec that names none


def declared(name: str) -> type:
    """The class of backend ``name`` (as a spec or a stored session names it)."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise UsageError(f"unknown measurement backend {name!r}: this perfab knows {', '.join(BACKENDS)}; "
                         "use one of those, or a perfab that knows it") from None


def backend_type(name: str) -> type:
    """The backend class a stored session names, for describing it (the default's for a name this version
    does not know)."""
    return BACKENDS.get(name) or BACKENDS[DEFAULT]


def make_backend(measure) -> Backend:
    """The backend a spec's ``[measure]`` table asks for."""
    return declared(measure.backend).from_measure(measure)


__all__ = ["BACKENDS", "DEFAULT", "Backend", "Measurement", "Required", "SameForEverySide", "TimeBackend",
           "backend_type", "declared", "make_backend"]
