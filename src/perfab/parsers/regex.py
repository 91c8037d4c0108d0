"""A named-regex parser for workloads no dedicated parser knows.

Options::

    patterns = {metric_name = "regex with one group, or a group named 'value'"}
    units = {metric_name = "ms"}                 # default ""
    higher_is_better = {metric_name = false}     # default None (no direction)

Each pattern is searched in stdout, then stderr, in multi-line mode; the
last match in a stream wins (summaries follow progress lines).  Thousands
separators (``1,234``) are dropped before conversion; a capture that is not
a finite number (``abc``, ``nan``, ``inf``, ``1e400``) raises ParseError.

A pattern searches each stream under a deadline (``DEADLINE_S``): one that
backtracks without end (``(a|aa)+$`` on a long run of ``a``) fails the run
with the metric's name instead of hanging ``run``, ``plan --try`` and
``parse``.  Python's ``re`` cannot be stopped from outside (a thread cannot
interrupt it, and a signal reaches only the main thread), and a process per
parse would cost a fork per run; so patterns are compiled with the ``regex``
package (its default mode is ``re``'s syntax), whose matcher takes a timeout.
"""

from __future__ import annotations

import time

import regex as re

from perfab.errors import UsageError
from perfab.parsers._base import DeclaredMetric, ParseError, ParsedMetric, number

DEADLINE_S = 2.0  # each pattern's search of one stream; real patterns take milliseconds on stdout_cap bytes

OPTIONS = frozenset({"patterns", "units", "higher_is_better"})
OPTION_TYPES = {  # option -> (TOML type, meaning), for the README
    "patterns": ("table of strings, required", "metric name = regex with one group (or a group named 'value')"),
    "units": ("table of strings", "metric name = its unit (default '')"),
    "higher_is_better": ("table of booleans", "metric name = true or false (default: no direction)"),
}

METRICS = (
    DeclaredMetric("{name}", None, None, "one per entry of option patterns; unit from option units (default ''), "
                   "direction from option higher_is_better (default none)"),
)


def prepare(options: dict) -> dict:
    """Compile the patterns; UsageError for a missing, bad or group-less pattern."""
    patterns = options.get("patterns")
    if not isinstance(patterns, dict) or not patterns:
        raise UsageError("parser 'regex' needs option patterns = {metric_name = \"regex with one group\"}")
    compiled = {name: _compile(name, text) for name, text in patterns.items()}
    units = _mapping(options, "units", str)
    better = _mapping(options, "higher_is_better", (bool, type(None)))
    stray = sorted((set(units) | set(better)) - set(compiled))
    if stray:
        raise UsageError(f"regex parser option names metric {stray[0]!r} that has no pattern")
    return {"patterns": compiled, "units": units, "higher_is_better": better}


def _compile(name: str, text: object) -> re.Pattern:
    if not isinstance(text, str):
        raise UsageError(f"regex pattern for {name!r} must be a string, not {text!r}")
    try:
        pattern = re.compile(text, re.MULTILINE)
    except re.error as err:
        raise UsageError(f"regex pattern for {name!r} does not compile ({err}): fix the expression") from None
    if "value" not in pattern.groupindex and pattern.groups != 1:
        raise UsageError(f"regex pattern for {name!r} needs exactly one group or a group named 'value'")
    return pattern


def _mapping(options: dict, key: str, kind: type | tuple) -> dict:
    value = options.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(v, kind) for v in value.values()):
        raise UsageError(f"regex parser option {key} must map metric names to {getattr(kind, '__name__', 'bool')}")
    return value


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """One metric per pattern; ParseError naming the first pattern that found nothing."""
    out = {}
    for name, pattern in options["patterns"].items():
        found = last_match(name, pattern, stdout) or last_match(name, pattern, stderr)
        if found is None:
            raise ParseError(f"regex for metric {name!r} matched nothing in the output: check the pattern "
                             f"{pattern.pattern!r} against what the workload prints")
        raw = found["value"] if "value" in pattern.groupindex else found[1]
        try:
            value = number((raw or "").replace(",", ""), f"metric {name!r}")
        except ParseError:
            raise ParseError(f"regex for metric {name!r} captured {(raw or '')[:40]!r}, which is not a finite "
                             "number: make the group capture only the number") from None
        out[name] = ParsedMetric(value, options["units"].get(name, ""), options["higher_is_better"].get(name))
    return out


def last_match(name: str, pattern: re.Pattern, text: str):
    """The last match of ``pattern`` in ``text`` (as ``finditer`` finds them), within ``DEADLINE_S`` in all."""
    deadline = time.monotonic() + DEADLINE_S
    found, pos = None, 0
    while pos <= len(text):
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            match = pattern.search(text, pos, timeout=left)
        except TimeoutError:
            raise ParseError(f"regex for metric {name!r} ran past its {DEADLINE_S:g} s deadline on {len(text):,} "
                             "characters of output (it backtracks without end): rewrite the pattern without nested "
                             "or overlapping repeats such as (a|aa)+") from None
        if match is None:
            break
        found, pos = match, match.end() + (match.end() == match.start())
    return found
