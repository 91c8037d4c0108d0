"""Read the totals of a cachegrind or callgrind out file.

Both tools write a text file whose header names the counted events and whose
totals sit on one line; the per-function lines between are not needed here.

cachegrind (``cachegrind.out``)::

    desc: I1 cache:         32768 B, 64 B, 8-way associative
    cmd: ./inline 200000
    events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
    fl=... / fn=... / per-line counts
    summary: 13760066 752245 9559 2836718 2326 1817 613286 651 606

callgrind (``callgrind.out``) carries ``events:`` and ``summary:`` in its
header and repeats the totals as the last line, ``totals:``.  A totals line
may leave out trailing zero counts.

Only the head and the tail of the file are read, so a many-megabyte out file
costs the same as a small one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from perfab.errors import ToolError

HEAD_BYTES = 64 * 1024  # the header (desc/cmd/events/summary) fits well within this
TAIL_BYTES = 16 * 1024  # the last line (summary/totals) fits well within this
_DESC_RE = re.compile(r"^(I1|D1|LL) cache:\s*(\d+) B, (\d+) B, (\d+)-way associative", re.IGNORECASE)
_BODY_PREFIXES = ("fl=", "fn=", "ob=", "fi=", "fe=", "cfn=", "cfl=", "cob=", "calls=")


@dataclass(frozen=True)
class OutFile:
    """What an out file says about the whole run."""

    events: dict[str, int]  # event name (Ir, I1mr, ...) -> total count
    caches: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # I1/D1/LL -> (bytes, assoc, line)
    cmd: str = ""  # the command valgrind ran, as recorded


def _head_lines(text: str) -> list[str]:
    """The header lines: everything before the first per-function record."""
    lines = []
    for line in text.splitlines():
        if line.startswith(_BODY_PREFIXES):
            break
        lines.append(line)
    return lines


def _totals_line(head: list[str], tail: str) -> str | None:
    """The ``summary:`` line of the header, else the last ``summary:``/``totals:`` line."""
    for line in head:
        if line.startswith("summary:"):
            return line
    for line in reversed(tail.splitlines()):
        if line.startswith(("summary:", "totals:")):
            return line
    return None


def _read_head_tail(path: Path) -> tuple[str, str]:
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
            size = f.seek(0, 2)
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read()
    except OSError as err:
        raise ToolError(f"cannot read valgrind out file {path}: {err.strerror}: rerun the workload") from None
    return head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")


def parse_out_file(path: Path) -> OutFile:
    """Parse ``path``; ToolError when it lacks an ``events:`` or totals line."""
    head_text, tail_text = _read_head_tail(Path(path))
    head = _head_lines(head_text)
    names = next((ln.split()[1:] for ln in head if ln.startswith("events:")), None)
    totals = _totals_line(head, tail_text)
    if not names or totals is None:
        missing = "events:" if not names else "summary:/totals:"
        raise ToolError(
            f"valgrind out file {path} has no {missing} line (truncated or not a "
            "cachegrind/callgrind file): rerun the workload; check valgrind.log beside it"
        )
    try:
        counts = [int(tok) for tok in totals.split()[1:]]
    except ValueError:
        raise ToolError(
            f"valgrind out file {path}: unreadable totals line {totals!r}: rerun the workload"
        ) from None
    counts += [0] * (len(names) - len(counts))  # trailing zero counts may be omitted
    caches = {}
    for line in head:
        m = _DESC_RE.match(line[len("desc:") :].strip()) if line.startswith("desc:") else None
        if m:
            caches[m.group(1).upper()] = (int(m.group(2)), int(m.group(4)), int(m.group(3)))
    cmd = next((ln[len("cmd:") :].strip() for ln in head if ln.startswith("cmd:")), "")
    return OutFile(dict(zip(names, counts)), caches, cmd)


def sum_out_files(files: list[OutFile]) -> dict[str, int]:
    """Event totals over several processes (one out file each), by event name."""
    total: dict[str, int] = {}
    for out in files:
        for name, count in out.events.items():
            total[name] = total.get(name, 0) + count
    return total


def metrics_from_events(events: dict[str, int]) -> dict[str, float]:
    """perfab's metric names from valgrind's event totals; absent events give no metric.

    ``D1 misses`` = D1mr + D1mw; ``LL misses`` = ILmr + DLmr + DLmw;
    ``I1 MPKI`` = 1000 * I1mr / Ir, from the raw counts.  With branch
    simulation: ``branches`` = Bc + Bi, ``branch mispredicts`` = Bcm + Bim,
    and the indirect ones apart (Bi, Bim).
    """
    metrics: dict[str, float] = {}
    if "Ir" in events:
        metrics["instructions"] = float(events["Ir"])
    if "I1mr" in events:
        metrics["I1 misses"] = float(events["I1mr"])
        if events.get("Ir"):
            metrics["I1 MPKI"] = 1000.0 * events["I1mr"] / events["Ir"]
    if "D1mr" in events and "D1mw" in events:
        metrics["D1 misses"] = float(events["D1mr"] + events["D1mw"])
    if all(k in events for k in ("ILmr", "DLmr", "DLmw")):
        metrics["LL misses"] = float(events["ILmr"] + events["DLmr"] + events["DLmw"])
    if "Dr" in events and "Dw" in events:
        metrics["D1 refs"] = float(events["Dr"] + events["Dw"])
    if "Bc" in events and "Bi" in events:  # --branch-sim=yes: conditional and indirect branches
        metrics["branches"] = float(events["Bc"] + events["Bi"])
        metrics["branch mispredicts"] = float(events.get("Bcm", 0) + events.get("Bim", 0))
        metrics["indirect branches"] = float(events["Bi"])
        metrics["indirect mispredicts"] = float(events.get("Bim", 0))
    return metrics
