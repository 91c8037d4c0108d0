"""Parsers for ``perf stat`` machine-readable output: CSV (``-x SEP``) and JSON (``-j``).

Both return a :class:`PerfStatOutput`: typed :class:`PerfRow` values in the
order perf printed them, plus every line that was not a row (perf's warnings
and errors when stderr was captured into the same text).

Field layout of a CSV counter row (perf 6.1, ``tools/perf/util/stat-display.c``)::

    [interval,] [aggregation prefix...,] value, unit, event, [variance%,]
    run_time_ns, pct_running, [metric_value, metric_unit]

The aggregation prefix has no marker (``CPU0`` for ``-A``, ``S0-D0-C0,1`` for
``--per-core``, ``S0,2`` for ``--per-socket``, ``work-7413`` for
``--per-thread``), so a row is anchored on its first ``value, unit, event``
triple: a number or ``<not counted>``/``<not supported>``, then a unit that is
not a number, then a non-empty event name.  An interval timestamp has nine
decimals (and is space-padded in 6.1), which no CSV counter value has.

Rows with no counter carry metrics only: TopdownL1 rows such as
``,,,,,12.5,%  tma_frontend_bound`` and continuation lines of a counter with
several metrics; their ``event`` is ``""``.  A metric-group header
(``,225849327050,100.00,,,,TopdownL1`` in perf >= 6.5) is a row with
``event == ""`` and the group name in ``metric_unit``.

Damaged output.  A line that is not a row (perf's warnings, or anything
unreadable: bad JSON, a field of the wrong type) goes to ``messages``, as
before.  A line that *is* a row but carries a number that is not finite --
``1e400`` (infinite once read), ``nan`` or a run time too long to be one --
raises :class:`PerfStatParseError` naming the line and the field: perf never
prints such a count, so the file is damaged and no count in it can be
trusted.  The one exception is ``metric_value``, where perf itself prints
``nan`` (a ratio over a zero count); it stays ``nan``.  So every ``value``,
``run_time_ns``, ``pct_running``, ``variance_pct`` and ``interval_s`` that
the parsers return is finite or None, and no other exception escapes them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from perfab.errors import PerfabError

Status = Literal["ok", "not counted", "not supported"]
T = TypeVar("T")

_NUMBER_RE = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$", re.ASCII)
_INT_RE = re.compile(r"^\s*\d+\s*$", re.ASCII)
_INTERVAL_RE = re.compile(r"^\s*\d+\.\d{9}$", re.ASCII)
_VARIANCE_RE = re.compile(r"^\d+(\.\d+)?%$", re.ASCII)
_NOT_COUNTED = "<not counted>"
_NOT_SUPPORTED = "<not supported>"
# JSON keys that name the aggregation unit of a row, in perf's printing order.
_JSON_PREFIX_KEYS = ("cpu", "node", "socket", "die", "cache", "core", "thread", "aggregate-number")


class PerfStatParseError(PerfabError):
    """perf stat output with a row whose numbers cannot be true (not finite): the output is damaged."""


class _NotFinite(Exception):
    """A row field that reads as infinite or nan; the line loop turns it into a PerfStatParseError."""


@dataclass(frozen=True)
class PerfRow:
    """One line of ``perf stat`` output: a counter reading or a metric-only line."""

    prefix: tuple[str, ...]  # aggregation prefix ("CPU0",) / ("S0-D0-C0", "1") / ("work-7413",); () when aggregated
    interval_s: float | None  # -I timestamp in seconds since start; None outside interval mode
    value: float | None  # the count in `unit`, finite; None when not counted/supported or a metric-only row
    status: Status  # "ok", "not counted" or "not supported"
    unit: str  # perf's unit for value: "", "msec", "ns"
    event: str  # event name as perf printed it ("" for metric-only rows)
    run_time_ns: int | None  # time the counter was running, ns (perf's "event-runtime")
    pct_running: float | None  # percent of the enabled time the counter ran; < 100 means multiplexed
    variance_pct: float | None  # -r N: relative standard deviation of the mean, percent
    metric_value: float | None  # perf's derived metric (rounded in CSV); nan when perf printed nan
    metric_unit: str  # the metric's label ("insn per cycle", "% tma_frontend_bound"), spaces collapsed


@dataclass(frozen=True)
class PerfStatOutput:
    """A parsed ``perf stat`` output."""

    rows: tuple[PerfRow, ...]  # every counter and metric line, in perf's order
    messages: tuple[str, ...]  # non-row, non-comment lines (warnings, errors), stripped

    def counters(self) -> tuple[PerfRow, ...]:
        """The rows that read a counter (metric-only and header rows left out)."""
        return tuple(r for r in self.rows if r.event)


def parse_csv(text: str, sep: str | None = None) -> PerfStatOutput:
    """Parse ``perf stat -x SEP`` output; ``sep=None`` picks ``;`` or ``,``, whichever finds more counters.

    PerfStatParseError for a row with a number that is not finite (see the module docstring).
    """
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if sep is None:
        sep = max((";", ","), key=lambda s: sum(_value_index(line.split(s)) is not None for line in lines if s in line))
    rows: list[PerfRow] = []
    messages: list[str] = []
    for line in lines:
        row = _checked(_csv_row, line.split(sep), line) if sep in line else None
        if row is None:
            messages.append(line.strip())
        else:
            rows.append(row)
    return PerfStatOutput(tuple(rows), tuple(messages))


def parse_json(text: str) -> PerfStatOutput:
    """Parse ``perf stat -j`` output: one JSON object per line.

    PerfStatParseError for a row with a number that is not finite (see the module docstring).
    """
    rows: list[PerfRow] = []
    messages: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        row = _checked(_json_row_or_none, stripped, stripped)
        if row is None:
            messages.append(stripped)
        else:
            rows.append(row)
    return PerfStatOutput(tuple(rows), tuple(messages))


def _checked(read: Callable[[T], PerfRow | None], arg: T, line: str) -> PerfRow | None:
    """``read(arg)``, with a non-finite field reported as PerfStatParseError quoting ``line``."""
    try:
        return read(arg)
    except _NotFinite as err:
        shown = line if len(line) <= 80 else line[:77] + "..."
        raise PerfStatParseError(f"perf stat output has a row whose {err} is not a finite number ({shown!r}): "
                                 "the output is damaged; rerun, and report it with the output if it recurs") from None


def topdown_rows(parsed: PerfStatOutput) -> dict[str, float] | None:
    """The ``tma_*`` metrics as fractions of slots (0..1), or None when perf printed none.

    perf prints them as percent (``12.5,%  tma_frontend_bound``); a ``%`` in
    the label is divided out.  When ``-M TopdownL1`` is unknown on the CPU perf
    silently falls back to its default events and exits 0, so no ``tma_*``
    row is the only sign.  On hybrid CPUs the first (cpu_core) value of a
    name is kept.
    """
    found: dict[str, float] = {}
    for row in parsed.rows:
        name = next((w for w in row.metric_unit.split() if w.startswith("tma_")), None)
        if name is None or row.metric_value is None or name in found:
            continue
        scale = 100.0 if "%" in row.metric_unit else 1.0
        found[name] = row.metric_value / scale
    return found or None


def _is_number(field: str) -> bool:
    return bool(_NUMBER_RE.match(field.strip()))


def _is_value(field: str) -> bool:
    return _is_number(field) or field in (_NOT_COUNTED, _NOT_SUPPORTED)


def _value_index(fields: list[str]) -> int | None:
    """Index of the ``value, unit, event`` triple that starts a counter row."""
    for i in range(min(len(fields) - 2, 6)):
        value, unit, event = fields[i], fields[i + 1].strip(), fields[i + 2].strip()
        if not _is_value(value) or _is_number(unit) or unit.startswith("<"):
            continue
        if event and not _is_number(event) and not event.startswith("<"):
            return i
    return None


def _split_prefix(prefix: list[str]) -> tuple[tuple[str, ...], float | None]:
    if prefix and _INTERVAL_RE.match(prefix[0]):
        return tuple(p.strip() for p in prefix[1:]), _finite(float(prefix[0]), "interval", prefix[0])
    return tuple(p.strip() for p in prefix), None


def _csv_row(fields: list[str]) -> PerfRow | None:
    i = _value_index(fields)
    if i is None:
        return _csv_metric_row(fields)
    prefix, interval_s = _split_prefix(fields[:i])
    value, status = _value(fields[i])
    rest = [f.strip() for f in fields[i + 3 :]]
    variance = None
    if rest and _VARIANCE_RE.match(rest[0]):
        variance, rest = _finite(float(rest[0][:-1]), "variance", rest[0]), rest[1:]
    rest += [""] * (4 - len(rest))
    return PerfRow(
        prefix=prefix, interval_s=interval_s, value=value, status=status,
        unit=fields[i + 1].strip(), event=fields[i + 2].strip(),
        run_time_ns=_int_or_none(rest[0]), pct_running=_float_or_none(rest[1], "percent running"),
        variance_pct=variance, metric_value=_float_or_none(rest[2], "metric value", nan_ok=True),
        metric_unit=" ".join(rest[3].split()),
    )  # fmt: skip


def _csv_metric_row(fields: list[str]) -> PerfRow | None:
    """A row without a counter: ``[prefix...],,,,,value,label`` or a metric-group header."""
    label = " ".join(fields[-1].split())
    if len(fields) < 3 or not label or _is_number(label):
        return None
    lead = [f for f in fields[:-2] if f.strip()]
    metric = fields[-2].strip()
    k = next((j for j, f in enumerate(fields) if not f.strip()), None)  # the prefix ends there
    if k is not None and (_is_number(metric) or metric.lower() in ("nan", "-nan")):
        prefix, interval_s = _split_prefix(fields[:k])
        return _metric_only(prefix, interval_s, _float_or_none(metric, "metric value", nan_ok=True), label, None, None)
    if len(lead) == 2 and _INT_RE.match(lead[0]) and _is_number(lead[1]):  # header: ,run,pct,,,,Group
        return _metric_only((), None, None, label, _int_or_none(lead[0]), _float_or_none(lead[1], "percent running"))
    return None


def _metric_only(prefix, interval_s, metric, label, run_ns, pct) -> PerfRow:
    return PerfRow(prefix, interval_s, None, "ok", "", "", run_ns, pct, None, metric, label)


def _json_object(line: str) -> dict | None:
    """The line as a JSON object (perf 6.1 prints a bare ``nan``/``-nan``); None if it is not one."""
    for candidate in (line, re.sub(r":\s*(-?nan)\b", ': "nan"', line)):
        try:
            obj = json.loads(candidate)
        except (ValueError, RecursionError):  # bad JSON, a 5000-digit integer, deep nesting
            continue
        return obj if isinstance(obj, dict) else None
    return None


def _json_row_or_none(line: str) -> PerfRow | None:
    obj = _json_object(line) if line.startswith("{") else None
    try:
        return _json_row(obj) if obj is not None else None
    except ValueError:  # a counter-value or interval that is neither a number nor <not ...>
        return None


def _json_row(obj: dict) -> PerfRow:
    prefix = tuple(str(obj[k]) for k in _JSON_PREFIX_KEYS if k in obj)
    interval = obj.get("interval")
    raw = obj.get("counter-value")
    value, status = _json_value(raw) if raw is not None else (None, "ok")
    label = obj.get("metricgroup") or obj.get("metric-unit") or ""
    has_metric = "metric-value" in obj and "metricgroup" not in obj
    run_time = _json_number(obj.get("event-runtime"), "event-runtime")
    return PerfRow(
        prefix=prefix, interval_s=_json_interval(interval) if interval is not None else None,
        value=value, status=status, unit=str(obj.get("unit", "")), event=str(obj.get("event", "")),
        run_time_ns=int(run_time) if run_time is not None else None,
        pct_running=_json_number(obj.get("pcnt-running"), "pcnt-running"),
        variance_pct=_json_number(obj.get("variance"), "variance"),
        metric_value=_json_number(obj["metric-value"], "metric-value", nan_ok=True) if has_metric else None,
        metric_unit=" ".join(str(label).split()),
    )  # fmt: skip


def _json_value(raw: object) -> tuple[float | None, Status]:
    """``counter-value``: a number, a numeric string or ``<not ...>``; ValueError for anything else."""
    if isinstance(raw, str) and raw.strip() in (_NOT_COUNTED, _NOT_SUPPORTED):
        return _value(raw)
    value = _json_number(raw, "counter-value")
    if value is None:
        raise ValueError(f"counter-value {raw!r} is not a count")
    return value, "ok"


def _json_interval(raw: object) -> float:
    value = _json_number(raw, "interval")
    if value is None:
        raise ValueError(f"interval {raw!r} is not a time")
    return value


def _json_number(raw: object, field: str, nan_ok: bool = False) -> float | None:
    """A JSON number or numeric string as a float; None for other types and text; _NotFinite for inf or nan."""
    if isinstance(raw, str):
        return _float_or_none(raw, field, nan_ok)
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    try:
        value = float(raw)
    except OverflowError:  # an integer beyond the float range
        value = math.inf
    if math.isnan(value) and nan_ok:
        return value
    return _finite(value, field, str(raw))


def _value(field: str) -> tuple[float | None, Status]:
    field = field.strip()
    if field == _NOT_COUNTED:
        return None, "not counted"
    if field == _NOT_SUPPORTED:
        return None, "not supported"
    return _finite(float(field), "count", field), "ok"


def _finite(value: float, field: str, text: str) -> float:
    """``value`` when finite; else _NotFinite naming ``field`` and the ``text`` it was read from."""
    if not math.isfinite(value):
        raise _NotFinite(f"{field} {text.strip()[:40]!r}")
    return value


def _float_or_none(field: str, name: str, nan_ok: bool = False) -> float | None:
    """A numeric field as a finite float (or nan, where perf prints it: ``nan_ok``); None when not a number."""
    field = field.strip()
    if field.lower() in ("nan", "-nan"):
        if nan_ok:
            return math.nan
        raise _NotFinite(f"{name} {field!r}")
    return _finite(float(field), name, field) if _is_number(field) else None


def _int_or_none(field: str) -> int | None:
    field = field.strip()
    return int(_finite(float(field), "run time", field)) if _is_number(field) else None


def exclusion(row: PerfRow) -> str | None:
    """Why a counted row's value cannot be used (not supported, not counted, multiplexed, missing); None: it
    can."""
    if row.status == "not supported":
        return "<not supported>: this machine cannot count the event (see `perfab counters`)"
    if row.status == "not counted":
        return "<not counted>: the counter never ran (perf could not schedule it, or the run was too short)"
    if row.pct_running is not None and row.pct_running < 100.0:
        return (f"multiplexed: the counter ran {row.pct_running:.2f}% of the time and perf scaled it up;"
                " lower max_events_per_run")  # fmt: skip
    if row.value is None:
        return "perf printed no value"
    return None
