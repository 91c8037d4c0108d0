"""``perfab history`` as plain text (80 columns) or JSON.

Text: per series a table with one row per session (date, commit and
subject, median, its interval, runs); a change point is a marked line
between the last session before it and the first after, with the relative
change of the mean of the session medians either side and its p-value,
and the machine settings that differ across it below.  A legend names the
method and its settings.  JSON carries the same, with full commit hashes
and unix times; unbounded interval ends are ``"-inf"``/``"inf"``.
"""

from __future__ import annotations

import json
import math
import time

from perfab.analyse.history import Change, History, Point, Series
from perfab.units import fmt_number, fmt_pct
from perfab.report.lines import WIDTH, clip as _clip, wrap as _wrap
from perfab.terminal import visible

_MACHINE_KEYS_SHOWN = 4  # settings listed under a change point; JSON has all


def render_history(h: History, fmt: str = "text") -> str:
    """JSON, or text for a terminal: control characters from labels and commit subjects shown as \\xNN."""
    return render_history_json(h) if fmt == "json" else visible(render_history_text(h))


def render_history_text(h: History) -> str:
    out = [f"perfab history: {h.experiment}", "", "ORDER"]
    for o in h.orders:
        if o.by == "commit":
            out += [f"  {o.side}: by commit (git rev-list --topo-order; a commit's sessions by date) in",
                    f"    {o.repository}"]
        else:
            out += _wrap(f"  {o.side}: by session date" + (f" ({o.note})" if o.note else ""), "    ")
    if not h.series:
        out += ["", "No measured runs to show."]
    for s in h.series:
        out += ["", *_heading(s), ""]
        out += _table(s)
        out += _verdict(s, h)
    out += ["", *_legend(h)]
    warnings = [w for s in h.series for w in _warnings(s)]
    if warnings:
        out += ["", "WARNINGS"] + [line for w in dict.fromkeys(warnings) for line in _wrap(f"- {w}")]
    return "\n".join(out).rstrip() + "\n"


def _heading(s: Series) -> list[str]:
    point = "".join(f" {k}={v}" for k, v in s.params)
    direction = {True: "higher = better", False: "lower = better", None: "no direction"}[s.higher_is_better]
    unit = f", {s.unit}" if s.unit and s.unit not in s.label else ""
    return _wrap(f"{s.workload.upper()}{point}: {s.label}{unit} ({direction}), side {s.side}")


def _table(s: Series) -> list[str]:
    """With commits: date, commit, subject; without: date and time, session."""
    integral = all(float(p.median).is_integer() and _whole(p.lo) and _whole(p.hi) for p in s.points)
    git = any(p.commit for p in s.points)
    cells = [(_when(p, git), _commit(p), p.subject or "", fmt_number(p.median, integral), _interval(p, integral),
              str(p.n)) for p in s.points]
    head = ("Date", "Commit" if git else "Session", "Subject", "Median", "Interval", "n")
    wd, wc = (10, 12) if git else (16, max(len(c[1]) for c in [*cells, head]))
    wm, wi, wn = (max(len(c[k]) for c in [*cells, head]) for k in (3, 4, 5))
    ws = WIDTH - (wd + 2 + wc + 1 + 2 + wm + 2 + wi + 2 + wn) if git else 0

    def line(c) -> str:
        subject = f" {_clip(c[2], ws):<{ws}}" if ws >= 8 else ""
        return f"{c[0]:<{wd}}  {c[1]:<{wc}}{subject}  {c[3]:>{wm}}  {c[4]:>{wi}}  {c[5]:>{wn}}"

    header = line(head)
    rule = "-" * min(WIDTH, len(header))
    rows = [header, rule]
    changes = {c.index: c for c in s.changes}
    for i, c in enumerate(cells):
        if i in changes:
            rows += _change_lines(s, changes[i], integral)
        rows.append(line(c))
    return rows + [rule]


def _change_lines(s: Series, c: Change, integral: bool) -> list[str]:
    change = "no ratio (mean 0 before)" if c.change is None else f"{100 * c.change:+.2f}%"
    judged = _judged(s, c)
    text = (f">> change point: {change}{judged} (mean {fmt_number(c.before, integral)} -> "
            f"{fmt_number(c.after, integral)}), p {_p(c.p)}")
    lines = _wrap(text, "   ")
    if c.machine:
        shown = ", ".join(f"{k} {a} -> {b}" for k, a, b in c.machine[:_MACHINE_KEYS_SHOWN])
        more = f" (+{len(c.machine) - _MACHINE_KEYS_SHOWN} more)" if len(c.machine) > _MACHINE_KEYS_SHOWN else ""
        lines += [_clip(x, WIDTH) for x in _wrap(f"!! machine differs across it: {shown}{more}", "   ")]
    return lines


def _judged(s: Series, c: Change) -> str:
    if s.higher_is_better is None or c.change is None or c.change == 0:
        return ""
    return " regression" if (c.change < 0) == s.higher_is_better else " improvement"


def _verdict(s: Series, h: History) -> list[str]:
    d = s.detection
    if d is None:
        need = 2 * h.method.min_size
        return _wrap(f"{len(s.points)} session(s): too few to look for a change point (need {need}).")
    if s.changes:
        return []
    if d.rejected is None:
        return _wrap(f"No change point at alpha {h.alpha:g}.")
    at = s.points[d.rejected.index]
    return _wrap(f"No change point at alpha {h.alpha:g} (strongest split: before {_where(at)}, "
                 f"p {_p(d.rejected.p)}).")


def _legend(h: History) -> list[str]:
    m = h.method
    text = (f"Median of each session's runs with its {fmt_pct(h.confidence, digits=3)} distribution-free interval "
            "(order statistics of the runs; '-' where too few runs give none); dates UTC.  Change points: E-divisive "
            f"with means (Matteson & James, JASA 2014) on the session medians, distance exponent {m.exponent:g}, "
            f"at least {m.min_size} sessions either side; each tested by {m.permutations} permutations within "
            f"segments (seed {m.seed}) at alpha {h.alpha:g}.  Change: the mean of the session medians after "
            "the change point against the mean before, each up to the next change point.")
    blocks = sorted({x.detection.block for x in h.series if x.detection is not None and x.detection.block > 1})
    if blocks:
        sizes = "/".join(str(b) for b in blocks)
        text += (f"  Series over {m.max_points} sessions were searched as medians of blocks of {sizes} sessions: "
                 "a change point is placed at the first session of its block.")
    return _wrap(text)


def _warnings(s: Series) -> list[str]:
    out = []
    where = f"{s.workload}/{s.label} [{s.side}]"
    for c in s.changes:
        at = _where(s.points[c.index])
        if c.machine:
            keys = ", ".join(k for k, _, _ in c.machine)
            out.append(f"{where}: the machine differs across the change point before {at} ({keys}); that may be "
                       "the cause, not the commit")
        out += [f"{where}: {w}, across the change point before {at}" for w in c.warnings]
    return out


def _where(p: Point) -> str:
    return p.commit[:12] if p.commit else f"session {p.session}"


def _when(p: Point, date_only: bool) -> str:
    return time.strftime("%Y-%m-%d" if date_only else "%Y-%m-%d %H:%M", time.gmtime(p.started_at))


def _commit(p: Point) -> str:
    return p.commit[:12] if p.commit else str(p.session)


def _interval(p: Point, integral: bool) -> str:
    if not (math.isfinite(p.lo) and math.isfinite(p.hi)):
        return "-"
    return f"{fmt_number(p.lo, integral)}..{fmt_number(p.hi, integral)}"


def _whole(x: float) -> bool:
    return not math.isfinite(x) or float(x).is_integer()


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1g}"


def render_history_json(h: History) -> str:
    m = h.method
    doc = {
        "experiment": h.experiment, "sessions": h.sessions, "confidence": h.confidence,
        "method": {"name": m.name, "alpha": h.alpha, "permutations": m.permutations, "seed": m.seed,
                   "exponent": m.exponent, "min_size": m.min_size},
        "order": [{"side": o.side, "by": o.by, "repository": o.repository, "note": o.note} for o in h.orders],
        "series": [_series_dict(s) for s in h.series],
        "warnings": list(dict.fromkeys(w for s in h.series for w in _warnings(s))),
    }
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def _series_dict(s: Series) -> dict:
    d = s.detection
    rejected = None if d is None or d.rejected is None else \
        {"index": d.rejected.index, "session": s.points[d.rejected.index].session, "p": d.rejected.p,
         "statistic": d.rejected.statistic}
    return {
        "workload": s.workload, "params": dict(s.params), "side": s.side, "metric": s.metric, "label": s.label,
        "unit": s.unit, "higher_is_better": s.higher_is_better, "tested": d is not None,
        "points": [{"session": p.session, "started_at": p.started_at, "commit": p.commit, "ref": p.ref,
                    "subject": p.subject, "n": p.n, "median": _num(p.median), "lo": _num(p.lo), "hi": _num(p.hi)}
                   for p in s.points],
        "change_points": [{"index": c.index, "session": s.points[c.index].session,
                           "commit": s.points[c.index].commit, "before": _num(c.before), "after": _num(c.after),
                           "change": _num(c.change), "p": c.p, "found": c.found,
                           "statistic": next(x.statistic for x in d.change_points if x.index == c.index),
                           "machine": [{"key": k, "before": a, "after": b} for k, a, b in c.machine],
                           "warnings": list(c.warnings)} for c in s.changes],
        "strongest_rejected": rejected,
    }


def _num(x: float | None):
    """A JSON-safe number: null for None and nan, "inf"/"-inf" for unbounded interval ends."""
    if x is None or math.isnan(x):
        return None
    return float(x) if math.isfinite(x) else ("inf" if x > 0 else "-inf")
