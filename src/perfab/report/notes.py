"""The notes under a table, ranked, and those that change no verdict folded into one line.

A table's notes are of three sorts.  The key says how to read the marks
(``**``, ``ns``, ``flat``) and which way is better for the rows that
changed.  Some notes change what a verdict means: runs that failed or were
excluded, runs a row could not use, rows not compared or not shown, and diagnostics that say a
verdict may be wrong or could not be reached (a trend in run order, two
clusters, correlated runs, too few runs, a row with no spread that an
exact count would decide, a ``**`` that vanishes or flips when the code is
laid out differently).  The rest explain: which tests ran, how Delta
is formed, the detectable effect, a grid coarser than the margin.

The plain-text report shows the key and the notes that change a verdict,
ranked (missing data first, then doubts about verdicts by severity), and
folds the rest into one line naming what it folded and pointing to
``--verbose`` (which prints every note, as before) and ``--format json``.
Repeated warnings of one kind are shown by their first few, the rest
counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfab.analyse.diagnostics import Diagnostic, Kind

KEY = 0  # rank of the key to the table: directions of the rows that changed, what the marks mean
MISSING = 10  # failed or excluded runs, rows not compared, rows not shown
FOLDED = 99  # changes no verdict: folded into one line unless --verbose

# Diagnostics that change what a row's verdict means, most severe first; any other kind is folded.
VERDICT_KINDS = (Kind.RUNS_USED, Kind.NON_FINITE, Kind.METHOD_FALLBACK, Kind.TOO_FEW_RUNS, Kind.NO_SPREAD,
                 Kind.LAYOUT_SENSITIVE, Kind.SEQUENTIAL, Kind.SERIAL, Kind.DRIFT, Kind.BIMODAL, Kind.METHOD)
TOPICS = {Kind.RESOLUTION: "grid", Kind.BASIS: "basis"}  # what the fold line calls a folded diagnostic
SAME_KIND_SHOWN = 3  # warnings of one kind shown before the rest are counted


@dataclass(frozen=True)
class Note:
    """One note under a table, ranked for the compact text report."""

    text: str  # the note as every format prints it
    topic: str  # what it is about, as the fold line names it ("tests", "grid")
    rank: int  # KEY, MISSING, a diagnostic's rank, or FOLDED; lower is shown first


def diagnostic_rank(d: Diagnostic) -> int:
    """A row diagnostic's rank: its place in ``VERDICT_KINDS`` after the missing data, else FOLDED."""
    return MISSING + 1 + VERDICT_KINDS.index(d.kind) if d.kind in VERDICT_KINDS else FOLDED


def diagnostic_topic(d: Diagnostic) -> str:
    return TOPICS.get(d.kind, d.kind.value.replace("_", " "))


def shown(notes: tuple[Note, ...]) -> list[Note]:
    """The notes a compact report prints (the key first, then by rank, each rank in document order)."""
    return sorted((n for n in notes if n.rank != FOLDED), key=lambda n: n.rank)


def fold_line(notes: tuple[Note, ...], width: int) -> str | None:
    """One line for the notes that change no verdict, naming their topics when that fits ``width``; None for none."""
    folded = [n for n in notes if n.rank == FOLDED]
    if not folded:
        return None
    lead = f"{len(folded)} note{'s' if len(folded) != 1 else ''} {'changes' if len(folded) == 1 else 'change'}"
    topics = list(dict.fromkeys(n.topic for n in folded))
    for k in range(len(topics), 0, -1):
        named = ", ".join(topics[:k]) + (", ..." if k < len(topics) else "")
        line = f"{lead} no verdict: {named} (see --verbose)"
        if len(line) <= width:
            return line
    return f"{lead} no verdict (see --verbose or --format json)"


def collapsed(warnings: tuple[Diagnostic, ...], limit: int = SAME_KIND_SHOWN,
              lists: str = "--verbose or --format json lists them") -> list[str]:
    """The warnings' texts, at most ``limit`` of each kind, then one line counting the rest of that kind (and
    saying what ``lists`` them all)."""
    total: dict[Kind, int] = {}
    for w in warnings:
        total[w.kind] = total.get(w.kind, 0) + 1
    seen: dict[Kind, int] = {}
    out = []
    for w in warnings:
        at = seen[w.kind] = seen.get(w.kind, 0) + 1
        if at <= limit:
            out.append(w.text)
        elif at == limit + 1:
            out.append(f"... and {total[w.kind] - limit:,} more {w.kind.value.replace('_', ' ')} warnings ({lists})")
    return out
