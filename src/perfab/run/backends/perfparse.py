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
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "not counted", "not supported"]

_NUMBER_RE = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_INTERVAL_RE = re.compile(r"^\s*\d+\.\d{9}$")
_VARIANCE_RE = re.compile(r"^\d+(\.\d+)?%$")
_NOT_COUNTED = "<not counted>"
_NOT_SUPPORTED = "<not supported>"
# JSON keys that name the aggregation unit of a row, in perf's printing order.
_JSON_PREFIX_KEYS = ("cpu", "node", "socket", "die", "cache", "core", "thread", "aggregate-number")


@dataclass(frozen=True)
class PerfRow:
    """One line of ``perf stat`` output: a counter reading or a metric-only line."""

    prefix: tuple[str, ...]  # aggregation prefix ("CPU0",) / ("S0-D0-C0", "1") / ("work-7413",); () when aggregated
    interval_s: float | None  # -I timestamp in seconds since start; None outside interval mode
    value: float | None  # the count in `unit`; None when not counted/supported or a metric-only row
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


def parse_perf_stat(text: str) -> PerfStatOutput:
    """Parse ``perf stat -j`` or ``-x SEP`` output, whichever ``text`` is."""
    if any(line.lstrip().startswith("{") for line in text.splitlines()):
        return parse_json(text)
    return parse_csv(text)


def parse_csv(text: str, sep: str | None = None) -> PerfStatOutput:
    """Parse ``perf stat -x SEP`` output; ``sep=None`` picks ``;`` or ``,`` by what parses."""
    if sep is None:
        by_sep = [parse_csv(text, s) for s in (";", ",")]
        return max(by_sep, key=lambda out: len(out.counters()))
    rows: list[PerfRow] = []
    messages: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        row = _csv_row(line.split(sep)) if sep in line else None
        if row is None:
            messages.append(line.strip())
        else:
            rows.append(row)
    return PerfStatOutput(tuple(rows), tuple(messages))


def parse_json(text: str) -> PerfStatOutput:
    """Parse ``perf stat -j`` output: one JSON object per line."""
    rows: list[PerfRow] = []
    messages: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        row = _json_row_or_none(stripped)
        if row is None:
            messages.append(stripped)
        else:
            rows.append(row)
    return PerfStatOutput(tuple(rows), tuple(messages))


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
        return tuple(p.strip() for p in prefix[1:]), float(prefix[0])
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
        variance, rest = float(rest[0][:-1]), rest[1:]
    rest += [""] * (4 - len(rest))
    return PerfRow(
        prefix=prefix, interval_s=interval_s, value=value, status=status,
        unit=fields[i + 1].strip(), event=fields[i + 2].strip(),
        run_time_ns=_int_or_none(rest[0]), pct_running=_float_or_none(rest[1]),
        variance_pct=variance, metric_value=_float_or_none(rest[2]),
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
        return _metric_only(prefix, interval_s, float(metric), label, None, None)
    if len(lead) == 2 and _is_number(lead[0]) and _is_number(lead[1]):  # header: ,run,pct,,,,Group
        return _metric_only((), None, None, label, int(lead[0]), float(lead[1]))
    return None


def _metric_only(prefix, interval_s, metric, label, run_ns, pct) -> PerfRow:
    return PerfRow(prefix, interval_s, None, "ok", "", "", run_ns, pct, None, metric, label)


def _json_object(line: str) -> dict | None:
    for candidate in (line, re.sub(r":\s*(-?nan)\b", ': "nan"', line)):
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        return obj if isinstance(obj, dict) else None
    return None


def _json_row_or_none(line: str) -> PerfRow | None:
    obj = _json_object(line) if line.startswith("{") else None
    try:
        return _json_row(obj) if obj is not None else None
    except ValueError:  # a counter-value that is neither a number nor <not ...>
        return None


def _json_row(obj: dict) -> PerfRow:
    prefix = tuple(str(obj[k]) for k in _JSON_PREFIX_KEYS if k in obj)
    interval = obj.get("interval")
    raw = obj.get("counter-value")
    value, status = _value(str(raw)) if raw is not None else (None, "ok")
    label = obj.get("metricgroup") or obj.get("metric-unit") or ""
    has_metric = "metric-value" in obj and "metricgroup" not in obj
    return PerfRow(
        prefix=prefix, interval_s=float(interval) if interval is not None else None,
        value=value, status=status, unit=str(obj.get("unit", "")), event=str(obj.get("event", "")),
        run_time_ns=_int_or_none(str(obj.get("event-runtime", ""))),
        pct_running=_float_or_none(str(obj.get("pcnt-running", ""))),
        variance_pct=_float_or_none(str(obj.get("variance", ""))),
        metric_value=_float_or_none(str(obj["metric-value"])) if has_metric else None,
        metric_unit=" ".join(str(label).split()),
    )  # fmt: skip


def _value(field: str) -> tuple[float | None, Status]:
    field = field.strip()
    if field == _NOT_COUNTED:
        return None, "not counted"
    if field == _NOT_SUPPORTED:
        return None, "not supported"
    return float(field), "ok"


def _float_or_none(field: str) -> float | None:
    field = field.strip()
    if field.lower() in ("nan", "-nan"):
        return math.nan
    return float(field) if _is_number(field) else None


def _int_or_none(field: str) -> int | None:
    field = field.strip()
    return int(float(field)) if _is_number(field) else None
