"""Multiplicity across a report's rows for p-values that stay valid at a data-dependent stopping time.

A sequential experiment stops when all its rows are decided, so the
p-values at the stop depend on one another in ways no positive-dependence
condition covers; Benjamini-Hochberg loses its guarantee there.  These
procedures hold under any dependence, so at any stopping time.
"""

from __future__ import annotations

import numpy as np

from perfab.analyse.checks import adjust

MULTIPLE = ("holm", "by")


def adjust_anytime(ps: list[float], multiple: str = "holm", weights: list[float] | None = None) -> list[float]:
    """Adjust anytime-valid p-values across rows: weighted Holm step-down, or Benjamini-Yekutieli (``by``).

    Both are valid under any dependence between the p-values.  Holm's
    procedure with weights (Holm, Scand. J. Statist. 6 (1979) 65-70, which
    gives the weighted form): rows are taken in order of ``p / w`` and each is adjusted
    by the weight not yet rejected, ``q = max(earlier q, p * W_left / w)``;
    equal weights give the usual Holm.  BY (Benjamini & Yekutieli, Ann.
    Statist. 29 (2001) 1165-1188, theorem 1.3) is Benjamini-Hochberg times
    ``1 + 1/2 + ... + 1/m`` and ignores the weights.
    """
    if not ps:
        return []
    if multiple == "by":
        harmonic = sum(1 / i for i in range(1, len(ps) + 1))
        return [min(1.0, q * harmonic) for q in adjust(ps, "bh")]
    p = np.asarray(ps, dtype=float)
    w = np.full(len(p), 1 / len(p)) if weights is None else np.asarray(weights, dtype=float) / sum(weights)
    out, left, running = np.empty(len(p)), 1.0, 0.0
    for i in np.argsort(p / w, kind="stable"):
        running = max(running, min(1.0, p[i] * left / w[i]))
        out[i], left = running, left - w[i]
    return [float(x) for x in out]


def holm_weights(primary: list[bool], primary_share: float) -> list[float] | None:
    """Holm weights: primary rows share ``primary_share``, the others the rest (None: equal, all or none primary)."""
    n = sum(primary)
    if n in (0, len(primary)):
        return None
    return [primary_share / n if p else (1 - primary_share) / (len(primary) - n) for p in primary]
