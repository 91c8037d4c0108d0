"""Multiplicity across a report's rows for p-values that stay valid at a data-dependent stopping time.

A sequential experiment stops when all its rows are decided, so the
p-values at the stop depend on one another in ways no positive-dependence
condition covers; Benjamini-Hochberg loses its guarantee there.  These
procedures hold under any dependence, so at any stopping time.

``adjust`` is the fixed-n adjustment of a report's rows (Benjamini-Hochberg
or Holm, weighted when primary rows get more of alpha), used by the
analysis and by per-symbol profile comparisons alike.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


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


def adjust(pvalues: list[float], method: str, weights: list[float] | None = None) -> list[float]:
    """Adjust p-values for multiple comparisons across a report's rows.

    ``bh``: Benjamini-Hochberg step-up, controls the false discovery rate
    for independent or positively dependent tests (Benjamini & Hochberg,
    JRSS B 57 (1995) 289-300).  ``holm``: Holm's step-down, controls the
    family-wise error rate under any dependence (Holm, Scand. J. Statist.
    6 (1979) 65-70).

    ``weights`` (positive, any scale) give some rows more of alpha.  BH is
    then the weighted procedure of Genovese, Roeder & Wasserman
    ("False discovery control with p-value weighting", Biometrika 93
    (2006) 509-524): BH on ``p / w`` with the weights scaled to mean 1,
    which keeps the FDR at alpha under the same independence or positive
    dependence.  Holm is the weighted Holm of
    ``adjust_anytime``.  Equal weights give the plain
    procedures.
    """
    p = np.asarray(pvalues, dtype=float)
    if len(p) == 0:
        return []
    if weights is not None and method == "holm":
        return adjust_anytime(list(p), "holm", list(weights))
    if weights is not None:
        w = np.asarray(weights, dtype=float)
        p = np.minimum(1.0, p / (w * len(w) / w.sum()))
    if method == "bh":
        return [float(x) for x in stats.false_discovery_control(p, method="bh")]
    order = np.argsort(p)
    m = len(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return [float(x) for x in adjusted]
