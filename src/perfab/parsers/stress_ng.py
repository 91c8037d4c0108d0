"""stress-ng: per-stressor bogo-ops and rates, from ``--metrics[-brief]`` or ``--yaml``.

Text form (stderr; ``metrc:`` in 0.15+, ``info:`` before)::

    stress-ng: metrc: [7393] cpu   2917  2.01  1.57  0.00  1448.02  1853.32  78.13  6472

columns: bogo ops, real/usr/sys time (s), bogo ops/s over real and over
usr+sys time, then with ``--metrics`` CPU used per instance (%) and max RSS
(KB).  ``miscellaneous metrics:`` lines (``switch 5075.03 nanosecs per
context switch ...``) add ``<stressor>_<description>``.

With option ``yaml_path`` the file written by ``--yaml`` is read instead;
its keys map onto the same names (``bogo-ops-per-second-real-time`` ->
``<stressor>_bogo_ops_per_s``).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from perfab.errors import UsageError
from perfab.parsers._base import NUM, ParseError, ParsedMetric, combined, metric, missing, slug

OPTIONS = frozenset({"yaml_path"})

TOOL = "stress-ng"
# column / YAML key -> (name suffix, unit, higher_is_better)
_COLUMNS = [
    ("bogo-ops", "bogo_ops", "count", True),
    ("wall-clock-time", "real_s", "s", None),
    ("user-time", "usr_s", "s", None),
    ("system-time", "sys_s", "s", None),
    ("bogo-ops-per-second-real-time", "bogo_ops_per_s", "ops/s", True),
    ("bogo-ops-per-second-usr-sys-time", "bogo_ops_per_cpu_s", "ops/s", True),
    ("cpu-usage-per-instance", "cpu_pct", "%", None),
    ("max-rss", "rss_max_kb", "KB", False),
]
_ROW = re.compile(rf"^stress-ng: (?:metrc|info): +\[\d+\] ([a-z][\w-]*)((?:\s+{NUM}){{6,8}})\s*$")
_MISC = re.compile(rf"^stress-ng: (?:metrc|info): +\[\d+\] ([a-z][\w-]*)\s+({NUM}) ([a-zA-Z].*?)(?: \(\w+ mean of \d+ instances\))?\s*$")


def prepare(options: dict) -> dict:
    """Check that ``yaml_path`` is a string."""
    path = options.get("yaml_path")
    if path is not None and not isinstance(path, str):
        raise UsageError(f"stress-ng option yaml_path must be a file path string, not {path!r}")
    return options


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from the YAML file if ``yaml_path`` is set, else from the text."""
    if options.get("yaml_path"):
        return _from_yaml(Path(options["yaml_path"]))
    return _from_text(combined(stdout, stderr))


def _from_text(text: str) -> dict[str, ParsedMetric]:
    out: dict[str, ParsedMetric] = {}
    misc = False
    for line in text.splitlines():
        if line.endswith("miscellaneous metrics:"):
            misc = True
        elif (row := _ROW.match(line)) and not misc:
            values = row[2].split()
            for (_, suffix, unit, better), value in zip(_COLUMNS, values):
                out[f"{slug(row[1])}_{suffix}"] = metric(value, unit, better)
        elif (row := _MISC.match(line)) and misc:
            out[f"{slug(row[1])}_{_misc_name(row[3])}"] = metric(row[2], _misc_unit(row[3]), _misc_direction(row[3]))
    if not out:
        raise missing(TOOL, "'stress-ng: metrc:' stressor line (run it with --metrics or --metrics-brief)")
    return out


def _misc_name(description: str) -> str:
    return slug(re.sub(r"\bper sec(ond)?\b", "per s", description))


def _misc_unit(description: str) -> str:
    """``'add matrix ops per sec'`` -> ``'ops/s'``; ``'nanosecs per context switch'`` -> ``'nanosecs'``."""
    if found := re.search(r"(\S+) per sec", description):
        return f"{found[1]}/s"
    return description.split()[0]


def _misc_direction(description: str) -> bool | None:
    if re.search(r"\bper sec", description):
        return True
    if re.match(r"(nano|micro|milli)?sec", description) or "latency" in description:
        return False
    return None


def _from_yaml(path: Path) -> dict[str, ParsedMetric]:
    try:
        doc = yaml.safe_load(path.read_text(errors="replace"))
    except (OSError, yaml.YAMLError) as err:
        raise ParseError(f"cannot read stress-ng YAML {path}: {err.__class__.__name__}; "
                         "check that the workload passes --yaml with the same path") from None
    rows = doc.get("metrics") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ParseError(f"stress-ng YAML {path} has no 'metrics:' list: was stress-ng run with --yaml?")
    out: dict[str, ParsedMetric] = {}
    known = {key: (suffix, unit, better) for key, suffix, unit, better in _COLUMNS}
    for row in rows:
        name = slug(str(row.get("stressor", "")))
        for key, value in row.items():
            if key == "stressor" or not isinstance(value, (int, float)):
                continue
            suffix, unit, better = known.get(key) or _yaml_misc(key)
            out[f"{name}_{suffix}"] = metric(value, unit, better)
    return out


def _yaml_misc(key: str) -> tuple[str, str, bool | None]:
    text = key.replace("-", " ")
    return _misc_name(text), _misc_unit(text), _misc_direction(text)
