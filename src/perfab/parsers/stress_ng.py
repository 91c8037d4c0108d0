"""stress-ng: per-stressor bogo-ops and rates, from ``--metrics[-brief]`` or ``--yaml``.

Text form (stderr; ``metrc:`` in 0.15+, ``info:`` before)::

    stress-ng: metrc: [7393] cpu   2917  2.01  1.57  0.00  1448.02  1853.32  78.13  6472

columns: bogo ops, real/usr/sys time (s), bogo ops/s over real and over
usr+sys time, then with ``--metrics`` CPU used per instance (%) and max RSS
(KB).  ``miscellaneous metrics:`` lines (``switch 5075.03 nanosecs per
context switch ...``) add ``<stressor>_<description>``; the description's
form gives unit and direction (see ``METRICS``): ``X per sec`` is a rate of
the stressor's work, one that starts with a time unit is a time per
operation, anything else has no direction.

With option ``yaml_path`` the file written by ``--yaml`` is read instead;
its keys map onto the same names (``bogo-ops-per-second-real-time`` ->
``<stressor>_bogo_ops_per_s``).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from perfab.errors import UsageError
from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParseError, ParsedMetric, combined, slug

OPTIONS = frozenset({"yaml_path"})
OPTION_TYPES = {"yaml_path": ("string", "the file `--yaml` wrote, read instead of the output")}  # for the README

TOOL = "stress-ng"

METRICS = (
    M("{stressor}_bogo_ops", "count", True, "bogo operations the stressor completed"),
    M("{stressor}_real_s", "s", None, "wall-clock time the stressor ran"),
    M("{stressor}_usr_s", "s", None, "user CPU time of the stressor's processes"),
    M("{stressor}_sys_s", "s", None, "system CPU time of the stressor's processes"),
    M("{stressor}_bogo_ops_per_s", "ops/s", True, "bogo operations per second of wall-clock time"),
    M("{stressor}_bogo_ops_per_cpu_s", "ops/s", True, "bogo operations per second of user + system time"),
    M("{stressor}_cpu_pct", "%", None, "CPU used per instance (--metrics)"),
    M("{stressor}_rss_max_kb", "KB", False, "largest resident set size of an instance (--metrics)"),
    M("{stressor}_{what}_per_s", None, True,
      "miscellaneous rate 'X <what> per sec': work the stressor did per second; unit '<what>/s'"),
    M("{stressor}_{what}_per_s_{rest}", None, True,
      "the same with words after 'per sec' ('MB per sec pipe write rate')"),
    M("{stressor}_{time}_{what}", None, False,
      "miscellaneous time per operation: the description starts with a time unit (nanosecs, ms, ...), its unit"),
    M("{stressor}_{description}", None, None, "any other miscellaneous metric; unit: the description's first word"),
)

# column / YAML key -> name suffix
_COLUMNS = {
    "bogo-ops": "bogo_ops",
    "wall-clock-time": "real_s",
    "user-time": "usr_s",
    "system-time": "sys_s",
    "bogo-ops-per-second-real-time": "bogo_ops_per_s",
    "bogo-ops-per-second-usr-sys-time": "bogo_ops_per_cpu_s",
    "cpu-usage-per-instance": "cpu_pct",
    "max-rss": "rss_max_kb",
}
# time units a miscellaneous description may start with
_TIME_WORDS = frozenset({"sec", "secs", "seconds", "millisec", "millisecs", "milliseconds", "ms", "microsec",
                         "microsecs", "microseconds", "usec", "usecs", "us", "nanosec", "nanosecs", "nanoseconds",
                         "ns"})  # fmt: skip
_PER_SEC = re.compile(r"\bper sec(ond)?\b")
_ROW = re.compile(rf"^stress-ng: (?:metrc|info): +\[\d+\] ([a-z][\w-]*)((?:\s+{NUM}){{6,8}})\s*$")
_MISC = re.compile(rf"^stress-ng: (?:metrc|info): +\[\d+\] ([a-z][\w-]*)\s+({NUM}) "
                   r"([a-zA-Z].*?)(?: \(\w+ mean of \d+ instances\))?\s*$")


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
    out = Collector(TOOL, METRICS)
    misc = False
    for line in text.splitlines():
        if line.endswith("miscellaneous metrics:"):
            misc = True
        elif (row := _ROW.match(line)) and not misc:
            for suffix, value in zip(_COLUMNS.values(), row[2].split()):
                out.add(f"{{stressor}}_{suffix}", value, stressor=row[1])
        elif (row := _MISC.match(line)) and misc:
            _misc(out, row[1], row[2], row[3])
    return out.result("'stress-ng: metrc:' stressor line (run it with --metrics or --metrics-brief)")


def _misc(out: Collector, stressor: str, value: object, description: str) -> None:
    """One miscellaneous metric, its kind chosen by the form of its description."""
    name = f"{slug(stressor)}_{slug(_PER_SEC.sub('per s', description))}"
    words = description.split()
    if rate := re.search(r"(\S+) per sec(?:ond)?\b", description):
        key = "{stressor}_{what}_per_s" if name.endswith("_per_s") else "{stressor}_{what}_per_s_{rest}"
        out.add(key, value, name=name, with_unit=f"{rate[1]}/s")
    elif words[0] in _TIME_WORDS and len(words) > 1:
        out.add("{stressor}_{time}_{what}", value, name=name, with_unit=words[0])
    else:
        out.add("{stressor}_{description}", value, name=name, with_unit=words[0])


def _from_yaml(path: Path) -> dict[str, ParsedMetric]:
    try:
        doc = yaml.safe_load(path.read_text(errors="replace"))
    except (OSError, ValueError, RecursionError, yaml.YAMLError) as err:
        raise ParseError(f"cannot read stress-ng YAML {path}: {err.__class__.__name__}; "
                         "check that the workload passes --yaml with the same path") from None
    rows = doc.get("metrics") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        raise ParseError(f"stress-ng YAML {path} has no 'metrics:' list of stressors: was stress-ng run with --yaml?")
    out = Collector(TOOL, METRICS)
    for row in rows:
        stressor = str(row.get("stressor", ""))
        for key, value in row.items():
            if key == "stressor" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if key in _COLUMNS:
                out.add(f"{{stressor}}_{_COLUMNS[key]}", value, stressor=stressor)
            elif str(key).strip("- "):
                _misc(out, stressor, value, str(key).replace("-", " "))
    return out.metrics
