"""The report document: what every format (text, markdown, JSON, CSV, HTML) shows, built once from an analysis.

``document(analysis)`` gives a ``Report``: the analysis's typed rows
(``Verdict`` marks, ``Diagnostic`` objects), and, drawn from them once,
the prose every format shares: the SETUP lines (the backend describes
what it counted), per workload the rows shown, the legend under the table
(each statistical method describes itself) and the problems below it.
Renderers read the document and lay it out; none of them re-derives the
prose or matches a diagnostic by its text.  The JSON rendering of a
``Report`` is versioned: ``FORMAT_VERSION``, documented field by field in
``docs/report-json.md`` (``perfab.report.schema``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from perfab.analyse.diagnostics import Kind
from perfab.analyse.methods import ABSOLUTE, get_method
from perfab.analyse.model import Analysis, Row, WorkloadInfo, compared
from perfab.analyse.units import optimal_runs
from perfab.analyse.verdicts import Verdict
from perfab.methodtraits import DEFAULT
from perfab.replication import RUN, Replication
from perfab.report.lines import clip
from perfab.report.notes import FOLDED, KEY, MISSING, Note, diagnostic_rank, diagnostic_topic
from perfab.report.numbers import measured_rows, noise_range
from perfab.specfile.backends import stored
from perfab.units import fmt_pct

FORMAT_VERSION = 6  # the JSON report's format; raised when a field is added, changes meaning or goes away


@dataclass(frozen=True)
class MethodNote:
    """A statistical method that judged rows of a table, in its own words."""

    name: str  # the method's name, as each row's ``method`` carries it
    text: str  # what it tests and how Delta and the interval are formed


@dataclass(frozen=True)
class Section:
    """One workload as every format shows it."""

    info: WorkloadInfo  # name, command, failed and excluded runs, metrics left out
    rows: tuple[Row, ...]  # its rows with a verdict, in table order (rows not compared are in ``problems``)
    compared: bool  # a side has usable runs: there is a table to show
    methods: tuple[MethodNote, ...]  # the methods that judged ``rows``, by name
    legend: tuple[str, ...]  # the notes under the table: directions, marks, tests, detectable effect
    problems: tuple[str, ...]  # failed and excluded runs, rows not compared, hidden metrics, diagnostics
    notes: tuple[Note, ...] = ()  # legend and problems ranked for a compact report (``perfab.report.notes``)


@dataclass(frozen=True)
class Report:
    """The typed report document; see the module docstring."""

    analysis: Analysis  # the rows, sides, settings and experiment-level warnings
    setup: tuple[str, ...]  # the SETUP block's lines (indented two spaces, not wrapped)
    sections: tuple[Section, ...]  # one per workload, in spec order
    format_version: int = FORMAT_VERSION  # version of the JSON rendering
    sizes: tuple["SizeTable", ...] = ()  # each side's code size against the baseline's (measure.size), side order


@dataclass(frozen=True)
class SizeTable:
    """One side's code size against the baseline's, as ``measure.size`` stored it with the session."""

    side: str  # the side whose vmlinux is NEW
    against: str  # the side whose vmlinux is OLD (the baseline)
    command: str  # the perfab size command that prints the whole table again
    lines: tuple[str, ...]  # the stored table (perfab.kernel.sizes.ROWS rows per listing)


def document(a: Analysis) -> Report:
    """The report document of analysis ``a``."""
    return Report(a, tuple(setup_lines(a)), tuple(_section(a, info) for info in a.workloads),
                  sizes=size_tables(a))


def size_tables(a: Analysis) -> tuple[SizeTable, ...]:
    """The code-size tables stored with the session's sources (``sources[side]["size"]``), in side order."""
    out = []
    for side in a.variants:
        entry = (a.sources.get(side) or {}).get("size")
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            command = f"perfab size {entry.get('old')} {entry.get('new')}"
            lines = tuple(entry["text"].rstrip("\n").split("\n"))
            out.append(SizeTable(side, str(entry.get("against")), command, lines))
    return tuple(out)


def mark(row: Row) -> str:
    """A row's verdict as the reports print it: ``**``, ``flat``, ``ns``, ``valid``, ``INVALID (2 runs)``, ``-``."""
    if row.verdict == Verdict.INVALID:
        return f"{Verdict.INVALID.value} ({row.invalid_runs} runs)"
    return row.verdict.value if isinstance(row.verdict, Verdict) else str(row.verdict)


def short(label: str) -> str:
    """A label as the notes under a table name it: without its unit, and no longer than a line's half."""
    return clip(label.split(" (")[0], 40)


def _section(a: Analysis, info: WorkloadInfo) -> Section:
    rows = tuple(r for r in a.rows if r.workload == info.name and r.verdict != Verdict.NONE)
    methods = _methods(a, rows)
    legend, problems = _legend(a, rows, methods), _problems(info, rows, a.rows)
    shows = compared(a, info.name)
    changed = _directions(tuple(r for r in rows if r.verdict == Verdict.CHANGE))  # better or worse: where it matters
    notes = [Note(changed, "directions", KEY)] if changed and shows else []
    notes += [n for n in legend if n.topic != "directions" and shows] + problems
    return Section(info, rows, shows, methods, tuple(n.text for n in legend), tuple(n.text for n in problems),
                   tuple(notes))


def setup_lines(a: Analysis) -> list[str]:
    """SETUP: the machine, the sides, runs and their order, stopping, what was counted, sources, sessions."""
    from perfab.machine import describe
    from perfab.plan import describe_order

    kernels = booted_kernels(a)
    lines = [f"  {_host_kernel(line) if kernels else line}" for line in describe(a.environment)]
    runs = ", ".join(f"{v} {a.runs_per_side.get(v, 0)}" for v in (a.baseline, *a.variants))
    if a.variants:
        lines.append(f"  sides    : baseline = {a.baseline}; experiment = {', '.join(a.variants)}")
    else:
        lines.append(f"  side     : {a.baseline} (one side: absolute values, no comparison)")
    lines.append(f"  runs     : {runs} measured ({describe_order(a.spec) if a.spec else a.order})")
    if a.spec is not None and a.spec.sequential is not None:
        seq = a.spec.sequential
        why = a.stop_reason or (a.decision.reason if a.decision is not None else "not run yet")
        lines.append(f"  stopping : runs = \"auto\", {seq.min_runs}..{seq.max_runs} per side; {why}")
    if (replicas := replication_line(a)) is not None:
        lines.append(f"  replicas : {replicas}")
    lines.append(f"  counted  : {counted(a)}")
    lines += [f"  kernel   : {side} = {kernel_line(k)}" for side, k in kernels.items()]
    if a.environment.get("kexec.boots"):  # sides this machine kexec'd into: the kernels in the order they ran
        lines.append(f"  kernels  : {kexec_order(a.environment['kexec.boots'])}")
    for variant, src in a.sources.items():
        if src.get("commit"):
            subject = f' ("{src["subject"]}")' if src.get("subject") else ""
            lines.append(f"  source   : {variant} = {src.get('ref')} {src['commit'][:12]}{subject}")
        if src.get("command"):
            lines.append(f"  built    : {variant}: {' '.join(src['command'])}")
    if a.sessions > 1:
        lines.append(f"  sessions : {a.sessions}")
    return lines


def replication_line(a: Analysis) -> str | None:
    """SETUP's words for the newest session's unit of replication and perturbations; None where every run is its
    own draw and nothing was perturbed (a run on this machine)."""
    r = Replication.from_json(a.replication)
    if r is None or (r.unit == RUN and not r.perturbations):
        return None
    return r.describe(a.spec.runs if a.spec is not None and a.spec.sequential is None else None)


def variance_rows(rows: tuple[Row, ...]) -> tuple[Row, ...]:
    """The rows judged on one mean per unit of replication, whose variance components the report shows."""
    return tuple(r for r in rows if r.levels is not None and r.estimate is not None)


def variance_note(a: Analysis, rows: tuple[Row, ...]) -> str | None:
    """The sentence under a VARIANCE block: the units, and at the session's costs the runs per unit that narrow the
    interval most for the time spent (``perfab.analyse.units.optimal_runs``)."""
    if not rows:
        return None
    first = rows[0].levels
    units = f"{first.base_units}+{first.exp_units} {first.unit}s, {first.runs_per_unit:.1f} runs per {first.unit}"
    text = (f"One standard deviation of each level over the baseline's mean ({units}); a row is judged on one mean "
            f"per {first.unit}.")
    if a.unit_costs is not None:
        unit_cost, run_cost = a.unit_costs
        best = sorted({r_ for r in rows if (r_ := optimal_runs(r.levels, unit_cost, run_cost)) is not None})
        if best:
            span = str(best[0]) if len(best) == 1 else f"{best[0]}-{best[-1]}"
            text += (f" A {first.unit} adds {unit_cost:.1f} s to its first run and a restored run takes "
                     f"{run_cost:.1f} s: {span} runs per {first.unit} give these rows the narrowest interval for the "
                     "time (Kalibera & Jones 2013).")
    return text


def booted_kernels(a: Analysis) -> dict[str, dict]:
    """Side -> the kernel its guests booted (``KernelImage.identity``, stored with the session), in side order."""
    found = {side: (a.sources.get(side) or {}).get("kernel") for side in (a.baseline, *a.variants)}
    return {side: k for side, k in found.items() if isinstance(k, dict)}


def kexec_order(stored: str) -> str:
    """A kexec session's stored ``kexec.boots`` (``1:a:confirmed 2:b:failed``, written by ``perfab.kexec.driver``)
    as SETUP shows it: ``a -> b (boot 2 failed) (a kexec per boot)``."""
    parts = []
    for item in stored.split():
        number, side, outcome = (item.split(":") + ["", ""])[:3]
        parts.append(side if outcome == "confirmed" else f"{side} (boot {number} {outcome})")
    return " -> ".join(parts) + " (a kexec per boot)"


def kernel_line(k: dict) -> str:
    """A booted kernel in one line: image, release, hashes of the image and the built .config, command line."""
    config = f", .config sha256 {str(k['config_sha256'])[:12]}" if k.get("config_sha256") else ""
    cmdline = str(k.get("cmdline") or "").replace('"', '\\"')
    return (f"{k.get('image')} (release {k.get('release') or 'unknown'}), sha256 {str(k.get('sha256'))[:12]}{config}, "
            f'cmdline "{cmdline}"')


def _host_kernel(line: str) -> str:
    """The machine's kernel line, labelled as the host's when the sides booted kernels of their own."""
    return f"Host kernel (ran QEMU): {line.removeprefix('Kernel: ')}" if line.startswith("Kernel: ") else line


def profile_kind(a: Analysis) -> str:
    """What a profile's shares are, as the backend that recorded them says (sampled time, counted instructions)."""
    return stored(a.backend).profile_kind


def counted(a: Analysis) -> str:
    """What the runs counted, as the backend that measured them describes itself."""
    return stored(a.backend).counted(a.groups)


def _methods(a: Analysis, rows: tuple[Row, ...]) -> tuple[MethodNote, ...]:
    """The methods that judged ``rows``, sorted by name, each described at the report's confidence."""
    seq = a.spec.sequential if a.spec is not None else None
    names = sorted({r.estimate.method for r in rows if r.estimate is not None})
    return tuple(MethodNote(m, get_method(m).describe(a.confidence, seq)) for m in names)


def _legend(a: Analysis, rows: tuple[Row, ...], methods: tuple[MethodNote, ...]) -> list[Note]:
    """The notes under a table: directions, what the marks mean, the tests, the detectable effect."""
    if not a.variants:
        return [Note(f"Median of each point's runs with its {fmt_pct(a.confidence, digits=3)} distribution-free "
                     "interval (order statistics of the runs; binomial coverage).", "intervals", KEY)]
    lines = [Note(_directions(rows), "directions", KEY)] if _directions(rows) else []
    margins = sorted({r.margin for r in rows if r.estimate is not None})
    margin = "/".join(fmt_pct(m) for m in margins) or "0.1%"
    if _counts_only(methods):
        marks = (f"{Verdict.CHANGE} = a difference beyond the margin (deterministic counts), "
                 f"{Verdict.FLAT} = within +-{margin}.")
    else:
        unit = next((r.levels.unit for r in rows if r.levels is not None), "run")
        marks = (f"{Verdict.CHANGE} = beyond per-{unit} noise{noise_range(list(rows))}, {Verdict.NS} = within noise, "
                 f"{Verdict.FLAT} = within +-{margin}.")
    lines += [Note(marks, "marks", KEY), Note(_method_note(a, methods, rows), "tests", FOLDED)]
    if any(r.estimate is not None and r.estimate.basis == ABSOLUTE for r in rows):
        lines.append(Note("Delta without %: the change in the metric's unit, where the baseline's median is 0 "
                          "and no ratio exists.", "Delta without %", FOLDED))
    mdes = [r.mde for r in measured_rows(list(rows)) if r.mde is not None and math.isfinite(r.mde)]
    if mdes:
        lines.append(Note(f"Minimum detectable effect at this n and noise (80% power): "
                          f"{100 * min(mdes):.2f}..{100 * max(mdes):.2f}%.", "MDE", FOLDED))
    return lines


def _counts_only(methods: tuple[MethodNote, ...]) -> bool:
    """Every row was judged by a method of deterministic counts: a difference is a change, not beyond noise."""
    return bool(methods) and all(get_method(m.name).traits.counted for m in methods)


def _directions(rows: tuple[Row, ...]) -> str:
    """``ops/s: higher = better. Time elapsed/User: lower = better.``"""
    by_dir: dict[bool, list[str]] = {True: [], False: []}
    for r in rows:
        if r.higher_is_better is not None and r.estimate is not None:
            name = short(r.label)
            if name not in by_dir[r.higher_is_better]:
                by_dir[r.higher_is_better].append(name)
    parts = [f"{'/'.join(names)}: {'higher' if d else 'lower'} = better." for d, names in by_dir.items() if names]
    return " ".join(parts)


def _method_note(a: Analysis, methods: tuple[MethodNote, ...], rows: tuple[Row, ...]) -> str:
    """Which tests judged the rows, and how alpha is spread across the report's rows."""
    tests = "; ".join(_for_rows(m, methods, rows) for m in methods)
    if a.spec is not None and a.spec.sequential is not None:
        return f"Tests: {tests}; Holm across rows at alpha {a.alpha:g} (primary rows carry 80% of it)."
    fdr = {"bh": "Benjamini-Hochberg FDR", "holm": "Holm FWER"}[a.fdr]
    if methods and not any(get_method(m.name).traits.tested for m in methods):  # no p-value: nothing adjusted
        return f"Method: {tests}."
    tested = [r.primary for r in a.rows if r.estimate is not None and r.estimate.p is not None]
    weighted = " (primary rows carry 80% of it)" if 0 < sum(tested) < len(tested) else ""
    return f"Tests: {tests}; {fdr} at alpha {a.alpha:g} across rows{weighted}."


def _for_rows(method: MethodNote, methods: tuple[MethodNote, ...], rows: tuple[Row, ...]) -> str:
    """A method's note naming the rows it judged, when the table mixes methods (a timing table with an exact
    checksum row must not read as if its times were exact counts); the most used method takes "the rest"."""
    if len(methods) < 2 or not rows:
        return method.text
    names = [m.name for m in methods]
    counts = {m: sum(1 for r in rows if r.estimate is not None and r.estimate.method == m) for m in names}
    if method.name == max(names, key=lambda m: (counts[m], m == DEFAULT)):  # ties: the spec's default
        return f"other rows: {method.text}"
    labels = []
    for r in rows:
        if r.estimate is not None and r.estimate.method == method.name and short(r.label) not in labels:
            labels.append(short(r.label))
    return f"{'/'.join(labels)}: {method.text}"


def _not_compared(r: Row) -> bool:
    """A row without a verdict because a side has no usable runs (not because its samples were refused)."""
    return r.verdict == Verdict.NONE and all(d.kind == Kind.NO_SAMPLES for d in r.warnings)


def _problems(info: WorkloadInfo, rows: tuple[Row, ...], rows_all: tuple[Row, ...]) -> list[Note]:
    """Failed and excluded runs, rows not compared, metrics left out, and each diagnostic with its rows."""
    lines = []
    for variant, reasons in info.failed.items():
        counts = Counter(reasons)
        detail = "; ".join(f"{n}x {why}" if n > 1 else why for why, n in counts.most_common())
        lines.append(Note(f"Failed runs on {variant}: {len(reasons)} ({detail})", "failed runs", MISSING))
    labels = {r.metric: short(r.label) for r in rows_all if r.workload == info.name}
    for (metric, reason), count in info.excluded.items():
        lines.append(Note(f"Excluded {labels.get(metric, metric)}: {reason} ({count} run{'s' if count != 1 else ''})",
                          "excluded runs", MISSING))
    mine = [r for r in rows_all if r.workload == info.name and r.verdict == Verdict.NONE]
    empty = [r.label for r in mine if _not_compared(r)]
    if empty:
        lines.append(Note(f"Not compared (no usable runs on a side): {', '.join(dict.fromkeys(empty))}",
                          "not compared", MISSING))
    if info.simulated:
        lines.append(Note(f"Not shown: {', '.join(info.simulated)}, timed by the workload under valgrind's "
                          "simulated CPU (meaningless as time); --all shows them", "not shown", MISSING))
    if info.hidden:
        lines.append(Note(f"Not shown: {len(info.hidden)} parser metric(s) without a declared direction "
                          f"({', '.join(info.hidden)}); --all shows them, or declare them with [[workload.metric]]",
                          "not shown", MISSING))
    grouped: dict = {}  # diagnostic -> labels (a baseline diagnostic comes once per variant)
    for r in [*rows, *(r for r in mine if not _not_compared(r))]:
        for d in r.warnings:
            grouped.setdefault(d, {})[short(r.label)] = None
    lines += [Note(f"{'/'.join(names)}: {d.text}", diagnostic_topic(d), diagnostic_rank(d))
              for d, names in grouped.items()]
    return lines
