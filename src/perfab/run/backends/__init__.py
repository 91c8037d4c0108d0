"""Measurement backends: how a run is measured (see ``base``), and the registry of them.

``BACKENDS`` maps each ``[measure] backend`` name to its class; everything
else in perfab asks a backend (or this registry) instead of testing its name.
Adding a backend is one module here, one line in ``_CLASSES`` and its tests.
"""

from __future__ import annotations

from perfab.errors import UsageError
from perfab.run.backends.base import Backend, Measurement, Option, Required, SameForEverySide
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


def make_backend(measure) -> Backend:
    """The backend a spec's ``[measure]`` table asks for."""
    return declared(measure.backend).from_measure(measure)


def readers(key: str) -> list[tuple[type, str | None]]:
    """The backends that read ``[measure] key``: (class, None) for its owner, (class, switch) for one that
    reads it only when its boolean key ``switch`` is true."""
    owners = [(cls, None) for cls in _CLASSES if any(o.key == key for o in cls.options)]
    return owners + [(cls, cls.options_when[key]) for cls in _CLASSES if key in cls.options_when]


def option_problem(key: str, value: object) -> str | None:
    """Why ``value`` is no good for ``[measure] key``, asked of every backend that reads the key."""
    for cls, _ in readers(key):
        if (problem := cls.option_problem(key, value)) is not None:
            return problem
    return None


__all__ = ["BACKENDS", "DEFAULT", "Backend", "Measurement", "Option", "Required", "SameForEverySide",
           "TimeBackend", "declared", "make_backend", "option_problem", "readers"]
