"""``name: number [unit]`` lines, e.g. ``ops/s: 50955238`` or ``latency = 3.2 ms``.

Every such line in stdout and stderr becomes a metric named as printed
(whitespace collapsed); a later line with the same name replaces an earlier
one.  A metric has no direction unless option ``higher_is_better`` gives
one: the parser does not guess from the name.  Options::

    units = {name = "unit"}             # overrides the printed unit
    higher_is_better = {name = false}
    only = ["ops/s"]                    # keep these names; each must be present
"""

from __future__ import annotations

import re

from perfab.errors import UsageError
from perfab.parsers._base import NUM, DeclaredMetric, ParseError, ParsedMetric, combined, metric

OPTIONS = frozenset({"units", "higher_is_better", "only"})
OPTION_TYPES = {  # option -> (TOML type, meaning), for the README
    "units": ("table of strings", "metric name = its unit, over the printed one"),
    "higher_is_better": ("table of booleans", "metric name = true or false (default: no direction)"),
    "only": ("array of strings", "keep only these names; each must be present"),
}

METRICS = (
    DeclaredMetric("{name}", None, None, "one per 'name: number [unit]' line; unit: option units, else the printed "
                   "unit, else the name when it ends in '/s'; direction: option higher_is_better, else none"),
)

# the name is possessive (*+): its trailing spaces are dropped later, and no backtracking makes a long line slow
_LINE = re.compile(rf"^\s*+([A-Za-z_][\w ./%()-]*+)\s*+[:=]\s*({NUM})(?:\s*([A-Za-z%/][\w/%]*))?\s*$")


def prepare(options: dict) -> dict:
    """Check option types; UsageError on a bad one."""
    for key, kind, what in (("units", str, "unit string"), ("higher_is_better", bool, "true or false")):
        table = options.get(key, {})
        if not isinstance(table, dict) or not all(isinstance(v, kind) for v in table.values()):
            raise UsageError(f"keyvalue option {key} must be a table of metric name -> {what}")
    only = options.get("only", [])
    if not isinstance(only, list) or not all(isinstance(n, str) for n in only):
        raise UsageError("keyvalue option only must be a list of metric names")
    return options


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Every ``name: number [unit]`` line; ParseError when none (or a required one) is found."""
    units, better = options.get("units", {}), options.get("higher_is_better", {})
    only = options.get("only") or []
    out, seen = {}, set()
    for line in combined(stdout, stderr).splitlines():
        if found := _LINE.match(line):
            name = " ".join(found[1].split())
            seen.add(name)
            if only and name not in only:
                continue
            unit = units.get(name, found[3] or (name if name.endswith("/s") else ""))
            out[name] = metric(found[2], unit, better.get(name), f"keyvalue metric {name[:40]!r}")
    for name in only:
        if name not in out:
            raise ParseError(f"output has no {name[:40]!r} line (keyvalue found "
                             f"{', '.join(sorted(seen))[:200] or 'none'})")
    if not out:
        raise ParseError("output has no 'name: number' line for the keyvalue parser: "
                         "print results as 'ops/s: 1234', or use the regex parser")
    return {name: out[name] for name in only} if only else out
