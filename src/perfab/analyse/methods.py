"""The registry of statistical methods: each compares one metric's samples, experiment side against baseline.

A method is one object (``methodbase.Method``, modelled on benchstat's
``benchmath.Assumption``) whose docstring states its test, its assumptions
and why it is used, so a reader can check every verdict:

- ``nonparametric`` (``method_rank.AssumeNothing``): Mann-Whitney U with the
  Hodges-Lehmann shift, the default;
- ``exact`` (``method_exact.AssumeExact``): deterministic counts, whose
  interval alone decides;
- ``normal`` (``method_normal.AssumeNormal``): Welch's t-test on the means;
- ``sequential`` (``method_sequential.AssumeSequential``): the group-sequential
  rank test of ``runs = "auto"``.

Each returns an ``Estimate`` (``methodbase``) and gives its own verdict,
refusal, minimum detectable effect and report line; what other code asks
of it is declared once, as its traits, in ``perfab.methodtraits``
(``est.traits.counted``, never ``est.method == "exact"``).

Adding a method is one module and one line, for a median test:

1. ``perfab/analyse/method_median.py``: ``class AssumeMedian(Method)`` with
   ``name = "median"``, ``compare`` and ``describe``, overriding
   ``refuses``, ``verdict`` or ``mde`` where a tested method's defaults do
   not fit;
2. in ``perfab.methodtraits.DECLARED``:
   ``Traits("median", "perfab.analyse.method_median:AssumeMedian", serial=True)``.

``get_method("median")`` then imports it; the spec, ``--method``, the JSON
schema, the analysis and the report follow its traits.
"""

from __future__ import annotations

import importlib

from perfab.analyse.method_exact import EXACT_TOLERANCE, UNCHECKED_NOTE, AssumeExact, exact_spread  # noqa: F401
from perfab.analyse.method_normal import AssumeNormal  # noqa: F401
from perfab.analyse.method_rank import AssumeNothing  # noqa: F401
from perfab.analyse.method_sequential import AssumeSequential  # noqa: F401
from perfab.analyse.methodbase import (ABSOLUTE, RATIO, SHIFT_MEDIAN, Estimate, Method, Refusal,  # noqa: F401
                                       min_detectable_effect, relative_cv)
from perfab.methodtraits import declared, names

_MADE: dict[str, Method] = {}  # name -> its object, made at first use


def method_names() -> tuple[str, ...]:
    """Every method a report row may name: the spec's choices and ``sequential``."""
    return names()


def get_method(name: str) -> Method:
    """The method a spec names (``perfab.methodtraits.spec_names``), or ``sequential`` for ``runs = "auto"``."""
    if name not in _MADE:
        module, _, cls = declared(name).impl.partition(":")
        _MADE[name] = getattr(importlib.import_module(module), cls)()
    return _MADE[name]
