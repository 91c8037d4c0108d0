"""Writing an experiment back as spec TOML, from the schema: the source of a derived experiment.

``dump(exp)`` is the inverse of the reader: each key of each table is
written through its kind, a key at its default is left out, and reading the
text again gives the same experiment (a test checks this on every example).
A derived experiment (``Experiment.derive``) stores this text with its
sessions, so a report reads what was run.
"""

from __future__ import annotations

from typing import Any

import tomli_w

from perfab.specfile import Experiment, Measure, MetricSpec, Workload
from perfab.specfile.checks import AUTO
from perfab.specfile.kinds import Sub, Subs
from perfab.specfile.schema import DOCUMENT, TABLES, Key


def dump(exp: Experiment) -> str:
    """The spec text that reads as ``exp``."""
    doc = {k.name: _value(k, getattr(exp, k.attr)) for k in DOCUMENT if k.name != "experiment"}
    return tomli_w.dumps({"experiment": _experiment(exp), **{k: v for k, v in doc.items() if v is not None}})


def _experiment(exp: Experiment) -> dict[str, Any]:
    """``[experiment]``: a sequential design is written as runs = "auto" and its keys."""
    table = table_of(exp, "experiment", skip={"min_runs", "max_runs", "stop_on", "spending"})
    if exp.sequential is not None:
        design = {"runs": AUTO, "min_runs": exp.sequential.min_runs, "max_runs": exp.sequential.max_runs,
                  "stop_on": exp.sequential.stop_on, "spending": exp.sequential.spending}
        table.update(design)
    return table


def table_of(obj: Any, table: str, skip: set[str] = frozenset()) -> dict[str, Any]:
    """The TOML table of a spec dataclass: every key not at its default, written through its kind."""
    out: dict[str, Any] = {}
    for key in TABLES[table]:
        if key.name in skip:
            continue
        typed = _typed(obj, key, table)
        if typed is None or typed == key.default:
            continue
        out[key.name] = _value(key, typed)
    return out


def _typed(obj: Any, key: Key, table: str) -> Any:
    """The typed value behind ``key``: a metric's direction and a shell command are derived from others."""
    if table == "workload.metric" and key.name == "direction":
        return _direction(obj)
    if table == "workload" and key.name == "argv" and isinstance(obj, Workload) and obj.shell:
        return obj.argv[0]
    if isinstance(obj, Measure) and not hasattr(obj, key.attr):
        return obj.options.get(key.attr)
    return getattr(obj, key.attr)


def _direction(metric: MetricSpec) -> str | None:
    """The ``direction`` a metric was declared with."""
    if metric.no_direction:
        return "none"
    return {True: "higher", False: "lower"}.get(metric.higher_is_better)


def _value(key: Key, typed: Any) -> Any:
    """One key's value as TOML."""
    kind = key.value
    if isinstance(kind, Sub):
        return None if typed is None else table_of(typed, kind.table)
    if isinstance(kind, Subs):
        return [table_of(t, kind.table) for t in typed]
    if isinstance(typed, str):
        return typed
    return kind.write(typed)
