"""The statistical methods perfab knows, each declared once: its name and what the rest of perfab asks of it.

A method is one object (``perfab.analyse.methodbase.Method``) that computes
its estimate, interval and p-value, gives its verdict and describes itself
in the report.  What other code must know about a method without running it
is declared here, as its ``Traits``: whether it gives a p-value, whether it
assumes deterministic counts, which rules of the analysis apply to its rows.
Code outside the registry asks these (``est.traits.counted``), never the
method's name.  This module imports nothing of perfab but its errors and no
numerical library: the spec's schema and ``perfab plan`` read it.

Adding a method is one module and one line here.  For a median test:

1. ``src/perfab/analyse/method_median.py`` holds ``class AssumeMedian(Method)``
   with ``name = "median"``, ``compare`` and ``describe`` (and ``refuses``,
   ``verdict`` or ``mde`` where a tested method's defaults do not fit), its
   docstring naming the test, its assumptions and a reference;
2. ``DECLARED`` gets ``Traits("median", "perfab.analyse.method_median:AssumeMedian", serial=True)``.

The spec's ``method`` key and ``--method`` then accept ``median``, the
JSON schema lists it, and ``perfab.analyse.methods.get_method("median")``
imports the module when a row first asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfab.errors import UsageError


@dataclass(frozen=True)
class Traits:
    """What one method declares about itself: the questions the analysis, report, bisect and plan ask."""

    name: str  # as the spec, the report and the JSON name it
    impl: str  # "module:Class" of its behaviour, a ``perfab.analyse.methodbase.Method``
    spec: bool = True  # a spec may choose it (``method = ...``); False: chosen otherwise (``runs = "auto"``)
    tested: bool = True  # gives a p-value: its rows are adjusted across rows, and ``**`` needs the adjusted p
    counted: bool = False  # assumes deterministic counts: no noise to check or detect through; a rerun reads the same
    min_runs: int = 2  # fewest runs per side for any verdict but ``ns`` (exact: one run on a side is unchecked)
    grid_pair: bool = False  # on a grid, its p is the one its rounding-widened interval implies (verdicts.grid_pair)
    serial: bool = False  # its interval and p are widened for correlation in run order (verdicts.serial_widening)
    hodges_lehmann: bool = False  # Delta is the Hodges-Lehmann change: a ratio on log values unless a value is <= 0
    fallback: str | None = None  # the method that judges a row whose data break this one's assumption (refuses)


DECLARED: tuple[Traits, ...] = (  # the spec's default first
    Traits("nonparametric", "perfab.analyse.method_rank:AssumeNothing", grid_pair=True, serial=True,
           hodges_lehmann=True),
    Traits("exact", "perfab.analyse.method_exact:AssumeExact", tested=False, counted=True,
           fallback="nonparametric"),
    Traits("normal", "perfab.analyse.method_normal:AssumeNormal", serial=True),
    Traits("sequential", "perfab.analyse.method_sequential:AssumeSequential", spec=False, hodges_lehmann=True),
)
_BY_NAME = {t.name: t for t in DECLARED}
DEFAULT = DECLARED[0].name  # the method of a row whose spec names none


def names() -> tuple[str, ...]:
    """Every method a report row may name."""
    return tuple(_BY_NAME)


def spec_names() -> tuple[str, ...]:
    """The methods a spec or ``--method`` may choose."""
    return tuple(t.name for t in DECLARED if t.spec)


def declared(name: str) -> Traits:
    """The traits of method ``name``."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UsageError(f"unknown statistical method {name!r}: this perfab knows {', '.join(_BY_NAME)}; use one "
                         "of those, or a perfab that knows it") from None


def counts_method() -> str:
    """The method that judges a metric declared deterministic (``exact = true``, valgrind's counts)."""
    return next(t.name for t in DECLARED if t.counted and t.spec)
