"""``perfab plan --try`` and ``perfab parse``: what each metric read, run by run, and why a run read nothing."""

from __future__ import annotations

from perfab.units import fmt_number
from perfab.run.trial import Trial
from perfab.terminal import visible

_SHOWN = ("parser", "service")  # sources listed by name; perfab's own readings are counted


def trial_lines(trials: list[Trial], declared: dict[str, set[str]], show_all: bool = False) -> list[str]:
    """A block per trial run: its outcome, then each metric the workload's parser (or a declaration) read."""
    failed = sum(1 for t in trials if t.status != "ok")
    out = [f"TRY: one run per side and sweep point, not stored ({len(trials) - failed} ok, {failed} failed)"]
    for t in trials:
        point = " ".join(f"{k}={v}" for k, v in t.params)
        where = f"{t.workload} on {t.side}" + (f" at {point}" if point else "")
        if t.status != "ok":
            out.append(f"  FAILED  {where}: {t.reason}")
            out += [f"          stdout ends | {line[:100]}" for line in t.stdout_tail]
            continue
        out.append(f"  ok      {where}")
        out += _reading_lines(t, declared.get(t.workload, set()), show_all)
    return [visible(line) for line in out]  # output, metric names and reasons come from the workload


def _reading_lines(t: Trial, declared: set[str], show_all: bool) -> list[str]:
    shown = [r for r in t.readings if show_all or r.source in _SHOWN or r.metric in declared]
    rest = len(t.readings) - len(shown)
    width = max([len(r.metric) for r in shown] + [10])
    lines = [f"          {r.metric:<{width}}  {metric_value(r.value, r.unit)}  ({r.source})" for r in shown]
    if not shown:
        lines.append("          no metric from a parser or a declaration")
    if rest:
        lines.append(f"          and {rest} reading(s) perfab takes itself (--all lists them)")
    return lines


def metric_value(value: float, unit: str | None) -> str:
    """A reading with its unit, through the report's number format."""
    text = fmt_number(value, float(value).is_integer())
    return f"{text} {unit}" if unit and unit != "count" else text


def parsed_lines(workload: str, parsed: dict) -> list[str]:
    """``perfab parse``: each metric the parser read from the file, with unit and direction."""
    if not parsed:
        return [f"{workload}: the parser read no metric"]
    width = max(len(m) for m in parsed)
    arrows = {True: "higher is better", False: "lower is better", None: "no direction"}
    return [visible(f"{m:<{width}}  {metric_value(p.value, p.unit)}  ({arrows[p.higher_is_better]})")
            for m, p in parsed.items()]
